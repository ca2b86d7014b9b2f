"""Nothing lost on the way out: signals, interpreter exit and fork.

* ``SIGTERM`` and ``SIGINT``: every live session is flushed and written (whole file or
  none) before the previous handler runs; the sessions stay alive, so a program that
  catches ``KeyboardInterrupt`` and goes on loses nothing and a later ``finalize``
  rewrites the files with everything.  The writing runs on a thread of its own: the signal
  may have interrupted the program while it held a lock of the profiler (in the profiler's
  own code, or around it), and writing from the interrupted thread would then wait for good.
  The handler waits for that thread at most :data:`SIGNAL_WRITE_WAIT_S` (not at all when the
  interrupted code is the profiler's); a default action still due then (``SIGTERM``'s end of
  the process) waits for the writing, the program going on meanwhile.
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
#: how long a signal handler waits for the profiles to be written before it goes on
SIGNAL_WRITE_WAIT_S = 5.0
#: how long the interpreter's exit waits for a signal's writing still under way
EXIT_WRITE_WAIT_S = 60.0
#: this package's folder: a frame of a file below it is the profiler's own code
PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
#: the thread writing the profiles for the last signal (None: none yet)
_writer: Optional[threading.Thread] = None
#: what the session manager gave :func:`install` (it owns the sessions; this module
#: only knows when to call it)
_snapshot: Optional[Callable[[], None]] = None
_finalize: Optional[Callable[[], None]] = None


def _say(msg: str) -> None:
    try:
        sys.stderr.write(msg)
    except Exception:  # stderr closed: nothing else to do
        pass


def _write_all() -> None:
    try:
        _snapshot()
    except BaseException as e:  # the profiled program must not die of the profiler
        _say(f"proton_ctypes: could not write the profiles: {e}\n")


def _in_profiler(frame) -> bool:
    """Whether the interrupted frame is the profiler's own code."""
    return frame is not None and frame.f_code.co_filename.startswith(PACKAGE_DIR)


def _deliver_when_written(writer: threading.Thread, signum: int) -> None:
    writer.join()
    os.kill(os.getpid(), signum)


def _on_signal(signum, frame):
    global _writer
    writer = _writer = threading.Thread(target=_write_all, name="proton_ctypes-signal", daemon=True)
    try:
        writer.start()
    except RuntimeError:        # no new thread at interpreter shutdown: write from here
        _write_all()
    if writer.is_alive() and not _in_profiler(frame):
        writer.join(SIGNAL_WRITE_WAIT_S)
    prev = _previous.get(signum)
    if callable(prev):
        return prev(signum, frame)
    if prev == signal.SIG_IGN:
        return None
    # default action: restore it and deliver the signal again, once the profiles are written
    signal.signal(signum, signal.SIG_DFL)
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    if writer.is_alive():
        try:
            threading.Thread(target=_deliver_when_written, args=(writer, signum), daemon=True).start()
            return None
        except RuntimeError:    # interpreter shutdown: the writing has what the exit gives it
            writer.join(EXIT_WRITE_WAIT_S)
    os.kill(os.getpid(), signum)


def _at_exit():
    writer = _writer
    if writer is not None and writer.is_alive():   # a signal's writing under way: a daemon
        writer.join(EXIT_WRITE_WAIT_S)              # thread, cut off at exit
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
