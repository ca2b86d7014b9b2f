"""In-process access to profile data and phases (``proton.data``)."""
from __future__ import annotations

from typing import Optional

from ._deepjson import loads_deep
from .core import manager, registry, signatures
from .flags import flags


def _guard(session, what: str) -> None:
    if flags.command_line and session != 0:
        raise ValueError(f"Only one session can {what} when running from the command line.")


def _phase(session, phase):
    s = manager.get(session)
    if s.data != "tree":
        raise RuntimeError("[PROTON] Only TreeData is supported for getData() for now")
    manager.flush(s)
    pd = s.phases.get(phase)
    # a cleared phase has no data, except the current one, which is empty until used again
    if pd is None or (pd.cleared and not pd.has_data() and phase != s.phase):
        raise IndexError(f"[PROTON] Phase {phase} has no data.")
    return s


def get(session: Optional[int] = 0, phase: int = 0):
    """The tree of ``phase`` as Python objects: ``[root, device_info]`` (hatchet layout)."""
    if session is None:
        return None
    _guard(session, "be retrieved")
    signatures.check("get", ("session", session, int), ("phase", phase, int))
    s = _phase(session, phase)
    return loads_deep(manager.render(s, phase, "hatchet"))


def get_msgpack(session: Optional[int] = 0, phase: int = 0):
    """The tree of ``phase`` encoded with MessagePack (``bytes``)."""
    if session is None:
        return None
    _guard(session, "be retrieved")
    signatures.check("get_msgpack", ("session", session, int), ("phase", phase, int))
    s = _phase(session, phase)
    return manager.render(s, phase, "hatchet_msgpack")


def advance_phase(session: Optional[int] = 0) -> Optional[int]:
    """Start a new phase: later events go to a fresh tree. Returns the new phase number."""
    if session is None:
        return None
    _guard(session, "advance phase")
    signatures.check("advance_phase", ("session", session, int))
    s = manager.get(session)
    p = s.advance_phase()
    registry.bump_epoch()
    return p


def is_phase_complete(session: Optional[int] = 0, phase: int = 0) -> bool:
    """Whether ``phase`` is closed and all its device records were flushed."""
    if session is None:
        return False
    _guard(session, "check phase completion status")
    signatures.check("is_phase_complete", ("session", session, int), ("phase", phase, int))
    s = manager.get(session)
    pd = s.phases.get(phase)
    return bool(pd is not None and pd.complete and phase < s.phase)


def clear(session: Optional[int] = 0, phase: int = 0, clear_up_to_phase: bool = False) -> None:
    """Drop the data of ``phase`` (or of every phase up to it)."""
    if session is None:
        return
    _guard(session, "be cleared")
    signatures.check("clear", ("session", session, int), ("phase", phase, int),
                     ("clear_up_to_phase", clear_up_to_phase, bool))
    s = manager.get(session)
    for p in list(s.phases):
        if p == phase or (clear_up_to_phase and p <= phase):
            del s.phases[p]
    if s.phase not in s.phases:
        s.renew_current()
        registry.bump_epoch()
