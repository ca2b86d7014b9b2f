"""The clock of the log entries (:mod:`.views`): ``time.time_ns`` unless a backend gives its own.

A backend that places kernels by where their records lie among a thread's scope edges
(``Backend.edge_clock``: CUPTI's launch positions) needs each log entry's time to come from
a clock that also notes the thread's position then.  Every view holds the clock of its
thread (``View.now``, from :func:`for_thread` when the view is made), so a log entry costs one
attribute read more than ``time.time_ns()``, not a thread-local lookup: the backend may give a
clock bound to each thread (``Backend.thread_edge_clock``).  Views are made again at every
change of the active sessions, after :func:`use` (the session manager installs the clock
before it bumps the epoch), so no view outlives the clock it was made with in use.
"""
from __future__ import annotations

import threading
import time
from typing import Callable, Optional

Clock = Callable[[], int]

_current: Clock = time.time_ns
_per_thread: Optional[Callable[[int], Clock]] = None


def use(clock: Optional[Clock], per_thread: Optional[Callable[[int], Clock]] = None) -> None:
    """Make ``clock`` the log clock (None: ``time.time_ns``); ``per_thread(tid)``, if given,
    returns the same clock bound to thread ``tid`` (for views made on that thread)."""
    global _current, _per_thread
    _current = time.time_ns if clock is None else clock
    _per_thread = per_thread if clock is not None else None


def current() -> Clock:
    """The log clock in use."""
    return _current


def for_thread(tid: Optional[int]) -> Clock:
    """The log clock for a view of thread ``tid`` (native id; None: a view of no thread): the
    per-thread clock when the calling thread is ``tid`` itself (a bound clock notes the position
    of its own thread only), else the clock in use."""
    per_thread = _per_thread
    if per_thread is not None and tid == threading.get_native_id():
        return per_thread(tid)
    return _current
