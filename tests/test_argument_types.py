"""Arguments of the wrong type raise libproton's TypeError, naming the entry point and the
types it was given (checked against real Proton 3.9 through the CPU oracle)."""
import pytest

import proton_ctypes as proton


def _message(fn, signature, types):
    return (f"{fn}(): incompatible function arguments. The following argument types are supported:\n"
            f"    1. {signature}\n\nInvoked with types: {types}")


START = "start(path: str, contextSourceName: str, dataName: str, profilerName: str, mode: str = '') -> int"


@pytest.fixture
def session(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    s = proton.start("types", backend="host")
    yield s
    proton.finalize()


@pytest.mark.parametrize("kwargs, types", [
    ({"name": 123}, "int, str, str, str, str"),
    ({"name": "n", "context": 5}, "str, int, str, str, str"),
    ({"name": "n", "data": 5}, "str, str, int, str, str"),
])
def test_start_with_a_non_str_argument_raises_type_error(tmp_path, monkeypatch, kwargs, types):
    monkeypatch.chdir(tmp_path)
    name = kwargs.pop("name")
    with pytest.raises(TypeError) as e:
        proton.start(name, backend="host", **kwargs)
    proton.finalize()
    assert str(e.value) == _message("start", START, types)


def test_scope_with_a_non_str_name_raises_type_error_at_enter(session):
    sc = proton.scope(123)
    with pytest.raises(TypeError) as e:
        with sc:
            pass
    assert str(e.value) == _message("enter_scope", "enter_scope(arg0: int, arg1: str, /) -> None", "int, int")


def test_enter_scope_with_a_non_str_name_raises_type_error(session):
    with pytest.raises(TypeError, match=r"^enter_scope\(\): incompatible function arguments"):
        proton.enter_scope(3)


@pytest.mark.parametrize("enter", [lambda: proton.state(5).__enter__(), lambda: proton.enter_state(5)])
def test_state_with_a_non_str_name_raises_type_error(session, enter):
    with pytest.raises(TypeError) as e:
        enter()
    assert str(e.value) == _message("enter_state", "enter_state(arg: str, /) -> None", "int")


@pytest.mark.parametrize("call, fn, signature, types", [
    (lambda: proton.finalize("x"), "finalize", "finalize(arg0: int, arg1: str, /) -> None", "str, str"),
    (lambda: proton.finalize(0, 5), "finalize", "finalize(arg0: int, arg1: str, /) -> None", "int, int"),
    (lambda: proton.activate("x"), "activate", "activate(arg: int, /) -> None", "str"),
    (lambda: proton.deactivate("x"), "deactivate", "deactivate(arg0: int, arg1: bool, /) -> None", "str, bool"),
    (lambda: proton.deactivate(0, "y"), "deactivate", "deactivate(arg0: int, arg1: bool, /) -> None", "int, str"),
    (lambda: proton.data.get("x"), "get_data", "get_data(sessionId: int, phase: int) -> str", "str, int"),
    (lambda: proton.data.get(0, "p"), "get_data", "get_data(sessionId: int, phase: int) -> str", "int, str"),
    (lambda: proton.data.get_msgpack("x"), "get_data_msgpack",
     "get_data_msgpack(sessionId: int, phase: int) -> bytes", "str, int"),
    (lambda: proton.data.advance_phase("x"), "advance_data_phase",
     "advance_data_phase(sessionId: int) -> int", "str"),
    (lambda: proton.data.is_phase_complete("x"), "is_data_phase_complete",
     "is_data_phase_complete(sessionId: int, phase: int) -> bool", "str, int"),
    (lambda: proton.data.clear("x"), "clear_data",
     "clear_data(sessionId: int, phase: int, clearUpToPhase: bool = False) -> None", "str, int, bool"),
    (lambda: proton.context.depth("x"), "get_context_depth", "get_context_depth(arg: int, /) -> int", "str"),
])
def test_session_functions_with_a_wrong_argument_type_raise_type_error(session, call, fn, signature, types):
    with pytest.raises(TypeError) as e:
        call()
    assert str(e.value) == _message(fn, signature, types)


def test_a_rejected_scope_name_leaves_the_tree_unchanged(session):
    with pytest.raises(TypeError):
        with proton.scope(7):
            pass
    with proton.scope("ok"):
        pass
    root = proton.data.get(session)[0]
    assert [c["frame"]["name"] for c in root["children"]] == ["ok"]
