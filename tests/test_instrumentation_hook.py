"""The instrumentation hook on the CPU: Triton's registration API, compilation, launches.

Triton 3.9 is installed here and compiles for sm_90 without a GPU, so the real passes run:
a fake active driver (``triton.runtime.driver.set_active``, as the project's oracle does)
gives the target and the device properties the hook reads.  Launches are simulated by
handing the hook a buffer built with :mod:`proton_ctypes.backends.instrumentation.layout` as if the
allocator had produced it.
"""
import json
import os
import sys
import warnings

import numpy as np
import pytest

triton = pytest.importorskip("triton")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "data", "instrumentation"))

import proton_ctypes as proton  # noqa: E402
import instr_scenarios as S  # noqa: E402
from proton_ctypes.flags import flags  # noqa: E402
from proton_ctypes.hooks.hook import HookManager  # noqa: E402
from proton_ctypes.hooks.instrumentation import InstrumentationHook  # noqa: E402
from proton_ctypes.backends import select  # noqa: E402
from proton_ctypes.backends.instrumentation import passes  # noqa: E402
from proton_ctypes.backends.instrumentation.layout import build_block, build_buffer, scratch_size  # noqa: E402
from proton_ctypes.backends.instrumentation.metadata import KERNELS, make_info  # noqa: E402

HAS_REGISTRATION_API = passes._registration_api() is not None


@pytest.fixture
def fake_gpu(tmp_path, monkeypatch):
    """A fake sm_90 driver and a private Triton cache for the duration of a test."""
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(triton.runtime.driver, "_active", S.fake_driver())
    warnings.filterwarnings("ignore", message="TRITON_DEFAULT_FP_FUSION")
    yield
    try:
        proton.finalize()
    finally:
        HookManager.unregister()


def hook():
    return S.active_hook()


class Launch:
    def __init__(self, fid, stream=0):
        self.data = {"function": fid, "stream": stream}


def run_launch(h, fid, buf):
    md = Launch(fid)
    h.allocator._tls.pending = buf
    h.enter(md)
    h.exit(md)


# ----------------------------------------------------------------------------------- activation
def test_start_registers_passes_allocator_mode_and_flag(fake_gpu):
    from triton.runtime import _allocation
    assert not flags.instrumentation_on
    proton.start("s", backend="instrumentation", mode="default:optimizations=clock32")
    h = hook()
    assert flags.instrumentation_on
    assert _allocation._profile_allocator.get() is h.allocator
    assert triton.knobs.compilation.instrumentation_mode == str(h.mode)
    assert "clock32" in triton.knobs.compilation.instrumentation_mode
    cbs = passes.registered_callbacks("nvidia")
    if HAS_REGISTRATION_API:
        assert set(cbs) == {"load-dialects", "ttgpuir-to-llvmir", "llvmir-to-llvm"}
    else:
        assert set(cbs) == {"ttgpuir_to_llvmir", "llvmir_to_llvm"}
    proton.finalize()
    assert not flags.instrumentation_on
    assert not passes.registered_callbacks("nvidia")
    assert triton.knobs.compilation.instrumentation_mode == ""
    assert isinstance(_allocation._profile_allocator.get(), _allocation.NullAllocator)


def test_deactivate_and_activate_follow_the_session(fake_gpu):
    sid = proton.start("s", backend="instrumentation")
    proton.deactivate(sid)
    assert not flags.instrumentation_on and not passes.registered_callbacks("nvidia")
    proton.activate(sid)
    assert flags.instrumentation_on and passes.registered_callbacks("nvidia")


def test_only_one_active_instance(fake_gpu):
    proton.start("s", backend="instrumentation")
    with pytest.raises(RuntimeError, match="^Only one instance of the instrumentation hook can be active at a time.$"):
        InstrumentationHook("default").activate()


def test_unsupported_target_backend(fake_gpu):
    from triton.backends.compiler import GPUTarget

    class Other:
        utils = S.fake_driver().utils

        def get_current_target(self):
            return GPUTarget("cpu", 0, 0)

        def get_current_device(self):
            return 0

    triton.runtime.driver._active = Other()
    with pytest.raises(RuntimeError, match="^Unsupported backend: cpu$"):
        InstrumentationHook(None).activate()


def test_granularity_is_refused_at_start_with_protons_message(fake_gpu):
    with pytest.raises(ValueError, match="Only warp granularity is supported for now"):
        proton.start("s", backend="instrumentation", mode="default:granularity=cta")
    assert not flags.instrumentation_on


def test_mode_errors_surface_from_start(fake_gpu):
    with pytest.raises(ValueError, match="^Malformed instrumentation option: 'x'$"):
        proton.start("s", backend="instrumentation", mode="default:x")


def test_backend_unknown_device_type():
    from proton_ctypes.backends.instrumentation.devices import InstrumentationBackend
    with pytest.raises(RuntimeError, match=r"^\[PROTON\] Unknown device type: tpu$"):
        InstrumentationBackend().start(None, select.parse_mode("instrumentation", "tpu:default"))


def test_legacy_registration_object_of_triton_36(fake_gpu, monkeypatch):
    """triton 3.6 keeps an object with patch/load_dialects on the backend's compiler class."""
    from triton.backends import backends
    monkeypatch.setattr(passes, "_registration_api", lambda: None)
    comp = backends["nvidia"].compiler
    before = getattr(comp, "instrumentation", None)
    mode = proton_mode("default")
    reg = passes.register(mode, "nvidia", 0, 1, 128)
    inst = comp.instrumentation
    assert isinstance(inst, passes.LegacyInstrumentation)
    assert set(inst.manager) == {"ttgpuir_to_llvmir", "llvmir_to_llvm"}
    with pytest.raises(RuntimeError, match="IR already registered: ttgpuir_to_llvmir"):
        inst.register("ttgpuir_to_llvmir", lambda pm: None)
    reg.remove()
    assert getattr(comp, "instrumentation", None) is before


def proton_mode(s):
    from proton_ctypes.backends.instrumentation.modes import interpret_mode
    return interpret_mode(s)


# ----------------------------------------------------------------------------------- compilation
def _compile(kernel_fn, gluon=True, signature=None, constexprs=None):
    from triton.backends.compiler import GPUTarget
    if gluon:
        from triton.experimental.gluon._runtime import GluonASTSource as Src
    else:
        from triton.compiler import ASTSource as Src
    src = Src(kernel_fn, signature=signature, constexprs=constexprs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32),
                          options={"num_warps": 4, "instrumentation_mode": triton.knobs.compilation.instrumentation_mode})


def _kernels():
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    import proton_ctypes.language as pl

    @gluon.jit
    def nested(X, N: gl.constexpr):
        pl.enter_scope("outer")
        layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
        offs = gl.arange(0, N, layout)
        x = gl.load(X + offs)
        with pl.scope("inner"):
            x = x + 1
        gl.store(X + offs, x)
        pl.exit_scope("outer")

    return nested


SIG = {"X": "*fp32", "N": "constexpr"}


def test_compiled_kernel_has_records_and_init_handle_reads_them(fake_gpu):
    nested = _kernels()
    proton.start("s", backend="instrumentation")
    k = _compile(nested, signature=SIG, constexprs={"N": 128})
    assert k.metadata.profile_scratch_size == 8320  # 128-byte header area + 8 KiB shared buffer
    assert "proton.record start \"outer\"" in k.asm["ttgir"]
    assert "%clock_hi" in k.asm["ptx"]
    h = hook()
    h.init_handle(None, 0xABC, k.name, k.metadata_group, k.hash)
    info = KERNELS[0xABC]
    assert (info.name, info.num_warps, info.scratch) == ("nested", 4, 8320)
    assert info.paths == {0: ("outer",), 1: ("outer", "inner")}
    h.destroy_handle(None, 0xABC, k.name, k.metadata_group, k.hash)
    assert 0xABC not in KERNELS


def test_without_instrumentation_the_scopes_compile_to_nothing(fake_gpu):
    nested = _kernels()
    k = _compile(nested, signature=SIG, constexprs={"N": 128})
    assert k.metadata.profile_scratch_size == 0 and "proton" not in k.asm["ttgir"]


def test_mode_options_reach_the_compiled_code(fake_gpu):
    nested = _kernels()
    proton.start("s", backend="instrumentation", mode="default:buffer_type=global:optimizations=clock32,sched_stores")
    k = _compile(nested, signature=SIG, constexprs={"N": 128})
    assert k.metadata.profile_scratch_size == 65664 and k.metadata.shared == 0  # global buffer, no smem
    assert "%clock_hi" not in k.asm["ptx"] and "%clock" in k.asm["ptx"]      # 32-bit clock reads
    proton.finalize()
    proton.start("s2", backend="instrumentation", mode="default:buffer_size=1024")
    k = _compile(nested, signature=SIG, constexprs={"N": 128})
    assert k.metadata.profile_scratch_size == 1152


def test_flush_strategy_is_refused_by_the_compiler(fake_gpu):
    nested = _kernels()
    proton.start("s", backend="instrumentation", mode="default:buffer_strategy=flush")
    with pytest.raises(RuntimeError, match="PassManager::run failed"):
        _compile(nested, signature=SIG, constexprs={"N": 128})


def test_language_checks_the_semantic(fake_gpu):
    import triton.language as tl
    import proton_ctypes.language as pl

    @triton.jit
    def tk(X):
        pl.enter_scope("a")
        tl.store(X, 1.0)
        pl.exit_scope("a")

    proton.start("s", backend="instrumentation")
    with pytest.raises(Exception, match="Unsupported semantic type"):
        _compile(tk, gluon=False, signature={"X": "*fp32"})
    pl.enable_semantic("triton")
    try:
        k = _compile(tk, gluon=False, signature={"X": "*fp32"})
        assert k.metadata.profile_scratch_size > 0
    finally:
        pl.disable_semantic("triton")


@pytest.mark.skipif(not hasattr(__import__("triton._C.libtriton", fromlist=["proton"]).proton,
                                "create_proton_allocate_event"), reason="events need triton >= 3.7")
def test_language_events(fake_gpu):
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    import proton_ctypes.language as pl

    @gluon.jit
    def ev(X, N: gl.constexpr):
        layout: gl.constexpr = gl.BlockedLayout([1], [32], [4], [0])
        offs = gl.arange(0, N, layout)
        e = pl.allocate_event("tma")
        pl.start_event(e)
        x = gl.load(X + offs)
        pl.end_event(e)
        gl.store(X + offs, x)

    @gluon.jit
    def bad(X):
        pl.start_event(X)

    proton.start("s", backend="instrumentation")
    k = _compile(ev, signature=SIG, constexprs={"N": 128})
    assert "proton.allocate_event" in k.asm["ttgir"]
    with pytest.raises(Exception, match="expected an event returned by allocate_event"):
        _compile(bad, signature={"X": "*fp32"}, constexprs={})


# ----------------------------------------------------------------------------------- launches
def _buffer(nblocks=2, warps=4, buf=1024):
    scratch = scratch_size(warps, buf)
    evs = {w: [(0, 0, 100 + w), (0, 1, 110 + w), (1, 1, 150 + 3 * w), (1, 0, 200 + 5 * w)] for w in range(warps)}
    return build_buffer([build_block(b, 7 + b, warps, buf, evs, scratch=scratch) for b in range(nblocks)],
                        scratch), scratch


def _register(fid, scratch, warps=4, name="kern"):
    KERNELS[fid] = make_info(name, warps, scratch, [(0, "outer"), (1, "inner")], [(1, 0)])


def test_a_launch_files_scope_cycles_under_the_kernel_node(fake_gpu):
    buf, scratch = _buffer()
    proton.start("s", backend="instrumentation")
    _register(1, scratch)
    with proton.scope("cpu"):
        run_launch(hook(), 1, buf)
    proton.finalize()
    with open("s.hatchet") as f:
        tree, dev = json.load(f)
    kern = tree["children"][0]["children"][0]
    assert kern["frame"]["name"] == "kern" and kern["metrics"] == {}
    outer = kern["children"][0]
    assert outer["metrics"] == {"cycles": 848, "device_id": "0", "device_type": "1", "normalized_cycles": 106.0}
    assert outer["children"][0]["metrics"]["cycles"] == 344
    assert list(dev) == ["CUDA"] and set(dev["CUDA"]["0"]) == {"arch", "bus_width", "clock_rate",
                                                             "memory_clock_rate", "num_sms"}
    assert dev["CUDA"]["0"]["arch"] == "90"


def test_launches_accumulate_and_normalise_per_launch(fake_gpu):
    buf, scratch = _buffer()
    sid = proton.start("s", backend="instrumentation")
    _register(1, scratch)
    for _ in range(3):
        run_launch(hook(), 1, buf)
    data = proton.data.get(sid)
    outer = data[0]["children"][0]["children"][0]
    assert outer["metrics"]["cycles"] == 3 * 848 and outer["metrics"]["normalized_cycles"] == 3 * 106.0


def test_kernel_without_records_gets_no_stale_buffer(fake_gpu):
    buf, scratch = _buffer()
    sid = proton.start("s", backend="instrumentation")
    _register(1, scratch)
    KERNELS[2] = make_info("plain", 4, 0, [], [])
    h = hook()
    h.allocator._tls.pending = buf
    h.enter(Launch(1))
    h.exit(Launch(1))
    # a second kernel without records: the allocator is not called for it
    h.enter(Launch(2))
    h.exit(Launch(2))
    names = [c["frame"]["name"] for c in proton.data.get(sid)[0]["children"]]
    assert names == ["kern"]


def test_clock_overflow_raises_protons_error_at_the_launch(fake_gpu, capsys):
    scratch = scratch_size(1, 64)
    buf = build_buffer([build_block(0, 0, 1, 64, {0: [(0, 0, 300), (1, 0, 100)]}, scratch=scratch)], scratch)
    sid = proton.start("s", backend="instrumentation")
    KERNELS[3] = make_info("k", 1, scratch, [(0, "a")], [])
    with pytest.raises(RuntimeError, match=r"^\[PROTON\] Clock overflow$"):
        run_launch(hook(), 3, buf)
    assert "ParserException [offset=60]: [PROTON] Clock overflow" in capsys.readouterr().err
    # the kernel node exists, as in Proton
    assert [c["frame"]["name"] for c in proton.data.get(sid)[0]["children"]] == ["k"]


def test_invalid_sampling_id_raises_protons_index_error(fake_gpu):
    buf, scratch = _buffer()
    proton.start("s", backend="instrumentation", mode="default:sampling_strategy=selective:sampling_options=0,9")
    _register(1, scratch)
    with pytest.raises(IndexError, match="Invalid sampling warp id: 9. We have 4 warps in total."):
        run_launch(hook(), 1, buf)


def test_trace_data_writes_the_cycle_trace(fake_gpu):
    buf, scratch = _buffer()
    proton.start("t", backend="instrumentation", data="trace")
    _register(1, scratch)
    run_launch(hook(), 1, buf)
    proton.finalize()
    with open("t.chrome_trace") as f:
        tr = json.load(f)
    assert tr["displayTimeUnit"] == "ns"
    ev = tr["traceEvents"][0]
    assert (ev["cat"], ev["name"], ev["pid"], ev["tid"], ev["cname"]) == ("kern", "outer", "kern Core7 CTA0",
                                                                         "warp 0 (line 0)", "cq_build_passed")
    assert ev["args"] == {"Finalization Time (ns)": 100, "Frequency (MHz)": 1000.0, "Init Time (ns)": 1000,
                          "Post Final Time (ns)": 1600, "call_stack": ["ROOT", "kern"]}
    assert len(tr["traceEvents"]) == 16


def test_only_instrumentation_sessions_get_the_kernel(fake_gpu):
    buf, scratch = _buffer()
    h_sid = proton.start("host", backend="host")
    i_sid = proton.start("ins", backend="instrumentation")
    _register(1, scratch)
    with proton.scope("s"):
        run_launch(hook(), 1, buf)
    host = proton.data.get(h_sid)[0]
    ins = proton.data.get(i_sid)[0]
    assert [c["frame"]["name"] for c in host["children"][0]["children"]] == []
    assert [c["frame"]["name"] for c in ins["children"][0]["children"]] == ["kern"]


def test_enable_host_buffer_exposes_protons_binary_trace(fake_gpu):
    pytest.importorskip("torch")
    buf, scratch = _buffer()
    proton.start("s", backend="instrumentation")
    _register(1, scratch)
    InstrumentationHook.enable_host_buffer = True
    try:
        run_launch(hook(), 1, buf)
        hb = InstrumentationHook.host_buffer
        raw = bytes(hb.numpy().tobytes())
        header = np.frombuffer(raw[:40], dtype="<u4").tolist()
        assert header == [1, 4, 56, 56, len(buf), 0, 2, 4, scratch, 4]
        assert raw[56:] == buf.tobytes()
    finally:
        InstrumentationHook.enable_host_buffer = False


def test_python_context_puts_the_kernel_under_the_launching_frames(fake_gpu):
    buf, scratch = _buffer()
    sid = proton.start("py", backend="instrumentation", context="python")
    _register(1, scratch)

    def user_code():
        run_launch(hook(), 1, buf)

    user_code()
    tree = proton.data.get(sid)[0]
    names = []
    node = tree
    while node["children"]:
        node = node["children"][0]
        names.append(node["frame"]["name"])
    assert names[-3:] == ["kern", "outer", "inner"]
    frames = names[:-3]
    assert any(f.endswith("@user_code") for f in frames)
    assert not any("proton_ctypes/" in f for f in frames)
