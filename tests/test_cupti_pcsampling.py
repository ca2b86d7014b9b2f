"""``mode="pcsampling"`` on the CUPTI backend over the fake PC Sampling API (real byte layouts)."""
import re
import warnings

import pytest

import proton_ctypes as proton
from conftest import find, flat, parsed, read_tree
from fakes.fake_cupti import FakeDriver
from fakes.fake_cupti_pcsampling import FakeCuptiPC
from proton_ctypes.backends import select
from proton_ctypes.backends.cupti import CuptiBackend
from proton_ctypes.backends.nvidia.lib import CuptiError, load_cupti
from proton_ctypes.backends.nvidia.pcsampling import METRIC_NAMES, PCSampler, pc_sampling_period

PCS = [(16, [(1, 5), (2, 3), (3, 7)]),     # barrier 5, barrier_not_issued 3, long_scoreboard 7
       (32, [(5, 2), (6, 1)]),             # selected 2, math_pipe_throttle 1
       (48, [(3, 4)])]                     # no line info -> on the kernel node itself


@pytest.fixture
def fake(request):
    f = FakeCuptiPC(**getattr(request, "param", {}))
    select.register("cupti", lambda: CuptiBackend(lib=f, driver=FakeDriver(f)))
    f.lines[("matmul_kernel", 16)] = ("/src", "mm.py", 42)
    f.lines[("matmul_kernel", 32)] = ("/src", "mm.py", 43)
    yield f
    proton.finalize()
    select.unregister("cupti")


def _run(fake, mode="pcsampling", name="pc"):
    proton.start(name, backend="cupti", mode=mode)
    crc = fake.load_module()
    with proton.scope("s"):
        fake.launch_sampled("matmul_kernel", PCS, crc=crc)
    proton.finalize()
    return read_tree(f"{name}.hatchet")[0]


def test_default_interval_configures_protons_sampling_period(fake):
    _run(fake)
    assert fake.config[1] == 10            # 2**10 cycles: Proton's DefaultFrequency


@pytest.mark.parametrize("mode", ["pcsampling:interval=4096", proton.mode.PCSampling(interval=4096)])
def test_interval_is_passed_to_cupti_as_the_nearest_power_of_two(fake, mode):
    _run(fake, mode=mode)
    assert fake.config[1] == 12


def test_configuration_is_protons(fake):
    _run(fake)
    assert fake.config[4] == 128 << 20 and fake.config[3] == 16 << 20       # hardware / scratch buffers
    assert fake.config[6] == 1 and fake.config[5] == 1                      # start/stop control, continuous
    names = [n for i, n in fake.stall_reasons if i in fake.config[2]]
    # stall reasons are those containing one of Proton's names; not_selected and gmma do not match
    assert names == ["smsp__pcsamp_warps_issue_stalled_barrier",
                     "smsp__pcsamp_warps_issue_stalled_barrier_not_issued",
                     "smsp__pcsamp_warps_issue_stalled_long_scoreboard",
                     "smsp__pcsamp_warps_issue_stalled_selected",
                     "smsp__pcsamp_warps_issue_stalled_math_pipe_throttle"]


def test_each_launch_is_one_sampling_range(fake):
    _run(fake)
    calls = [c for c, _ in fake.pc_calls]
    assert calls == ["cuptiPCSamplingEnable", "cuptiPCSamplingStart", "cuptiPCSamplingStop",
                     "cuptiPCSamplingGetData", "cuptiPCSamplingDisable"]


def test_kernels_are_traced_serialized_and_joined_through_their_launch_records(fake):
    """Proton enables CUPTI_ACTIVITY_KIND_KERNEL in this mode (continuous PC sampling is not
    compatible with concurrent kernel tracing); the kernels still get their nodes and times."""
    proton.start("pc", backend="cupti", mode="pcsampling")
    kinds = set(fake.kinds)
    backend = select.get("cupti")
    source = backend.launch_source
    crc = fake.load_module()
    with proton.scope("s"):
        fake.launch_sampled("matmul_kernel", PCS, crc=crc)
        fake.launch("other", api="runtime")
    proton.finalize()
    assert 3 in kinds and 10 not in kinds and source == "api"
    root = read_tree("pc.hatchet")[0]
    assert find(root, "s", "matmul_kernel")["metrics"]["count"] == 1
    assert find(root, "s", "other")["metrics"]["count"] == 1
    assert find(root, "s", "other")["metrics"]["time (ns)"] > 0


def test_source_lines_become_frames_under_the_kernel_node(fake):
    root = _run(fake)
    kernel = find(root, "s", "matmul_kernel")
    assert [c["frame"]["name"] for c in kernel["children"]] == ["/src/mm.py:42@matmul_kernel",
                                                                 "/src/mm.py:43@matmul_kernel"]
    assert kernel["metrics"]["count"] == 1             # the kernel's own activity metrics stay


def test_metrics_are_protons_pcsampling_values(fake):
    root = _run(fake)
    line42 = find(root, "s", "matmul_kernel", "/src/mm.py:42@matmul_kernel")["metrics"]
    assert set(line42) == set(METRIC_NAMES)
    assert line42["num_samples"] == 15                 # every sample
    assert line42["num_stalled_samples"] == 12         # not_issued samples are not "stalled"
    assert line42["stalled_barrier"] == 5 and line42["stalled_long_scoreboard"] == 7
    line43 = find(root, "s", "matmul_kernel", "/src/mm.py:43@matmul_kernel")["metrics"]
    assert line43["stalled_selected"] == 2 and line43["stalled_math_pipe_throttle"] == 1
    kernel = find(root, "s", "matmul_kernel")["metrics"]
    assert kernel["num_samples"] == 4 and kernel["stalled_long_scoreboard"] == 4   # PC without line info


def test_more_pcs_than_the_buffer_are_read_with_get_data(fake):
    proton.start("big", backend="cupti", mode="pcsampling")
    crc = fake.load_module()
    fake.launch_sampled("matmul_kernel", [(16 + 16 * i, [(3, 1)]) for i in range(2500)], crc=crc)
    proton.finalize()
    root, _ = read_tree("big.hatchet")
    total = find(root, "matmul_kernel")["metrics"]["num_samples"]
    total += sum(c["metrics"]["num_samples"] for c in find(root, "matmul_kernel")["children"])
    assert total == 2500
    assert [c for c, _ in fake.pc_calls].count("cuptiPCSamplingGetData") == 2   # stop: 1024, then 1024 + 452


def test_hook_triton_op_is_the_kernel_node(fake):
    from proton_ctypes.core import general_path
    from proton_ctypes.core.threads import thread_ctx
    proton.start("op", backend="cupti", mode="pcsampling")
    crc = fake.load_module()
    ctx = thread_ctx()
    targets = general_path.op_prepare(ctx, "matmul_kernel")
    general_path.op_open(ctx, targets)
    fake.launch_sampled("matmul_kernel", PCS[:1], crc=crc)
    general_path.op_exit(ctx)
    proton.finalize()
    root, _ = read_tree("op.hatchet")
    kernel = find(root, "matmul_kernel")
    assert [c["frame"]["name"] for c in kernel["children"]] == ["/src/mm.py:42@matmul_kernel"]


def test_samples_of_a_kernel_still_queued_at_its_stop_go_to_its_own_launch_not_the_next(fake):
    """Samples of a kernel that ran outside its own range (its launch's range now waits for the
    device, but a kernel of a launch left unsampled, on another thread say, can still be running
    when a range opens) come with a later launch's range; they go to the node of that kernel's
    own latest sampled launch."""
    proton.start("late", backend="cupti", mode="pcsampling")
    with proton.scope("init"):
        fake.launch_sampled("fill", [])
    with proton.scope("test"):
        fake.launch_with_late_samples("foo", late=[("fill", 48, [(3, 4)])], pcs=[(48, [(3, 5)])])
        fake.launch_sampled("foo", [(48, [(3, 1)])])
    proton.finalize()
    root, _ = read_tree("late.hatchet")
    assert find(root, "init", "fill")["metrics"]["num_samples"] == 4
    assert find(root, "test", "foo")["metrics"]["num_samples"] == 6
    assert [c["frame"]["name"] for c in find(root, "test")["children"]] == ["foo"]


def test_samples_of_a_function_never_launched_while_sampling_stay_with_the_launch_they_came_with(fake):
    proton.start("unknown", backend="cupti", mode="pcsampling")
    with proton.scope("test"):
        fake.launch_with_late_samples("foo", late=[("before_the_session", 48, [(3, 2)])])
    proton.finalize()
    root, _ = read_tree("unknown.hatchet")
    assert find(root, "test", "before_the_session")["metrics"]["num_samples"] == 2


def test_python_context_samples_land_on_the_kernel_node_of_the_launching_stack(fake):
    """The samples' node is the kernel's: the launching program's frames, none of the profiler's."""
    proton.start("py", backend="cupti", mode="pcsampling", context="python")

    def user_launch():
        fake.launch_sampled("k", [(48, [(3, 4)])])
    user_launch()
    proton.finalize()
    nodes = flat(read_tree("py.hatchet")[0])
    sampled = [path for path, m in nodes.items() if "num_samples" in m and path != ""]
    kernel = [path for path, m in nodes.items() if "count" in m]
    assert len(sampled) == 1 and len(kernel) == 1
    assert "proton_ctypes" not in sampled[0] and "user_launch" in sampled[0]
    # the same frames as the kernel's node; only the fake's ENTER and EXIT callbacks come from
    # two lines of its _api_call (a real launch calls both from one C call)
    assert re.sub(r":\d+@", ":@", sampled[0]) == re.sub(r":\d+@", ":@", kernel[0])


def test_cupti_errors_carry_the_vendor_string():
    lib = load_cupti(lib=FakeCuptiPC(fail={"cuptiPCSamplingEnable": 1}))
    sampler = PCSampler(lib, 10, lambda: None, lambda groups: None)
    with pytest.raises(CuptiError, match="cuptiPCSamplingEnable failed: CUPTI error 1: CUPTI_ERROR_INVALID_PARAMETER"):
        sampler.initialize(0xC7C70000)


@pytest.mark.parametrize("fake", [{"fail": {"cuptiPCSamplingSetConfigurationAttribute": 1}}], indirect=True)
def test_errors_inside_a_launch_warn_with_the_vendor_string_instead_of_crashing(fake):
    proton.start("bad", backend="cupti", mode="pcsampling")
    with pytest.warns(RuntimeWarning, match="cuptiPCSamplingSetConfigurationAttribute failed.*INVALID_PARAMETER"):
        fake.launch("matmul_kernel")
    proton.finalize()
    assert find(read_tree("bad.hatchet")[0], "matmul_kernel")["metrics"]["count"] == 1


@pytest.mark.parametrize("mode,interval,period", [
    ("pcsampling", 1000, 10),
    ("pcsampling:interval=1000", 1000, 10),
    ("pcsampling:interval=1", 1, 5),          # CUPTI's minimum
    ("pcsampling:interval=65536", 65536, 16),
    ("pcsampling:interval=" + str(1 << 40), 1 << 40, 31),     # CUPTI's maximum
])
def test_mode_string_parsing(mode, interval, period):
    assert parsed("cupti", mode) == ("pcsampling", {"interval": interval})
    assert pc_sampling_period(interval) == period


@pytest.mark.parametrize("mode", ["pcsampling:interval=0", "pcsampling:interval=-3", "pcsampling:interval=x"])
def test_bad_interval_raises_protons_value_error(mode):
    with pytest.raises(ValueError, match=r"^Interval must be a positive integer\.$"):
        select.parse_mode("cupti", mode)
    with pytest.raises(ValueError, match=r"^Interval must be a positive integer\.$"):
        proton.mode.PCSampling(interval=0)


def test_unknown_pcsampling_option_is_refused():
    with pytest.raises(ValueError, match=r"unsupported option key: period"):
        select.parse_mode("cupti", "pcsampling:period=3")


def test_pcsampling_on_the_host_backend_still_errors():
    with pytest.raises(ValueError, match="unsupported mode: pcsampling"):
        proton.start("h", backend="host", mode="pcsampling")


def test_default_mode_does_not_touch_pc_sampling(fake):
    proton.start("plain", backend="cupti")
    fake.load_module()
    fake.launch_sampled("matmul_kernel", PCS)
    proton.finalize()
    assert fake.pc_calls == [] and not fake.config
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert "num_samples" not in find(read_tree("plain.hatchet")[0], "matmul_kernel")["metrics"]


def test_a_kernel_that_runs_after_its_launch_returns_is_sampled_in_its_own_range(fake):
    """A tiny kernel (Proton's test_pcsampling: a 1024-element torch fill) may not have started when
    its launch call returns; its range closes only once the device has run it, so its samples are
    taken, and filed under its own launch (on the H100, in Proton's suite, a range closed at the
    launch's return got none of them)."""
    proton.start("queued", backend="cupti", mode="pcsampling")
    with proton.scope("init"):
        fake.launch_queued("fill", [(48, [(3, 4)])])
    with proton.scope("test"):
        fake.launch_queued("foo", [(48, [(3, 6)])])
    proton.finalize()
    root, _ = read_tree("queued.hatchet")
    assert find(root, "init", "fill")["metrics"]["num_samples"] == 4
    assert find(root, "test", "foo")["metrics"]["num_samples"] == 6
    assert [c["frame"]["name"] for c in find(root, "test")["children"]] == ["foo"]


def test_launches_captured_into_a_graph_open_no_range_and_never_synchronise(fake):
    """A range synchronises the device, which a stream capture forbids; Proton samples no captured
    launch either."""
    proton.start("captured", backend="cupti", mode="pcsampling")
    backend = select.get("cupti")
    syncs = backend._get_driver().syncs
    with proton.scope("s"):
        fake.capture(["a", "b"])
    assert backend._get_driver().syncs == syncs
    assert "cuptiPCSamplingStart" not in [c for c, _ in fake.pc_calls]
    fake.launch_sampled("matmul_kernel", PCS)           # after the capture: sampled again
    assert [c for c, _ in fake.pc_calls].count("cuptiPCSamplingStart") == 1
    proton.finalize()


def test_a_sampling_session_after_a_detach_of_cupti_samples_as_the_first_one(fake):
    proton.start("plain", backend="cupti")
    fake.launch("k")
    proton.finalize()
    assert fake.calls["cuptiFinalize"] == 1
    root = _run(fake)
    assert fake.calls["cuptiFinalize"] == 2
    assert find(root, "s", "matmul_kernel")["metrics"]["num_samples"] > 0
