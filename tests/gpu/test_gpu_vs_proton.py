"""The same GPU scenarios under real Proton and under proton_ctypes, compared node by node.

Tree shape, frame names, kernel counts and user metrics must be identical; kernel time per
node within 5 % (plus 64 ns per launch for the GPU timer's granularity).  Needs a CUDA GPU
and ``triton.profiler``; skipped elsewhere.
"""
import json
import os
import subprocess
import sys

import pytest

from proton_ctypes.writers.chrome_trace import GPU_LANE

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)
pytest.importorskip("triton.profiler")

HERE = os.path.dirname(os.path.abspath(__file__))
TREE_SCENARIOS = ["nested", "metrics", "states", "hook", "pyctx", "threads", "streams", "graph"]
TIME_KEY = "time (ns)"
#: Kernel times come from the GPU's own start/end stamps in two different processes, so
#: they agree only up to run-to-run jitter: 5 % plus this much per kernel (ns).  The
#: kernels here run ~1 µs; on the H200 the same kernel varied by up to ~0.4 µs between the
#: two processes (2026-12-03: a fill kernel 2080 vs 1696 ns, add_one 1024 vs 864 ns).
JITTER_NS = 500


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """Run the scenario script once under each profiler; return ``{module: output dir}``."""
    root = os.environ.get("PROTON_CTYPES_GPU_OUT") or str(tmp_path_factory.mktemp("gpu_scenarios"))
    dirs = {}
    for module in ("triton.profiler", "proton_ctypes"):
        out = os.path.join(root, module.replace(".", "_"))
        run = subprocess.run([sys.executable, os.path.join(HERE, "scenarios.py"), module, out],
                             capture_output=True, text=True, timeout=300)
        with open(os.path.join(root, f"{module}.log"), "w") as f:
            f.write(run.stdout + "\n" + run.stderr)
        assert run.returncode == 0, run.stderr[-3000:]
        dirs[module] = out
    return dirs


def _load(path):
    with open(path) as f:
        return json.load(f)


def _children(node):
    return {child["frame"]["name"]: child for child in node.get("children", [])}


def _compare(ours, theirs, path, problems):
    names_ours, names_theirs = _children(ours), _children(theirs)
    if set(names_ours) != set(names_theirs):
        problems.append(f"{path}: children {sorted(names_ours)} != Proton's {sorted(names_theirs)}")
    m_ours, m_theirs = ours.get("metrics", {}), theirs.get("metrics", {})
    if set(m_ours) != set(m_theirs):
        problems.append(f"{path}: metric keys {sorted(m_ours)} != Proton's {sorted(m_theirs)}")
    for key in set(m_ours) & set(m_theirs):
        a, b = m_ours[key], m_theirs[key]
        if key == TIME_KEY:
            count = max(1, int(m_theirs.get("count", 1) or 1))
            if abs(a - b) > 0.05 * abs(b) + JITTER_NS * count:
                problems.append(f"{path}: {key} {a} vs Proton's {b}")
        elif a != b:
            problems.append(f"{path}: {key} {a!r} vs Proton's {b!r}")
    for name in set(names_ours) & set(names_theirs):
        _compare(names_ours[name], names_theirs[name], f"{path}/{name}", problems)


@pytest.mark.parametrize("scenario", TREE_SCENARIOS)
def test_tree_matches_proton_node_by_node(outputs, scenario):
    ours_path = os.path.join(outputs["proton_ctypes"], scenario + ".hatchet")
    theirs_path = os.path.join(outputs["triton.profiler"], scenario + ".hatchet")
    errors = _load(os.path.join(outputs["proton_ctypes"], "errors.json"))
    assert scenario not in errors, errors[scenario]
    assert os.path.exists(theirs_path), f"real Proton wrote no {scenario}.hatchet"
    ours, theirs = _load(ours_path), _load(theirs_path)
    problems = []
    _compare(ours[0], theirs[0], "ROOT", problems)
    assert not problems, "\n".join(problems[:40])
    assert ours[1] == theirs[1], f"device info {ours[1]} vs Proton's {theirs[1]}"


def test_trace_matches_proton(outputs):
    ours = _load(os.path.join(outputs["proton_ctypes"], "trace.chrome_trace"))
    theirs = _load(os.path.join(outputs["triton.profiler"], "trace.chrome_trace"))

    def kernels(doc, lane_base=0):
        return sorted((e["name"], tuple(e["args"].get("call_stack", ())), e["tid"] - lane_base)
                      for e in doc["traceEvents"] if e.get("cat") == "kernel")
    # the reference is Proton 3.6 (kernel lane = stream); 3.9, which we write, puts the lane
    # of stream S at GPU_LANE + S
    assert kernels(ours, GPU_LANE) == kernels(theirs)
    ours_dur = sorted(e["dur"] for e in ours["traceEvents"] if e.get("cat") == "kernel")
    theirs_dur = sorted(e["dur"] for e in theirs["traceEvents"] if e.get("cat") == "kernel")
    for a, b in zip(ours_dur, theirs_dur):
        assert abs(a - b) <= 0.05 * b + JITTER_NS / 1000  # µs


def test_no_records_dropped(outputs):
    stats = _load(os.path.join(outputs["proton_ctypes"], "backend_stats.json"))
    assert stats, "the cupti backend did not run"
    for name, s in stats.items():
        assert s.get("cupti_dropped", 0) == 0 and s.get("join_invalid_time", 0) == 0, (name, s)
