"""The clock of the log entries (:mod:`.views`): ``time.time_ns`` unless a backend gives its own.

A backend that places kernels by where their records lie among a thread's scope edges
(``Backend.edge_clock``: CUPTI's launch positions) needs each log entry's time to come from
a clock that also notes the thread's position then.  The modules that write log entries on
their fast paths keep the clock in a module global (one lookup per entry, as for
``time.time_ns`` itself): each calls :func:`follow` once, and :func:`use` rebinds it in all
of them.
"""
from __future__ import annotations

import time
from typing import Callable, Optional

_followers = []
_current: Callable[[], int] = time.time_ns
#: the module global each follower reads
NAME = "_time_ns"


def follow(namespace: dict) -> Callable[[], int]:
    """Register a module's globals (``globals()``) to receive the clock as ``_time_ns``; returns
    the clock in use now (bind it to ``_time_ns``)."""
    _followers.append(namespace)
    return _current


def use(clock: Optional[Callable[[], int]]) -> None:
    """Make ``clock`` the log clock of every follower (None: ``time.time_ns``)."""
    global _current
    _current = time.time_ns if clock is None else clock
    for namespace in _followers:
        namespace[NAME] = _current


def current() -> Callable[[], int]:
    """The log clock in use."""
    return _current
