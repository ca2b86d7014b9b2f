"""Keep a Python thread state on the vendor's own threads that call back into Python.

A ctypes callback entered on a thread Python did not start (autograd's backward thread,
CUPTI's worker, a C++ serving thread) gets a Python thread state made for that one call and
destroyed when it returns (``PyGILState_Ensure`` / ``PyGILState_Release``): several µs per
callback, which a launch callback pays per kernel.  :func:`keep_thread_state`, called
inside such a callback, takes one more ``PyGILState_Ensure`` that is never released, so the
thread keeps its state and every later callback there only takes the GIL.  Python's own
threads already own a state; for them it only counts one more reference.
"""
from __future__ import annotations

import ctypes
import threading

_kept = threading.local()


def keep_thread_state() -> None:
    """Make the calling thread keep its Python thread state (once per thread; the GIL must be held)."""
    if getattr(_kept, "done", False):
        return
    ctypes.pythonapi.PyGILState_Ensure()   # released never: the state outlives this callback
    _kept.done = True
