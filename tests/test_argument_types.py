"""Arguments of the wrong type raise Proton's exception type (``TypeError``, checked against real
Proton 3.9 through the CPU oracle), with a message that names the function, the argument, the
type expected and what was given (Proton's reads like its C++ bindings:
``start(): incompatible function arguments ... Invoked with types: int, str, ...``)."""
import pytest

import proton_ctypes as proton
from conftest import read_tree, written


@pytest.fixture
def session(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = proton.start("types", backend="host")
    yield s
    proton.finalize()


@pytest.mark.parametrize("kwargs, message", [
    ({"name": 123}, "start(): argument 'name' must be a str, not int (123)"),
    ({"name": "n", "context": 5}, "start(): argument 'context' must be a str, not int (5)"),
    ({"name": "n", "data": 5}, "start(): argument 'data' must be a str, not int (5)"),
    ({"name": "n", "backend": 5}, "start(): argument 'backend' must be a str, not int (5)"),
])
def test_start_with_a_non_str_argument_raises_type_error_naming_it(tmp_path, monkeypatch, kwargs, message):
    monkeypatch.chdir(tmp_path)
    name = kwargs.pop("name")
    kwargs.setdefault("backend", "host")
    with pytest.raises(TypeError) as e:
        proton.start(name, **kwargs)
    proton.finalize()
    assert str(e.value) == message


def test_scope_with_a_non_str_name_raises_type_error_at_enter(session):
    sc = proton.scope(123)
    with pytest.raises(TypeError) as e:
        with sc:
            pass
    assert str(e.value) == "a scope name must be a str, not int (123)"


def test_enter_scope_with_a_non_str_name_raises_type_error(session):
    with pytest.raises(TypeError) as e:
        proton.enter_scope(3)
    assert str(e.value) == "a scope name must be a str, not int (3)"


@pytest.mark.parametrize("enter", [lambda: proton.state(5).__enter__(), lambda: proton.enter_state(5)])
def test_state_with_a_non_str_name_raises_type_error(session, enter):
    with pytest.raises(TypeError) as e:
        enter()
    assert str(e.value) == "a state name must be a str, not int (5)"


@pytest.mark.parametrize("call, message", [
    (lambda: proton.finalize("x"), "finalize(): argument 'session' must be an int, not str ('x')"),
    (lambda: proton.finalize(0, 5), "finalize(): argument 'output_format' must be a str, not int (5)"),
    (lambda: proton.finalize(None, 5), "finalize(): argument 'output_format' must be a str, not int (5)"),
    (lambda: proton.finalize(0, None), "finalize(): argument 'output_format' must be a str, not NoneType (None)"),
    (lambda: proton.activate("x"), "activate(): argument 'session' must be an int, not str ('x')"),
    (lambda: proton.deactivate("x"), "deactivate(): argument 'session' must be an int, not str ('x')"),
    (lambda: proton.deactivate(0, "y"), "deactivate(): argument 'flushing' must be a bool, not str ('y')"),
    (lambda: proton.data.get("x"), "get(): argument 'session' must be an int, not str ('x')"),
    (lambda: proton.data.get(0, "p"), "get(): argument 'phase' must be an int, not str ('p')"),
    (lambda: proton.data.get_msgpack("x"), "get_msgpack(): argument 'session' must be an int, not str ('x')"),
    (lambda: proton.data.advance_phase("x"), "advance_phase(): argument 'session' must be an int, not str ('x')"),
    (lambda: proton.data.is_phase_complete("x"),
     "is_phase_complete(): argument 'session' must be an int, not str ('x')"),
    (lambda: proton.data.clear("x"), "clear(): argument 'session' must be an int, not str ('x')"),
    (lambda: proton.data.clear(0, 0, "y"), "clear(): argument 'clear_up_to_phase' must be a bool, not str ('y')"),
    (lambda: proton.context.depth("x"), "depth(): argument 'session' must be an int, not str ('x')"),
])
def test_session_functions_with_a_wrong_argument_type_raise_type_error_naming_it(session, call, message):
    with pytest.raises(TypeError) as e:
        call()
    assert str(e.value) == message


def test_a_rejected_scope_name_leaves_the_tree_unchanged(session):
    with pytest.raises(TypeError):
        with proton.scope(7):
            pass
    with proton.scope("ok"):
        pass
    root = proton.data.get(session)[0]
    assert [c["frame"]["name"] for c in root["children"]] == ["ok"]


@pytest.mark.parametrize("enter, what", [(lambda: proton.scope(3).__enter__(), "scope"),
                                         (lambda: proton.enter_scope(3), "scope"),
                                         (lambda: proton.state(5).__enter__(), "state")])
def test_a_non_str_name_is_refused_even_with_no_session_to_record_it(tmp_path, monkeypatch, enter, what):
    # as Proton: its bindings check the type whether or not a session records the scope
    monkeypatch.chdir(tmp_path)
    proton.finalize(proton.start("gone", backend="host"))  # profiling stays on, no session is left
    with pytest.raises(TypeError) as e:
        enter()
    assert str(e.value) == f"a {what} name must be a str, not int ({3 if what == 'scope' else 5})"


@pytest.mark.parametrize("backend", ["host", "mock"])
@pytest.mark.parametrize("name, shown", [([1], "list ([1])"), (5, "int (5)")])
def test_a_non_str_name_on_the_fast_path_raises_the_general_paths_error_and_changes_nothing(
        tmp_path, monkeypatch, mock, backend, name, shown):
    # after a first scope and state the thread's fast-path view exists; an unhashable name fails
    # its cache lookup before any check, and must still get Proton's TypeError and leave the
    # state slot and the scope log as they were (a kernel after it lands where it belongs)
    monkeypatch.chdir(tmp_path)
    proton.start("fast", backend=backend)
    with proton.scope("warm"), proton.state("s"):
        pass
    with proton.scope("outer"):
        for api, what in ((proton.scope, "scope"), (proton.state, "state")):
            with pytest.raises(TypeError) as e:
                with api(name):
                    pass
            assert str(e.value) == f"a {what} name must be a str, not {shown}"
        with pytest.raises(TypeError) as e:
            proton.enter_scope(name)
        assert str(e.value) == f"a scope name must be a str, not {shown}"
        with pytest.raises(TypeError) as e:
            proton.state(name)(lambda: None)()
        assert str(e.value) == f"a state name must be a str, not {shown}"
        if backend == "mock":
            mock.launch("k")
    proton.finalize()
    tree = written("fast") if backend == "host" else None
    if backend == "host":
        assert list(tree) == ["warm", "outer"]
    else:
        root, _ = read_tree("fast.hatchet")
        outer = next(c for c in root["children"] if c["frame"]["name"] == "outer")
        assert [c["frame"]["name"] for c in outer["children"]] == ["k"]
