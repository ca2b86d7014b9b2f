"""Scopes: ``scope``, ``cpu_timed_scope``, ``enter_scope``/``exit_scope``.

Expected trees are those real Proton 3.9 writes for the same calls (the oracle runs of
``conformance/scenarios/scope.py``); metric values on scopes are in ``test_metric.py``,
threads and sessions seen from a scope in ``test_context.py``.
"""
import json
import threading

import pytest

import proton_ctypes as proton
from conftest import read_tree, written


# --- scope ----------------------------------------------------------------------------------

def test_nested_scopes_become_nested_nodes_and_repeats_share_one_node():
    proton.start("nested", backend="host")
    for _ in range(3):
        with proton.scope("test0"):
            with proton.scope("test1"):
                pass
            with proton.scope("test2"):
                pass
    proton.finalize()
    assert written("nested") == {"test0": {}, "test0/test1": {}, "test0/test2": {}}


def test_scope_children_keep_first_insertion_order():
    # names no other test uses: see test_writers.py for the order across sessions
    proton.start("order", backend="host")
    for name in ("ord_outer", "ord_config", "ord_vec", "ord_zb", "ord_aa", "ord_config"):
        with proton.scope(name):
            pass
    proton.finalize()
    assert list(written("order")) == ["ord_outer", "ord_config", "ord_vec", "ord_zb", "ord_aa"]


def test_scope_enter_returns_the_scope_with_an_int_id():
    proton.start("id", backend="host")
    s = proton.scope("a")
    assert s.id is None
    with s as entered:
        assert entered is s
        assert isinstance(s.id, int) and s.id >= 1
    proton.finalize()


def test_scope_context_manager_lets_exceptions_through_and_closes_the_scope():
    proton.start("exc", backend="host")
    with pytest.raises(KeyError):
        with proton.scope("cm"):
            raise KeyError("z")
    with proton.scope("after"):
        pass
    proton.finalize()
    assert written("exc") == {"cm": {}, "after": {}}


def test_scope_decorator_enters_around_each_call_and_keeps_the_function_name():
    proton.start("sdec", backend="host")

    @proton.scope("deco", {"c": 1})
    def f(x):
        return x * 2
    assert [f(1), f(2)] == [2, 4]
    assert f.__name__ == "f"
    proton.finalize()
    assert written("sdec") == {"deco": {"c": 2}}


def test_scope_decorator_closes_the_scope_when_the_function_raises():
    proton.start("sdecx", backend="host")

    @proton.scope("sc")
    def g():
        raise KeyError("k")
    with pytest.raises(KeyError):
        g()
    with proton.scope("after"):
        pass
    proton.finalize()
    assert written("sdecx") == {"sc": {}, "after": {}}


def test_scope_named_root_is_an_ordinary_child():
    proton.start("root", backend="host")
    with proton.scope("ROOT", {"r": 1}):
        pass
    proton.finalize()
    assert written("root") == {"ROOT": {"r": 1}}


def test_scope_without_a_session_is_a_no_op_with_id_none():
    with proton.scope("x") as s:
        assert s.id is None
    assert [proton.enter_scope("y"), proton.exit_scope()] == [None, None]


@pytest.mark.parametrize("backend", ["host", "mock"])
def test_scopes_and_states_are_no_ops_while_profiling_is_switched_off(backend):
    proton.start("flags", backend=backend)
    with proton.scope("before"):
        pass
    proton.flags.flags.profiling_on = False  # proton.flags is the module, as triton.profiler.flags
    with proton.scope("while_off") as s:
        with proton.state("off_state"):
            pass
    assert s.id is None
    proton.flags.flags.profiling_on = True
    with proton.scope("after"):
        pass
    proton.finalize()
    assert written("flags") == {"before": {}, "after": {}}


def test_scope_ids_are_still_allocated_while_every_session_is_deactivated():
    s = proton.start("deact", backend="host")
    a = proton.enter_scope("x")
    proton.exit_scope()
    proton.deactivate(s)
    b = proton.enter_scope("y")
    proton.exit_scope()
    with proton.scope("z") as sc:
        c = sc.id
    proton.activate(s)
    proton.finalize()
    assert [b - a, c - a] == [1, 2]
    assert written("deact") == {"x": {}}


@pytest.mark.parametrize("metrics, error", [({"m": "x"}, TypeError), ([("m", 1)], AttributeError)],
                         ids=["bad_value", "not_a_dict"])
def test_a_scope_whose_metrics_are_refused_is_closed_again(metrics, error):
    # Proton leaves it open: after three refusals the next scope lands at ROOT/s/s/s/good
    proton.start("r", backend="host")
    for _ in range(3):
        with pytest.raises(error):
            with proton.scope("s", metrics):
                pass
    with proton.scope("good", {"g": 1}):
        pass
    proton.finalize()
    assert written("r") == {"s": {}, "good": {"g": 1}}


def test_a_type_mismatch_on_scope_entry_closes_the_scope_and_clears_the_state():
    # Proton: the scope stays open; the state is cleared (its metadata_state exits)
    sid = proton.start("mm", backend="host")
    with proton.state("u"):
        with proton.scope("s", {"v": 1}):
            pass
    with proton.state("u"):
        with pytest.raises(ValueError, match="Metric value type mismatch"):
            with proton.scope("s", {"v": 1.5}):
                pass
        assert proton.context.depth(sid) == 0
        with proton.scope("after"):
            pass
    proton.finalize()
    assert written("mm") == {"s": {}, "s/u": {"v": 1}, "after": {}}


def test_a_type_mismatch_within_a_trace_event_closes_the_scope():
    # Proton: the scope stays open and has no event
    proton.start("mt", backend="host", data="trace")
    proton.enter_scope("s", metrics={"v": 1})
    with pytest.raises(ValueError, match="Metric value type mismatch"):
        proton.exit_scope(metrics={"v": 1.5})
    with proton.scope("after"):
        pass
    proton.finalize()
    events = json.load(open("mt.chrome_trace"))["traceEvents"]
    assert [e["args"]["call_stack"] for e in events] == [["ROOT", "s"], ["ROOT", "after"]]


def test_refused_metrics_of_enter_scope_leave_nothing_to_exit():
    proton.start("es", backend="host")
    with pytest.raises(TypeError):
        proton.enter_scope("a", metrics={"m": None})
    with pytest.raises(IndexError):
        proton.exit_scope()
    with proton.scope("b"):
        pass
    proton.finalize()
    assert written("es") == {"a": {}, "b": {}}


def test_refused_metrics_of_exit_scope_still_close_the_scope():
    # Proton pops the entry but leaves the scope open: later scopes nest under it
    proton.start("xs", backend="host")
    proton.enter_scope("a")
    with pytest.raises(TypeError):
        proton.exit_scope(metrics={"m": "x"})
    with proton.scope("b"):
        pass
    proton.finalize()
    assert written("xs") == {"a": {}, "b": {}}


def test_a_refused_cpu_time_still_closes_the_cpu_timed_scope():
    proton.start("ct", backend="host")
    with pytest.raises(ValueError, match="current=double, new=int64_t"):
        with proton.cpu_timed_scope("c", {"cpu_time (ns)": 1.5}):  # a double, then the measured int
            pass
    with proton.scope("b"):
        pass
    proton.finalize()
    assert written("ct") == {"c": {"cpu_time (ns)": 1.5}, "b": {}}


# --- enter_scope / exit_scope ---------------------------------------------------------------

def test_enter_scope_returns_consecutive_ids_and_exit_scope_returns_the_popped_id():
    proton.start("ee", backend="host")
    got = [proton.enter_scope("a"), proton.enter_scope("b"), proton.exit_scope(), proton.exit_scope("a"),
           proton.enter_scope("c"), proton.exit_scope("")]
    with proton.scope("s") as sc:
        got.append(sc.id)
    proton.finalize()
    first = got[0]
    assert [i - first for i in got] == [0, 1, 1, 0, 2, 2, 3]  # Proton: 1, 2, 2, 1, 3, 3, 4
    assert written("ee") == {"a": {}, "a/b": {}, "c": {}, "s": {}}


def test_exit_scope_with_another_name_raises_scope_name_mismatch():
    proton.start("mm", backend="host")
    proton.enter_scope("a")
    with pytest.raises(ValueError) as e:
        proton.exit_scope("b")
    assert str(e.value) == "Scope name mismatch: b != a"


def test_exit_scope_name_mismatch_closes_the_scope():
    # a deliberate difference (README): Proton leaves "a" open inside the profiler and files "after" under it
    proton.start("mm", backend="host")
    proton.enter_scope("a")
    with pytest.raises(ValueError):
        proton.exit_scope("b")
    with proton.scope("after"):
        pass
    proton.finalize()
    assert written("mm") == {"a": {}, "after": {}}


def test_exit_scope_on_an_empty_stack_raises_index_error():
    proton.start("em", backend="host")
    proton.enter_scope("a")
    proton.exit_scope()
    with pytest.raises(IndexError) as e:
        proton.exit_scope()
    assert str(e.value) == "pop from empty list"


def test_exit_scope_in_a_thread_that_never_entered_raises_index_error():
    # a deliberate difference (README): Proton raises AttributeError ('_thread._local' object has no attribute 'scopes')
    proton.start("th", backend="host")
    errors = []

    def work():
        try:
            proton.exit_scope()
        except Exception as e:
            errors.append((type(e), str(e)))
    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert errors == [(IndexError, "pop from empty list")]


def test_only_exit_scope_checks_names_scope_objects_keep_their_own_bookkeeping():
    proton.start("sep", backend="host")
    proton.enter_scope("a")
    with proton.scope("b"):
        pass
    assert proton.exit_scope("a") is not None
    proton.finalize()
    assert written("sep") == {"a": {}, "a/b": {}}


def test_scopes_closed_out_of_order_close_the_named_scope_and_reroot_inner_ones():
    # a deliberate difference (README): Proton pops "b" when "a" is closed
    proton.start("ooo", backend="host")
    a = proton.scope("a").__enter__()
    b = proton.scope("b").__enter__()
    a.__exit__(None, None, None)
    with proton.scope("c"):
        pass
    b.__exit__(None, None, None)
    proton.finalize()
    assert written("ooo") == {"a": {}, "a/b": {}, "b": {}, "b/c": {}}


# --- cpu_timed_scope ------------------------------------------------------------------------

def test_cpu_timed_scope_stores_its_wall_time_as_int_cpu_time_ns():
    proton.start("c", backend="host")
    with proton.cpu_timed_scope("host"):
        with proton.cpu_timed_scope("inner"):
            pass
    proton.finalize()
    tree = written("c")
    assert list(tree) == ["host", "host/inner"]
    outer, inner = tree["host"]["cpu_time (ns)"], tree["host/inner"]["cpu_time (ns)"]
    assert isinstance(outer, int) and isinstance(inner, int)
    assert outer >= inner > 0  # the outer time includes its children, although tagged (exc)


@pytest.mark.parametrize("repeats", [1, 3])
def test_a_subclass_overriding_enter_scope_and_exit_scope_has_them_called_at_every_edge(repeats):
    # as Proton's __enter__/__exit__ call them (conformance scenario subclass_overriding_enter_and_exit)
    calls = []

    class traced(proton.scope):
        def _enter_scope(self):
            calls.append(("enter", self.name))
            super()._enter_scope()

        def _exit_scope(self):
            calls.append(("exit", self.name))
            super()._exit_scope()

    proton.start("sub", backend="host")
    for _ in range(repeats):
        with traced("a", {"m": 1}):
            with traced("b"):
                pass
    traced("deco")(lambda: None)()
    proton.finalize()
    assert calls == [("enter", "a"), ("enter", "b"), ("exit", "b"), ("exit", "a")] * repeats + [
        ("enter", "deco"), ("exit", "deco")]
    assert written("sub") == {"a": {"m": repeats}, "a/b": {}, "deco": {}}


def test_cpu_timed_scope_repeats_are_summed():
    s = proton.start("rep", backend="host")
    times = []
    for _ in range(2):
        with proton.cpu_timed_scope("rep"):
            pass
        times.append(proton.data.get(s)[0]["children"][0]["metrics"]["cpu_time (ns)"])
    proton.finalize()
    assert written("rep")["rep"]["cpu_time (ns)"] == times[1] > times[0] > 0


def test_cpu_timed_scope_adds_a_given_cpu_time_ns_to_the_measured_time():
    proton.start("given", backend="host")
    with proton.cpu_timed_scope("inner", {"cpu_time (ns)": 10 ** 12}):
        pass
    proton.finalize()
    assert 10 ** 12 < written("given")["inner"]["cpu_time (ns)"] < 10 ** 12 + 10 ** 10


def test_cpu_timed_scope_metric_named_cpu_time_is_reserved():
    with pytest.raises(ValueError) as e:
        proton.cpu_timed_scope("c", {"cpu_time": 1})
    assert str(e.value) == "The metric name 'cpu_time' is reserved."


def test_cpu_timed_scope_decorator_times_each_call_and_returns_the_result():
    proton.start("deco", backend="host")

    @proton.cpu_timed_scope("deco")
    def f():
        return 3
    assert f() == 3
    proton.finalize()
    tree = written("deco")
    assert list(tree) == ["deco"] and tree["deco"]["cpu_time (ns)"] > 0


def test_cpu_timed_scope_time_never_reaches_root():
    proton.start("noroot", backend="host")
    with proton.cpu_timed_scope("a"):
        pass
    proton.finalize()
    assert read_tree("noroot.hatchet")[0]["metrics"] == {}
