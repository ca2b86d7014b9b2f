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

_installed = False
_previous = {}
HANDLED = (signal.SIGTERM, signal.SIGINT)


def snapshot_all() -> None:
    """Write every live session as it stands now, keeping it alive; never raises."""
    from . import manager
    from .events import G
    for s in list(G.sessions.values()):
        try:
            fmt = manager.resolve_format(s, "")
            manager.write(s, fmt)
        except BaseException as e:  # the profiled program must not die of the profiler
            try:
                sys.stderr.write(f"proton_ctypes: could not write {s.name}: {e}\n")
            except Exception:
                pass


def _on_signal(signum, frame):
    snapshot_all()
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
    from . import manager
    from .events import G
    from .flags import flags
    if not G.sessions:
        return
    flags.profiling_on = False
    try:
        manager.finalize_all("")
    except BaseException as e:
        try:
            sys.stderr.write(f"proton_ctypes: finalize at exit failed: {e}\n")
        except Exception:
            pass


def _after_fork_in_child():
    from . import events
    from .flags import flags
    from .hooks.hook import HookManager
    from . import manager
    G = events.G
    # another thread may have held the lock at fork time: it never releases it here
    G.lock = threading.RLock()
    flags.profiling_on = False
    G.sessions.clear()
    G.threads.clear()
    G.views_by_tid.clear()
    G.active = ()
    G.py_active = ()
    G.epoch += 1
    events._tls.__dict__.clear()
    manager.reset_after_fork()
    HookManager.active_hooks.clear()
    HookManager.session_hooks.clear()


def install() -> None:
    """Install the exit, fork and (from the main thread) signal handlers once."""
    global _installed
    if _installed:
        return
    _installed = True
    atexit.register(_at_exit)
    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork_in_child)
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
