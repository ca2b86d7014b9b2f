"""The pure-Python floor of a scope or state edge on a CPU (``bench/scope_overhead.py``).

A profiler without compiled code of its own runs Python at every edge; :class:`PurePythonFloor`
runs the least of it. A goal under this floor cannot be met in pure Python.
"""
from __future__ import annotations

import threading


class _ThreadSlots(threading.local):
    """What :class:`PurePythonFloor` keeps per thread: the names of the open scopes and the state."""

    def __init__(self):
        self.stack = []
        self.state = None


class PurePythonFloor:
    """The least a pure-Python profiler does at a scope or state edge when no GPU kernel is to
    be attributed: a scope pushes or pops its name on a thread-local stack, a state stores or
    clears a thread-local slot -- one ``threading.local`` access per edge, no id, no call-path
    node, no metric, nothing written at ``finalize``.  Per-thread data lives in a
    ``threading.local`` rather than a ``ContextVar`` (cheaper to read), as in proton_ctypes: a
    context is copied into asyncio tasks and into ``asyncio.to_thread``'s worker thread, so a
    ``ContextVar`` would let two threads share one scope stack."""

    def __init__(self):
        slots = self._slots = _ThreadSlots()

        class scope:
            __slots__ = ("name", "metrics")

            def __init__(self, name, metrics=None):
                self.name = name
                self.metrics = metrics

            def __enter__(self):
                slots.stack.append(self.name)
                return self

            def __exit__(self, exc_type, exc_value, traceback):
                slots.stack.pop()

        class state:
            __slots__ = ("name",)

            def __init__(self, name):
                self.name = name

            def __enter__(self):
                slots.state = self.name
                return self

            def __exit__(self, exc_type, exc_value, traceback):
                slots.state = None

        self.scope, self.state = scope, state

    def enter_scope(self, name, metrics=None):
        """Push ``name`` on the calling thread's stack (``metrics`` are ignored)."""
        self._slots.stack.append(name)

    def exit_scope(self, name=None, metrics=None):
        """Pop the calling thread's innermost scope."""
        self._slots.stack.pop()

    def start(self, name=None, **kwargs):
        """Nothing to switch on (the arguments of ``proton.start`` are ignored)."""

    def finalize(self):
        """Forget the calling thread's scopes and state."""
        self._slots.stack.clear()
        self._slots.state = None
