"""Modes: the ``proton.mode`` objects and their strings, mode strings given to
``start``, and ``periodic_flushing``.

Expected strings and messages are those real Proton 3.9 gives
(``conformance/scenarios/mode.py``).
"""
import dataclasses
import os
import re

import msgpack
import pytest

import proton_ctypes as proton
from conftest import find, read_tree

ENUMS = ("metric_type=METRIC_TYPE.CYCLE:sampling_strategy=SAMPLING_STRATEGY.NONE:sampling_options=:"
         "granularity=GRANULARITY.{}:buffer_strategy=BUFFER_STRATEGY.{}:buffer_type=BUFFER_TYPE.{}:"
         "buffer_size={}:optimizations={}")


# --- mode objects ---------------------------------------------------------------------------

def test_pcsampling_is_a_frozen_dataclass_named_pcsampling_with_interval_1000():
    pc = proton.mode.PCSampling()
    assert (pc.name, pc.interval, str(pc)) == ("pcsampling", 1000, "pcsampling:interval=1000")
    with pytest.raises(dataclasses.FrozenInstanceError):
        pc.interval = 3


def test_pcsampling_string_holds_its_interval():
    assert str(proton.mode.PCSampling(interval=10)) == "pcsampling:interval=10"


@pytest.mark.parametrize("interval", [0, -1])
def test_pcsampling_interval_must_be_positive(interval):
    with pytest.raises(ValueError) as e:
        proton.mode.PCSampling(interval=interval)
    assert str(e.value) == "Interval must be a positive integer."


def test_default_instrumentation_mode_string_lists_every_field():
    assert str(proton.mode.Default()) == "default:" + ENUMS.format("WARP", "CIRCULAR", "SHARED", 0, "")


def test_mma_mode_string_maps_the_given_strings_to_enums():
    m = proton.mode.MMA(granularity="warp_group", optimizations="clock32,time_shift", buffer_strategy="flush",
                        buffer_type="global", buffer_size=64)
    assert str(m) == "mma:" + ENUMS.format("WARP_GROUP", "FLUSH", "GLOBAL", 64, "clock32,time_shift")


@pytest.mark.parametrize("kwargs,message", [
    ({"granularity": "nope"}, "Unknown granularity: nope"),
    ({"optimizations": "nope"}, "Unknown optimization: nope"),
    ({"buffer_type": "x"}, "Unknown buffer_type: x")], ids=["granularity", "optimizations", "buffer_type"])
def test_instrumentation_mode_with_an_unknown_value_raises_value_error(kwargs, message):
    with pytest.raises(ValueError) as e:
        proton.mode.Default(**kwargs)
    assert str(e.value) == message


# --- mode strings at start ------------------------------------------------------------------

@pytest.mark.parametrize("mode,msg", [
    ("periodic_flushing:format=x", "unsupported format: x"),
    ("periodic_flushing:fmt=hatchet", "unsupported option key: fmt"),
    ("nope", "unsupported mode: nope"),
    ("pcsampling", "unsupported mode: pcsampling")])
def test_start_with_a_mode_the_backend_does_not_have_raises_value_error(mode, msg):
    # Proton: "[PROTON] CuptiProfiler: unsupported mode: nope"; the host backend names itself
    with pytest.raises(ValueError) as e:
        proton.start("bm", backend="host", mode=mode)
    assert str(e.value) == f"[PROTON] HostProfiler: {msg}"


def test_sessions_of_one_backend_must_share_the_mode():
    proton.start("m1", backend="host")
    with pytest.raises(ValueError) as e:
        proton.start("m2", backend="host", mode="periodic_flushing")
    assert str(e.value) == ("[PROTON] Cannot add a session with the same profiler but a different mode than "
                            "existing sessions")


# --- periodic_flushing ----------------------------------------------------------------------

def test_the_session_keeps_the_parsed_mode_and_starts_its_backend_with_it(mock):
    from proton_ctypes.core import manager
    sid = proton.start("m", backend="mock", mode="periodic_flushing:format=hatchet_msgpack")
    mode = manager.get(sid).mode
    assert mode is mock.mode and mode.periodic_flushing and mode.format == "hatchet_msgpack"
    assert mode.text == "periodic_flushing:format=hatchet_msgpack" and mode.profiler == "CuptiProfiler"


def test_periodic_flushing_writes_each_closed_phase_at_a_flush_and_drops_it():
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


def test_periodic_flushing_leaves_the_current_phase_to_finalize_in_finalizes_format():
    s = proton.start("pf", backend="host", mode="periodic_flushing:format=hatchet_msgpack")
    proton.data.advance_phase(s)
    with proton.scope("b", {"m": 1}):
        pass
    proton.deactivate(s, flushing=True)
    proton.activate(s)
    proton.finalize()  # as Proton: the rest goes out in finalize's (default) format
    assert sorted(os.listdir(".")) == ["pf.part_0.hatchet_msgpack", "pf.part_1.hatchet"]


@pytest.mark.parametrize("fmt, rendered, written_as", [("hatchet", "toJsonString", "json_write"),
                                                       ("hatchet_msgpack", "toMsgPack", "msgpack_write")])
def test_PROTON_DATA_FLUSH_TIMING_prints_protons_line_for_each_periodic_flush(monkeypatch, capfd, mock, fmt,
                                                                               rendered, written_as):
    monkeypatch.setenv("PROTON_DATA_FLUSH_TIMING", "1")
    s = proton.start("timed", backend="mock", mode=f"periodic_flushing:format={fmt}")
    for _ in range(2):
        with proton.scope("p"):
            mock.launch("k")
        proton.data.advance_phase(s)
    mock.flush()               # hands both phases' kernels on: phases 0 and 1 are complete after it
    mock.timed_flush()         # the next batch (empty) writes them
    lines = [line for line in capfd.readouterr().err.splitlines() if "periodicFlush timing" in line]
    assert len(lines) == 1, lines
    assert re.fullmatch(
        rf"\[PROTON\] periodicFlush timing: path=timed format={fmt} phases=\[0,1\] toJsonString_us=\d+ "
        r"toJsonString_calls=\d+ toMsgPack_us=\d+ toMsgPack_calls=\d+ json_write_us=\d+ json_write_calls=\d+ "
        r"msgpack_write_us=\d+ msgpack_write_calls=\d+ clear_us=\d+", lines[0])
    assert f"{rendered}_calls=2" in lines[0] and f"{written_as}_calls=2" in lines[0]
    proton.finalize(output_format=fmt)
    assert sorted(os.listdir(".")) == [f"timed.part_{k}.{fmt}" for k in range(3)]


def test_PROTON_DATA_FLUSH_TIMING_prints_the_graph_metric_peek_line_before_each_periodic_flush_of_a_gpu_backend(
        monkeypatch, capfd, mock):
    monkeypatch.setenv("PROTON_DATA_FLUSH_TIMING", "1")
    s = proton.start("peeked", backend="mock", mode="periodic_flushing")
    for _ in range(3):
        mock.launch("k")
        proton.data.advance_phase(s)
    mock.flush()
    mock.timed_flush()
    lines = [line for line in capfd.readouterr().err.splitlines() if "timing" in line]
    assert len(lines) == 2, lines
    assert re.fullmatch(r"\[PROTON\] pendingGraphPool peek timing: phases=\[0,2\] peek_us=\d+ peek_calls=3", lines[0])
    assert lines[1].startswith("[PROTON] periodicFlush timing: path=peeked format=hatchet phases=[0,2] ")
    proton.finalize()


def test_a_host_session_prints_no_graph_metric_peek_line(monkeypatch, capfd):
    monkeypatch.setenv("PROTON_DATA_FLUSH_TIMING", "1")
    s = proton.start("host_timed", backend="host", mode="periodic_flushing")
    with proton.scope("a"):
        pass
    proton.data.advance_phase(s)
    proton.deactivate(s, flushing=True)
    err = capfd.readouterr().err
    assert "periodicFlush timing: path=host_timed" in err and "pendingGraphPool" not in err
    proton.finalize()


def test_periodic_flushing_writes_a_phase_only_once_every_threads_kernels_of_it_have_come(mock):
    """A thread's kernels of a closed phase may come after another thread's of the next phase
    (CUPTI keeps one buffer per launching thread): the part file waits for them."""
    import threading

    s = proton.start("late", backend="mock", mode="periodic_flushing")
    done = threading.Event()

    def other():
        with proton.scope("other"):
            mock.launch("late_kernel")
        mock.hold(flushes=1)               # its buffer stays with CUPTI at the next timed flush
        done.set()
    threading.Thread(target=other).start()
    done.wait()
    with proton.scope("main"):
        mock.launch("early")
    proton.data.advance_phase(s)
    with proton.scope("main"):
        mock.launch("next")
    proton.data.advance_phase(s)
    mock.timed_flush()                     # the main thread's kernels of phases 0 and 1, not the other's
    mock.timed_flush()                     # the other thread's kernel, after phase 1's
    assert not os.path.exists("late.part_0.hatchet")
    mock.timed_flush()                     # every thread's kernels of phases 0 and 1 have come
    counts = []
    for phase, paths in ((0, (("other", "late_kernel"), ("main", "early"))), (1, (("main", "next"),))):
        tree, _ = read_tree(f"late.part_{phase}.hatchet")
        counts.append([find(tree, *path)["metrics"]["count"] for path in paths])
    assert counts == [[1, 1], [1]]
    proton.finalize()


def test_periodic_flushes_print_nothing_without_PROTON_DATA_FLUSH_TIMING(monkeypatch, capfd, mock):
    monkeypatch.delenv("PROTON_DATA_FLUSH_TIMING", raising=False)
    s = proton.start("quiet", backend="mock", mode="periodic_flushing")
    mock.launch("k")
    proton.data.advance_phase(s)
    mock.flush()
    proton.finalize()
    assert "timing" not in capfd.readouterr().err
