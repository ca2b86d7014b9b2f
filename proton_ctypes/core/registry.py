"""The session registry: the live sessions, the active ones, every thread's context and views,
and the epoch that tells threads to regroup their views.

One process-wide object, :data:`G`.  Whenever the set of active sessions (or a phase)
changes, :func:`bump_epoch` moves the epoch on and every thread regroups its views at its
next event (:func:`proton_ctypes.core.threads.resync`).
"""
from __future__ import annotations

import threading

from .flags import on_profiling_change


class Registry:
    """Process-wide state of the engine (:data:`G`)."""

    __slots__ = ("epoch", "active", "sessions", "threads", "views_by_tid", "lock", "py_active", "capturing")

    def __init__(self):
        self.epoch = 0
        #: active sessions (tuple), shadow and python context alike
        self.active = ()
        #: live (not finalized) sessions by id
        self.sessions = {}
        #: native tid -> ThreadCtx (latest thread of that id)
        self.threads = {}
        #: native tid -> list of every view ever created on that tid (for joins)
        self.views_by_tid = {}
        self.lock = threading.RLock()
        #: active sessions using context="python"
        self.py_active = ()
        #: stream captures in progress (CUDA graphs): metrics then take the general path, which
        #: hands them to the graph (core/graph_metrics.py)
        self.capturing = 0


#: the one registry
G = Registry()
#: called (under ``G.lock``) after every :func:`bump_epoch`: what the threads module does for
#: the threads that regroup only at their next event (registered by it: no upward import)
_after_epoch = []


def after_epoch(fn) -> None:
    """Call ``fn()`` after every :func:`bump_epoch`, under ``G.lock``."""
    _after_epoch.append(fn)


def bump_epoch() -> None:
    """Signal every thread that the set of active sessions (or a phase) changed."""
    with G.lock:
        G.epoch += 1
        G.active = tuple(s for s in G.sessions.values() if s.active)
        G.py_active = tuple(s for s in G.active if s.context == "python")
        for ctx in G.threads.values():
            ctx.view = None
        for fn in _after_epoch:
            fn()



on_profiling_change(bump_epoch)
