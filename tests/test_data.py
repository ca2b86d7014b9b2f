"""``proton.data``: ``get``, ``get_msgpack``, ``advance_phase``,
``is_phase_complete``, ``clear``, and the files phases give at finalize.

Expected values are those real Proton 3.9 gives (``conformance/scenarios/data.py``);
periodic flushing of phases is in ``test_mode.py``.
"""
import json
import os

import msgpack
import pytest

import proton_ctypes as proton
from conftest import flat, json_decodes_deep_nesting, read_tree, written
from proton_ctypes.flags import flags

UNKNOWN = "[PROTON] Session has not been initialized: 99"


def node(name, *children, **metrics):
    """One node as ``data.get`` gives it."""
    return {"children": list(children), "frame": {"name": name, "type": "function"}, "metrics": metrics}


# --- get / get_msgpack ----------------------------------------------------------------------

def test_get_returns_the_tree_as_the_hatchet_file_holds_it():
    s = proton.start("g", backend="host")
    with proton.scope("a", {"m": 1}):
        with proton.scope("b"):
            pass
    got = proton.data.get(s)
    proton.finalize()
    assert got == [node("ROOT", node("a", node("b"), m=1)), {}]
    assert got == list(read_tree("g.hatchet"))


def test_get_works_on_a_deactivated_session():
    s = proton.start("d", backend="host")
    with proton.scope("a"):
        pass
    proton.deactivate(s)
    assert proton.data.get(s) == [node("ROOT", node("a")), {}]


def test_get_after_finalize_raises_index_error():
    s = proton.start("f", backend="host")
    proton.finalize(s)
    with pytest.raises(IndexError) as e:
        proton.data.get(s)
    assert str(e.value) == f"[PROTON] Session has not been initialized: {s}"


def test_get_msgpack_returns_the_tree_as_msgpack_bytes():
    s = proton.start("mp", backend="host")
    with proton.scope("a", {"m": 1}):
        pass
    got = proton.data.get_msgpack(s)
    assert isinstance(got, bytes)
    assert msgpack.unpackb(got) == [{"frame": {"name": "ROOT", "type": "function"}, "metrics": {}, "children": [
        {"frame": {"name": "a", "type": "function"}, "metrics": {"m": 1}, "children": []}]}, {}]


@pytest.mark.parametrize("call", ["get", "get_msgpack"])
def test_get_on_trace_data_raises_runtime_error(call):
    s = proton.start("tg", backend="host", data="trace")
    with pytest.raises(RuntimeError) as e:
        getattr(proton.data, call)(s)
    assert str(e.value) == "[PROTON] Only TreeData is supported for getData() for now"


@pytest.mark.parametrize("call", ["get", "get_msgpack", "advance_phase", "is_phase_complete", "clear"])
def test_data_call_on_an_unknown_session_raises_index_error(call):
    proton.start("u", backend="host")
    with pytest.raises(IndexError) as e:
        getattr(proton.data, call)(99)
    assert str(e.value) == UNKNOWN


def test_data_calls_with_session_none_return_neutral_values():
    d = proton.data
    assert [d.get(None), d.get_msgpack(None), d.advance_phase(None), d.is_phase_complete(None), d.clear(None)] == \
        [None, None, None, False, None]


@pytest.mark.parametrize("call,what", [
    ("get", "be retrieved"), ("get_msgpack", "be retrieved"), ("advance_phase", "advance phase"),
    ("is_phase_complete", "check phase completion status"), ("clear", "be cleared")])
def test_data_call_on_a_session_other_than_zero_raises_under_the_proton_command(call, what):
    flags.command_line = True
    with pytest.raises(ValueError) as e:
        getattr(proton.data, call)(1)
    assert str(e.value) == f"Only one session can {what} when running from the command line."


# --- phases ---------------------------------------------------------------------------------

def test_advance_phase_returns_the_new_phase_number():
    s = proton.start("ph", backend="host")
    assert [proton.data.advance_phase(s), proton.data.advance_phase(s)] == [1, 2]


def test_a_scope_open_across_advance_phase_appears_in_both_phases():
    s = proton.start("ph", backend="host")
    with proton.scope("p0"):
        pass
    with proton.scope("open"):
        proton.data.advance_phase(s)
        with proton.scope("p1"):
            pass
    with proton.scope("p1b"):
        pass
    assert flat(proton.data.get(s, 0)[0]) == {"p0": {}, "open": {}}
    assert flat(proton.data.get(s, 1)[0]) == {"open": {}, "open/p1": {}, "p1b": {}}


def test_finalize_writes_one_file_per_phase_including_the_empty_current_one():
    s = proton.start("ph", backend="host")
    with proton.scope("p0"):
        pass
    proton.data.advance_phase(s)
    with proton.scope("p1"):
        pass
    proton.data.advance_phase(s)
    proton.finalize()
    assert sorted(os.listdir(".")) == ["ph.part_0.hatchet", "ph.part_1.hatchet", "ph.part_2.hatchet"]
    assert [written(f"ph.part_{k}") for k in range(3)] == [{"p0": {}}, {"p1": {}}, {}]


def test_is_phase_complete_is_false_until_a_flush_closes_the_old_phases():
    s = proton.start("pc", backend="host")
    proton.data.advance_phase(s)
    before = [proton.data.is_phase_complete(s, 0), proton.data.is_phase_complete(s, 1),
              proton.data.is_phase_complete(s, 9)]
    proton.deactivate(s, flushing=True)
    after = [proton.data.is_phase_complete(s, 0), proton.data.is_phase_complete(s, 1)]
    assert before == [False, False, False]
    assert after == [True, False]


def test_a_cleared_phase_has_no_data_and_no_file():
    s = proton.start("pc", backend="host")
    with proton.scope("a"):
        pass
    proton.data.advance_phase(s)
    with proton.scope("b"):
        pass
    proton.data.clear(s, 0)
    with pytest.raises(IndexError) as e:
        proton.data.get(s, 0)
    assert str(e.value) == "[PROTON] Phase 0 has no data."
    proton.finalize()
    assert os.listdir(".") == ["pc.part_1.hatchet"]
    assert written("pc.part_1") == {"b": {}}


def test_get_of_a_phase_that_never_existed_raises_index_error():
    s = proton.start("pn", backend="host")
    with pytest.raises(IndexError) as e:
        proton.data.get(s, 7)
    assert str(e.value) == "[PROTON] Phase 7 has no data."


def test_clear_up_to_phase_clears_every_phase_up_to_it():
    s = proton.start("cu", backend="host")
    for name in ("a", "b"):
        with proton.scope(name):
            pass
        proton.data.advance_phase(s)
    with proton.scope("c"):
        pass
    proton.data.clear(s, 1, clear_up_to_phase=True)
    for p in (0, 1):
        with pytest.raises(IndexError):
            proton.data.get(s, p)
    assert flat(proton.data.get(s, 2)[0]) == {"c": {}}
    proton.finalize()
    assert os.listdir(".") == ["cu.part_2.hatchet"]


def test_trace_data_phases_are_written_as_part_files():
    s = proton.start("tp", backend="host", data="trace")
    with proton.scope("a"):
        pass
    proton.data.advance_phase(s)
    with proton.scope("b"):
        pass
    proton.finalize()
    assert sorted(os.listdir(".")) == ["tp.part_0.chrome_trace", "tp.part_1.chrome_trace"]


def test_get_returns_a_tree_a_thousand_frames_deep():
    sid = proton.start("deepget", backend="host")
    for i in range(1000):
        proton.enter_scope(f"s{i}")
    with proton.scope("leaf", {"m": 1}):
        pass
    for _ in range(1000):
        proton.exit_scope()
    if not json_decodes_deep_nesting():
        with pytest.raises(RecursionError):    # this Python's JSON decoder, as under real Proton
            proton.data.get(sid)
        return
    node, levels = proton.data.get(sid)[0], 0
    while node["children"]:
        (node,) = node["children"]
        levels += 1
    assert levels == 1001 and node["metrics"] == {"m": 1}
    proton.finalize()


def test_a_trace_scope_open_across_advance_phase_closes_quietly_in_the_phase_it_ended_in():
    """Proton raises ``IndexError: [PROTON] Event not found`` at such a scope's exit, writes it in
    no part file and nests every later scope of the thread under it (README, differences)."""
    s = proton.start("tx", backend="host", data="trace")
    with proton.scope("z"):
        pass
    with proton.scope("a"):
        proton.data.advance_phase(s)
    with proton.scope("b"):
        pass
    proton.finalize()
    stacks = []
    for phase in range(2):
        with open(f"tx.part_{phase}.chrome_trace") as f:
            stacks.append([e["args"]["call_stack"] for e in json.load(f)["traceEvents"]])
    assert stacks == [[["ROOT", "z"]], [["ROOT", "a"], ["ROOT", "b"]]]
