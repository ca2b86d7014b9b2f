"""Sessions, modes and writers: behaviours the oracle cannot show or that are ours (§0.3)."""
import json
import os

import msgpack
import pytest

import proton_ctypes as proton
from conftest import child_names, find, read_tree
from proton_ctypes.writers import atomic


def test_extension_is_always_appended():
    proton.start("x.hatchet", backend="host")
    proton.finalize()
    assert os.path.exists("x.hatchet.hatchet")


def test_failed_write_leaves_no_file_and_no_temp(monkeypatch):
    proton.start("atomic", backend="host")
    with proton.scope("a"):
        pass

    def boom(src, dst):
        raise OSError("disk full")
    monkeypatch.setattr(atomic.os, "replace", boom)
    with pytest.raises(OSError):
        proton.finalize()
    assert os.listdir(".") == []


def test_output_format_not_supported_writes_nothing_and_keeps_session():
    s = proton.start("keep", backend="host")
    with pytest.raises(ValueError, match=r"\[PROTON\] Output format not supported"):
        proton.finalize(s, "chrome_trace")
    assert not os.path.exists("keep.chrome_trace")
    assert proton.data.get(s)[0]["frame"]["name"] == "ROOT"
    proton.finalize(s)
    assert os.path.exists("keep.hatchet")


def test_exit_scope_mismatch_closes_the_scope():
    proton.start("mm", backend="host")
    proton.enter_scope("a")
    with pytest.raises(ValueError, match="Scope name mismatch: b != a"):
        proton.exit_scope("b")
    with proton.scope("after"):
        pass
    proton.finalize()
    root, _ = read_tree("mm.hatchet")
    assert child_names(root) == ["a", "after"]


def test_exit_scope_in_fresh_thread_raises_index_error():
    import threading
    proton.start("th", backend="host")
    errors = []

    def work():
        try:
            proton.exit_scope()
        except Exception as e:
            errors.append(type(e))
    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert errors == [IndexError]


def test_out_of_order_close_reroots_inner_scopes():
    proton.start("ooo", backend="host")
    a = proton.scope("a").__enter__()
    b = proton.scope("b").__enter__()
    a.__exit__(None, None, None)
    with proton.scope("c"):
        pass
    b.__exit__(None, None, None)
    proton.finalize()
    root, _ = read_tree("ooo.hatchet")
    assert find(root, "a", "b")
    assert find(root, "b", "c")


def test_numpy_float32_is_stored_as_double():
    import numpy as np
    proton.start("f32", backend="host")
    with proton.scope("a", {"v": np.float32(1.5)}):
        pass
    proton.finalize()
    root, _ = read_tree("f32.hatchet")
    assert find(root, "a")["metrics"]["v"] == 1.5


def test_periodic_flushing_writes_each_closed_phase_and_drops_it():
    s = proton.start("pf", backend="host", mode="periodic_flushing:format=hatchet_msgpack")
    with proton.scope("a", {"m": 1}):
        pass
    proton.data.advance_phase(s)
    with proton.scope("b", {"m": 1}):
        pass
    proton.deactivate(s, flushing=True)
    assert sorted(os.listdir(".")) == ["pf.part_0.hatchet_msgpack"]
    tree, dev = msgpack.unpackb(open("pf.part_0.hatchet_msgpack", "rb").read())
    assert [c["frame"]["name"] for c in tree["children"]] == ["a"]
    with pytest.raises(IndexError, match="Phase 0 has no data"):
        proton.data.get(s, 0)
    proton.activate(s)
    proton.finalize()  # the rest is written in finalize's format, as Proton does
    assert sorted(os.listdir(".")) == ["pf.part_0.hatchet_msgpack", "pf.part_1.hatchet"]


@pytest.mark.parametrize("mode,msg", [
    ("periodic_flushing:format=x", "unsupported format: x"),
    ("periodic_flushing:fmt=hatchet", "unsupported option key: fmt"),
    ("nope", "unsupported mode: nope"),
    ("pcsampling", "unsupported mode: pcsampling")])
def test_bad_modes_raise_value_error(mode, msg):
    with pytest.raises(ValueError, match=msg):
        proton.start("bm", backend="host", mode=mode)


def test_sessions_of_one_backend_must_share_the_mode():
    proton.start("m1", backend="host")
    with pytest.raises(ValueError, match="same profiler but a different mode"):
        proton.start("m2", backend="host", mode="periodic_flushing")


def test_no_gpu_selects_host_backend_with_one_warning(recwarn):
    import warnings
    from proton_ctypes.backends import select
    select._warned = False
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        proton.start("auto")
        proton.finalize()
        proton.start("auto2")
        proton.finalize()
    msgs = [str(x.message) for x in w if "host-only backend" in str(x.message)]
    assert len(msgs) == 1


def test_knob_defaults_are_exported_at_start(monkeypatch):
    for k in ("TRITON_PROFILE_BUFFER_SIZE", "TRITON_ENABLE_NVTX", "TRITON_PROTON_DISABLE"):
        monkeypatch.delenv(k, raising=False)
    proton.start("kn", backend="host")
    assert os.environ["TRITON_PROFILE_BUFFER_SIZE"] == "67108864"
    assert os.environ["TRITON_ENABLE_NVTX"] == "1"
    assert os.environ["TRITON_PROTON_DISABLE"] == "0"


def test_hatchet_json_writes_nan_as_null_and_floats_round_trip():
    proton.start("nan", backend="host")
    with proton.scope("a", {"n": float("nan"), "big": 1e300, "z": -0.0, "f": 1.5e9}):
        pass
    proton.finalize()
    text = open("nan.hatchet").read()
    assert '"n": null' in text and '"big": 1e+300' in text and '"z": -0.0' in text
    assert '"f": 1500000000.0' in text
    assert json.loads(text)[1] == {}


@pytest.mark.parametrize("backend", ["host", "mock"])
def test_switching_profiling_off_makes_scopes_and_states_no_ops_at_once(backend):
    proton.start("flags", backend=backend)
    with proton.scope("before"):
        pass
    proton.flags.flags.profiling_on = False  # triton.profiler.flags is the module, too
    with proton.scope("while_off"):
        with proton.state("off_state"):
            pass
    proton.flags.flags.profiling_on = True
    with proton.scope("after"):
        with proton.state("on_state"):
            pass
    proton.finalize()
    root, _ = read_tree("flags.hatchet")
    assert sorted(child_names(root)) == ["after", "before"]
