"""bench/models.py's command line (the figures come from the H200): each ``proton_ctypes:<variant>``
sets a switch the backend really reads, an unknown one (or a malformed ``proton_ctypes:env:NAME=VALUE``)
is a clear error before any model runs, and an environment variant's rows stand beside the others."""
import pathlib
import subprocess
import sys

BENCH = pathlib.Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))
import models  # noqa: E402

from fakes.fake_cupti import FakeCupti  # noqa: E402
from proton_ctypes.backends.nvidia import activity  # noqa: E402
from proton_ctypes.backends.nvidia.lib import load_cupti  # noqa: E402


def test_each_variant_sets_a_switch_the_cupti_backend_reads():
    for variant, (name, value) in models.VARIANTS.items():
        env = {getattr(activity, name): value}
        if variant == "lazy":
            assert activity.lazy_timestamps(env)
        elif variant in ("api", "position", "timestamps"):
            source, _ = activity.choose_launch_source(load_cupti(FakeCupti()), False, environ=env)
            assert source == {"api": activity.LAUNCH_FROM_API, "position": activity.LAUNCH_FROM_POSITION,
                              "timestamps": activity.LAUNCH_FROM_KERNEL}[variant]
        else:
            raise AssertionError(f"variant {variant} has no check here")


def test_an_unknown_variant_is_refused_with_the_known_ones_named():
    p = subprocess.run([sys.executable, str(BENCH / "models.py"), "--impls", "proton,proton_ctypes:nope"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert "proton_ctypes:nope: no such variant (proton_ctypes:lazy|api|timestamps|position)" in p.stderr


def test_kernel_paths_sum_the_gpu_time_of_kernel_nodes_only(tmp_path):
    kernel = {"frame": {"name": "k"}, "metrics": {"device_id": "0", "count": 3, "time (ns)": 900}, "children": []}
    scope = {"frame": {"name": "s"}, "metrics": {"time (ns)": 900}, "children": [kernel]}
    root = {"frame": {"name": "ROOT"}, "metrics": {"time (ns)": 900}, "children": [scope]}
    path = tmp_path / "p.hatchet"
    path.write_text(__import__("json").dumps([root, {}]))
    got = models.kernel_paths(str(path))
    assert got["paths"] == {"/ROOT/s/k": 3} and got["kernel_ns"] == 900


def test_other_threads_overhead_is_profiled_minus_bare_cpu_per_step_by_thread_name():
    rs = [{"steps": 10, "threads_cpu_s": [{"collector": 0.001, "autograd": 0.004}],
           "bare_threads_cpu_s": [{"autograd": 0.002}, {"autograd": 0.004}]}]
    assert models._threads_over(rs) == {"autograd": 100.0, "collector": 100.0}
    assert models.other_threads_cpu_s({1: 1.0, 2: 2.0}, {1: 1.5, 2: 2.25, 3: 0.5}, {2: "a", 3: "a"}, me=1) == \
        {"a": 0.75}


def test_a_cost_left_behind_after_finalize_shows_as_bare_chunks_after_minus_before_per_step():
    # two processes, 10 steps a chunk: bare chunks after the sessions 1 ms and 3 ms slower
    rs = [{"steps": 10, "bare_chunks_s": [1.000, 1.001, 1.001]},
          {"steps": 10, "bare_chunks_s": [1.000, 1.002, 1.004]}]
    assert models._bare_drift(rs) == 200.0          # median of 100 and 300 µs per step
    assert models._bare_drift([{"steps": 10, "bare_chunks_s": [1.0]}]) is None


def test_a_malformed_environment_variant_is_refused_before_any_model_runs():
    p = subprocess.run([sys.executable, str(BENCH / "models.py"), "--impls", "proton,proton_ctypes:env:NOVALUE"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert "expected proton_ctypes:env:NAME=VALUE" in p.stderr


def test_an_environment_variant_gets_rows_of_its_own_beside_the_plain_runs():
    case = "transformer eager, no scopes"

    def run(wall_s):
        return {case: {"steps": 10, "bare_s": [1.0], "wall_s": [wall_s], "finalize_s": [0.01],
                       "paths": {"/ROOT/k": 10}, "warm_steps": 2, "warm_s": [0.0]}}

    switched = "proton_ctypes:env:PROTON_CTYPES_LOG_REWRITE=0"
    rows, mismatches = models.summarize({"proton": [run(1.004)], "proton_ctypes": [run(1.002)],
                                         switched: [run(1.003)]}, [case])
    mine = {r.get("variant"): r for r in rows if r["impl"] == "proton_ctypes"}
    assert set(mine) == {None, "env:PROTON_CTYPES_LOG_REWRITE=0"}
    assert mine["env:PROTON_CTYPES_LOG_REWRITE=0"]["overhead_us"] == 300.0
    assert mine["env:PROTON_CTYPES_LOG_REWRITE=0"]["ratio_to_proton"] == 0.75
    assert mine["env:PROTON_CTYPES_LOG_REWRITE=0"]["paths_match"] and not mismatches
