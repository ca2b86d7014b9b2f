"""Nothing lost on the way out: signals, interpreter exit and fork.

* ``SIGTERM`` and ``SIGINT``: every live session is flushed and written (whole file or
  none) before the previous handler runs; the sessions stay alive, so a program that
  catches ``KeyboardInterrupt`` and goes on loses nothing and a later ``finalize``
  rewrites the files with everything.
* interpreter exit (``atexit``): live sessions are finalized.
* ``fork``: the child starts with no session, no thread state and profiling off, so it
  never writes its parent's files.
* ``SIGKILL`` and hard crashes cannot be handled; with ``mode="periodic_flushing"`` the
  phases closed before them are already on disk.

Handlers are installed at the first ``start`` (signals only from the main thread, and
only where the current handler is Python's default or a Python callable).
"""
from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
from typing import Callable, Optional

_installed = False
_previous = {}
HANDLED = (signal.SIGTERM, signal.SIGINT)
#: what the session manager gave :func:`install` (it owns the sessions; this module
#: only knows when to call it)
_snapshot: Optional[Callable[[], None]] = None
_finalize: Optional[Callable[[], None]] = None


def _say(msg: str) -> None:
    try:
        sys.stderr.write(msg)
    except Exception:  # stderr closed: nothing else to do
        pass


def _on_signal(signum, frame):
    try:
        _snapshot()
    except BaseException as e:  # the profiled program must not die of the profiler
        _say(f"proton_ctypes: could not write the profiles: {e}\n")
    prev = _previous.get(signum)
    if callable(prev):
        return prev(signum, frame)
    if prev == signal.SIG_IGN:
        return None
    # default action: restore it and deliver the signal again
    signal.signal(signum, signal.SIG_DFL)
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    os.kill(os.getpid(), signum)


def _at_exit():
    try:
        _finalize()
    except BaseException as e:
        _say(f"proton_ctypes: finalize at exit failed: {e}\n")


def install(snapshot: Callable[[], None], finalize: Callable[[], None],
            after_fork_in_child: Callable[[], None]) -> None:
    """Install the exit, fork and (from the main thread) signal handlers once.

    ``snapshot()`` writes every live session keeping it alive (signals), ``finalize()``
    writes and ends them (interpreter exit), ``after_fork_in_child()`` forgets them.
    """
    global _installed, _snapshot, _finalize
    if _installed:
        return
    _installed = True
    _snapshot, _finalize = snapshot, finalize
    atexit.register(_at_exit)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=after_fork_in_child)
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in HANDLED:
        try:
            cur = signal.getsignal(sig)
            if cur is None:  # installed from C: leave it alone
                continue
            _previous[sig] = cur
            signal.signal(sig, _on_signal)
        except (ValueError, OSError):
            pass
