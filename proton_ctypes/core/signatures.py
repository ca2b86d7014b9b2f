"""Proton's argument type errors: libproton's entry points reject a wrong argument type
with a ``TypeError`` naming the function's signature and the types it was given.

The checks stay off the hot paths: scope and state names are checked where a name is
first resolved to a node (a miss in the trie's child cache), the rest at each call.
"""
from __future__ import annotations

START = "start(path: str, contextSourceName: str, dataName: str, profilerName: str, mode: str = '') -> int"
ENTER_SCOPE = "enter_scope(arg0: int, arg1: str, /) -> None"
ENTER_STATE = "enter_state(arg: str, /) -> None"
FINALIZE = "finalize(arg0: int, arg1: str, /) -> None"
ACTIVATE = "activate(arg: int, /) -> None"
DEACTIVATE = "deactivate(arg0: int, arg1: bool, /) -> None"
GET_DATA = "get_data(sessionId: int, phase: int) -> str"
GET_DATA_MSGPACK = "get_data_msgpack(sessionId: int, phase: int) -> bytes"
ADVANCE_PHASE = "advance_data_phase(sessionId: int) -> int"
IS_PHASE_COMPLETE = "is_data_phase_complete(sessionId: int, phase: int) -> bool"
CLEAR_DATA = "clear_data(sessionId: int, phase: int, clearUpToPhase: bool = False) -> None"
CONTEXT_DEPTH = "get_context_depth(arg: int, /) -> int"


def incompatible(signature: str, *args) -> TypeError:
    """The ``TypeError`` libproton raises when ``signature`` is called with ``args``."""
    fn = signature.split("(", 1)[0]
    types = ", ".join(type(a).__name__ for a in args)
    return TypeError(f"{fn}(): incompatible function arguments. The following argument types are supported:\n"
                     f"    1. {signature}\n\nInvoked with types: {types}")


def check(signature: str, *pairs) -> None:
    """Raise :func:`incompatible` unless each ``(value, type)`` of ``pairs`` matches.

    An ``int`` parameter takes any int (``bool`` included, as nanobind converts it).
    """
    for value, kind in pairs:
        if not isinstance(value, kind):
            raise incompatible(signature, *(v for v, _ in pairs))
