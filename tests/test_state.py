"""States: ``state``, ``enter_state``/``exit_state``, ``metadata_state``.

A state is one slot per thread, not a stack: a scope entered while it is set gets a child
node named after the state, which receives the scope's metrics.  Expected trees are those
real Proton 3.9 writes (``conformance/scenarios/state.py``); kernels under states are in
``test_kernel_attribution.py``.
"""
import json
import threading

import pytest

import proton_ctypes as proton
from conftest import written


def test_scope_entered_in_a_state_gets_a_state_child_holding_its_metrics():
    proton.start("st", backend="host")
    with proton.state("optimizer"):
        with proton.scope("leaf", {"v": 1}):
            pass
    proton.finalize()
    assert written("st") == {"leaf": {}, "leaf/optimizer": {"v": 1}}


def test_nested_scopes_in_a_state_are_children_of_the_scope_not_of_the_state():
    proton.start("st", backend="host")
    with proton.scope("iteration"):
        with proton.state("optimizer"):
            with proton.scope("sub"):
                with proton.scope("leaf", {"v": 1}):
                    pass
    proton.finalize()
    assert written("st") == {"iteration": {}, "iteration/sub": {}, "iteration/sub/optimizer": {},
                             "iteration/sub/leaf": {}, "iteration/sub/leaf/optimizer": {"v": 1}}


def test_state_with_nothing_inside_creates_no_node():
    proton.start("empty", backend="host")
    with proton.state("empty"):
        pass
    proton.finalize()
    assert written("empty") == {}


def test_leaving_an_inner_state_clears_the_slot_instead_of_restoring_the_outer_one():
    proton.start("st", backend="host")
    with proton.state("outer_state"):
        with proton.state("inner_state"):
            with proton.scope("x", {"m": 1}):
                pass
        with proton.scope("after_inner", {"m": 1}):
            pass
    proton.finalize()
    assert written("st") == {"x": {}, "x/inner_state": {"m": 1}, "after_inner": {"m": 1}}


def test_enter_state_replaces_the_state_and_one_exit_state_clears_it():
    proton.start("st", backend="host")
    proton.enter_state("manual")
    proton.enter_state("manual2")
    with proton.scope("y"):
        pass
    proton.exit_state()
    with proton.scope("z"):
        pass
    proton.finalize()
    assert written("st") == {"y": {}, "y/manual2": {}, "z": {}}


def test_extra_exit_state_and_states_without_a_session_are_harmless():
    proton.enter_state("x")
    proton.exit_state()
    proton.exit_state()
    with proton.state("s"):
        pass
    proton.start("st", backend="host")
    with proton.scope("a"):
        pass
    proton.finalize()
    assert written("st") == {"a": {}}


def test_state_entered_before_start_is_not_carried_into_the_session():
    proton.enter_state("pre")
    proton.start("pre", backend="host")
    with proton.scope("a", {"m": 1}):
        pass
    proton.finalize()
    assert written("pre") == {"a": {"m": 1}}


def test_metrics_added_clear_the_state_so_scopes_inside_get_no_state_child():
    # the metrics of a scope are added inside metadata_state(), which replaces the user state
    proton.start("md", backend="host")
    with proton.state("u"):
        with proton.scope("a", {"m": 1}):
            with proton.scope("b"):
                pass
        with proton.scope("c", {"k": 1}):
            pass
    proton.finalize()
    assert written("md") == {"a": {}, "a/u": {"m": 1}, "a/b": {}, "c": {"k": 1}}


def test_exit_metrics_go_to_the_node_fixed_when_the_scope_was_entered():
    proton.start("md", backend="host")
    proton.enter_scope("e")
    with proton.state("w"):
        proton.exit_scope(metrics={"e": 5})
    with proton.state("u"):
        proton.enter_scope("a", metrics={"m": 1})
    proton.exit_scope(metrics={"e": 2})
    proton.finalize()
    assert written("md") == {"e": {"e": 5}, "a": {}, "a/u": {"e": 2, "m": 1}}


def test_cpu_timed_scope_time_goes_to_its_state_child():
    proton.start("ct", backend="host")
    with proton.state("w"):
        with proton.cpu_timed_scope("c"):
            pass
    proton.finalize()
    tree = written("ct")
    assert tree["c"] == {} and list(tree["c/w"]) == ["cpu_time (ns)"]


@pytest.mark.parametrize("data", ["tree", "trace"])
def test_the_state_stays_set_after_a_cpu_timed_scope_closes(data):
    # Proton adds the cpu_time outside metadata_state, so the state is still set for later scopes
    proton.start("keep", backend="host", data=data)
    with proton.state("s"):
        with proton.cpu_timed_scope("c"):
            pass
        with proton.scope("a", {"m": 1}):
            pass
        with proton.scope("b"):
            pass
    proton.finalize()
    if data == "tree":
        tree = written("keep")
        assert list(tree) == ["c", "c/s", "a", "a/s", "b"] and tree["a/s"] == {"m": 1}
    else:
        events = json.load(open("keep.chrome_trace"))["traceEvents"]
        assert [e["args"]["call_stack"] for e in events] == [["ROOT", "c", "s"], ["ROOT", "a", "s"], ["ROOT", "b"]]
        assert [e["name"].split(":")[0] for e in events] == ["s", "s", "b"]


def test_a_state_entered_or_left_while_no_session_is_active_changes_nothing():
    # as Proton: the state slot is set through the active sessions
    s = proton.start("idle", backend="host")
    proton.deactivate(s)
    proton.enter_state("ignored")
    proton.activate(s)
    with proton.scope("a", {"m": 1}):
        pass
    proton.enter_state("kept")
    proton.deactivate(s)
    proton.exit_state()
    proton.activate(s)
    with proton.scope("b", {"m": 1}):
        pass
    proton.finalize()
    assert written("idle") == {"a": {"m": 1}, "b": {}, "b/kept": {"m": 1}}


def test_a_successful_finalize_clears_the_state_of_the_thread_that_called_it():
    # as Proton: the next session does not see the state; a failed finalize leaves it set
    a = proton.start("one", backend="host")
    b = proton.start("two", backend="host")
    proton.enter_state("s")
    with pytest.raises(ValueError):
        proton.finalize(a, "nope")
    with proton.scope("kept", {"m": 1}):
        pass
    proton.activate(a)
    proton.finalize(a)
    with proton.scope("cleared", {"m": 1}):
        pass
    proton.finalize(b)
    assert written("two") == {"kept": {}, "kept/s": {"m": 1}, "cleared": {"m": 1}}


def test_state_decorator_sets_the_state_around_each_call():
    proton.start("sd", backend="host")

    @proton.state("deco")
    def f():
        with proton.scope("inside"):
            pass
        return 7
    assert f() == 7
    assert f.__name__ == "f"
    proton.finalize()
    assert written("sd") == {"inside": {}, "inside/deco": {}}


def test_state_decorator_leaves_the_state_set_when_the_function_raises():
    proton.start("sr", backend="host")

    @proton.state("st")
    def f():
        raise KeyError("k")
    with pytest.raises(KeyError):
        f()
    with proton.scope("after", {"m": 1}):
        pass
    proton.finalize()
    assert written("sr") == {"after": {}, "after/st": {"m": 1}}


def test_a_new_thread_does_not_inherit_the_state():
    proton.start("ts", backend="host")

    def work():
        with proton.scope("t", {"q": 1}):
            pass
    with proton.state("u"):
        t = threading.Thread(target=work)
        t.start()
        t.join()
    proton.finalize()
    assert written("ts") == {"t": {"q": 1}}


def test_state_and_scope_names_may_contain_colons():
    proton.start("colon", backend="host")
    with proton.state("x:y"):
        with proton.scope("s"):
            pass
    with proton.scope("p:q", {"m": 1}):
        pass
    proton.finalize()
    assert written("colon") == {"s": {}, "s/x:y": {}, "p:q": {"m": 1}}


def test_metadata_state_names():
    from proton_ctypes.state import (COMPUTE_METADATA_SCOPE_NAME, COMPUTE_METADATA_SCOPE_PREFIX,
                                     get_metadata_state_name)
    assert COMPUTE_METADATA_SCOPE_NAME == "__proton_launch_metadata"
    assert COMPUTE_METADATA_SCOPE_PREFIX == "__proton_launch_metadata:"
    assert get_metadata_state_name() == "__proton_launch_metadata"
    assert get_metadata_state_name("k") == "__proton_launch_metadata:k"


def test_metadata_state_without_a_kernel_is_the_plain_metadata_node():
    proton.start("mdn", backend="host")
    with proton.metadata_state():
        with proton.scope("s2"):
            pass
    proton.finalize()
    assert written("mdn") == {"s2": {}, "s2/__proton_launch_metadata": {}}


def test_metadata_state_of_a_kernel_is_a_metadata_node_with_the_kernel_name_below():
    proton.start("mdk", backend="host")
    with proton.metadata_state("k"):
        with proton.scope("s1"):
            pass
    proton.finalize()
    assert written("mdk") == {"s1": {}, "s1/__proton_launch_metadata": {}, "s1/__proton_launch_metadata/k": {}}


def test_a_state_set_inside_an_open_scope_adds_no_node_when_another_session_starts(tmp_path):
    # found by the random programs against real Proton 3.9: the open scope stays, its state child
    # appears only if something happens in it
    proton.start(str(tmp_path / "p0"), backend="host")
    proton.enter_scope("a")
    proton.enter_state("s")
    proton.start(str(tmp_path / "p1"), backend="host")
    proton.exit_scope()
    proton.exit_state()
    proton.finalize()
    with open(tmp_path / "p0.hatchet") as f:
        root = json.load(f)[0]
    (a,) = root["children"]
    assert a["frame"]["name"] == "a" and a["children"] == []
