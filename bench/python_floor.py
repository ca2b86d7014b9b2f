"""The pure-Python floor of a scope or state edge on a CPU (``bench/scope_overhead.py``).

A profiler without compiled code of its own runs Python at every edge; :class:`PurePythonFloor`
runs the least of it. A goal under this floor cannot be met in pure Python.
"""
from __future__ import annotations

import threading


class _ThreadSlots(threading.local):
    """What the floor keeps per thread: the names of the open scopes and the state."""

    def __init__(self):
        self.stack = []
        self.state = None


#: the floor's per-thread data (one per process: the floor has nothing else to keep)
_slots = _ThreadSlots()


class _Scope:
    """A scope of the floor: its name pushed at entry, popped at exit."""

    __slots__ = ("name", "metrics")

    def __init__(self, name, metrics=None):
        self.name = name
        self.metrics = metrics

    def __enter__(self):
        _slots.stack.append(self.name)
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        _slots.stack.pop()


class _State:
    """A state of the floor: its name stored at entry, cleared at exit."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name

    def __enter__(self):
        _slots.state = self.name
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        _slots.state = None


class PurePythonFloor:
    """The least a pure-Python profiler does at a scope or state edge when no GPU kernel is to
    be attributed: a scope pushes or pops its name on a thread-local stack, a state stores or
    clears a thread-local slot -- one ``threading.local`` access per edge, no id, no call-path
    node, no metric, nothing written at ``finalize``.  Per-thread data lives in a
    ``threading.local``, as in proton_ctypes, although a ``ContextVar`` is cheaper to read: a
    context is copied into asyncio tasks and into ``asyncio.to_thread``'s worker thread, so a
    ``ContextVar`` would let two threads share one scope stack."""

    scope = _Scope
    state = _State
    _slots = _slots

    def enter_scope(self, name, metrics=None):
        """Push ``name`` on the calling thread's stack (``metrics`` are ignored)."""
        _slots.stack.append(name)

    def exit_scope(self, name=None, metrics=None):
        """Pop the calling thread's innermost scope."""
        _slots.stack.pop()

    def start(self, name=None, **kwargs):
        """Nothing to switch on (the arguments of ``proton.start`` are ignored)."""

    def finalize(self):
        """Forget the calling thread's scopes and state."""
        _slots.stack.clear()
        _slots.state = None
