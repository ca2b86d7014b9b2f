"""NVTX ranges as scopes: what the CUPTI backend calls for ``nvtxRangePushA`` / ``nvtxRangePop``.

Proton turns each push into a scope entered on the calling thread and each pop into the exit
of the innermost one (``TRITON_ENABLE_NVTX``, on by default).  Here a push opens a
:class:`~.scopes.scope` named by the range's message, exactly as ``with proton.scope(name)``
would, and keeps it on a per-thread stack of its own, so that a pop closes the innermost
*NVTX* scope of the thread and never one opened with ``enter_scope`` or ``scope``.  A pop with
no NVTX scope open on its thread (the range was pushed before profiling started) is ignored.

:mod:`.manager` hands ``(enter, exit)`` to the backend at start; the backend calls them from
its CUPTI callback, on the thread that called NVTX.
"""
from __future__ import annotations

import os
import threading

from .scopes import scope

_local = threading.local()


def enter(name: str) -> None:
    """Open a scope named ``name`` on this thread for an NVTX range push."""
    s = scope(name)
    s.__enter__()
    try:
        stack = _local.stack
    except AttributeError:
        stack = _local.stack = []
    stack.append(s)


def exit() -> bool:
    """Close the innermost NVTX-opened scope of this thread; False when there is none."""
    stack = getattr(_local, "stack", None)
    if not stack:
        return False
    stack.pop().__exit__(None, None, None)
    return True


def _forget_after_fork() -> None:
    global _local
    _local = threading.local()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)
