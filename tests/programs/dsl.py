"""A small language of profiler calls, so that one random program runs the same way in-process,
under real Proton and under proton_ctypes (JSON-serialisable, interpreted by :class:`Interpreter`).

A program is a list of ops; each op is a list whose first element names it:

* ``["start", name, data, context, hook, mode]`` - ``proton.start(out(name), ...)``; the id is kept
  (session references below are indices into the ids of the starts that succeeded);
* ``["finalize", ref, fmt]``, ``["activate", ref]``, ``["deactivate", ref]``, ``["phase", ref]``
  (``data.advance_phase``), ``["get", ref, msgpack]`` (``data.get``/``get_msgpack``, the result is
  recorded), ``["depth", ref]`` (``context.depth``, recorded); ``ref`` is None (all), an index,
  ``"unknown"`` (id 99) or ``"bad"`` (a str: a type error);
* ``["open", kind, name, metrics]`` - enter a ``scope``, ``cpu_timed_scope`` (``cpu``),
  ``enter_scope`` (``manual``) or ``state``; ``["close", depth, exit_name, metrics]`` - leave the
  open one ``depth`` places below the innermost (0: the innermost); ``exit_name`` is ``"same"``,
  ``"none"`` or ``"other"`` for ``exit_scope``;
* ``["enter_state", name]``, ``["exit_state"]``;
* ``["thread", ops]`` - run ``ops`` in a new thread; it stays alive until :meth:`Interpreter.end`
  (the OS would reuse the id of a finished thread, and thread ids number the trace's ``tid``);
* ``["bad", what]`` - a call with an argument of the wrong type.

``metrics`` is None, ``["dict", [[key, value], ...]]`` (keys may be ints) or ``["raw", value]`` (a
value that is not a dict).  Every exception an op raises is caught and recorded as its type name.
"""
from __future__ import annotations

import threading

SCOPE_KINDS = ("scope", "cpu", "manual", "state")
BAD_CALLS = ("start", "finalize", "activate", "scope", "enter_state", "get", "depth")


def metrics_of(encoded):
    """The metrics argument an encoded ``metrics`` stands for."""
    if encoded is None:
        return None
    kind, payload = encoded
    if kind == "dict":
        return {k: v for k, v in payload}
    return payload


class Interpreter:
    """Runs ops against a profiler module ``proton``; files go to ``out(name)``.

    ``record(key, value)`` receives what the program observes (errors as type names, results of
    ``get`` and ``depth``), in the order of the ops.
    """

    def __init__(self, proton, out, record, sessions=None, prefix="", errors=None):
        self.proton = proton
        self.out = out
        self.record = record
        self.sessions = [] if sessions is None else sessions
        #: every exception caught, in order (threads' too): ``(op, exception)``
        self.errors = [] if errors is None else errors
        self.open = []
        self.prefix = prefix
        self.count = 0
        self.threads = []
        self.finished = threading.Event()

    def ref(self, r):
        """The session id a reference stands for."""
        if r is None:
            return None
        if r == "bad":
            return "x"
        if r == "unknown" or not self.sessions:
            return 99
        return self.sessions[r % len(self.sessions)]

    def run(self, op):
        """Run one op; return the exception it raised (also recorded), or None."""
        key = f"{self.prefix}{self.count}"
        self.count += 1
        try:
            getattr(self, "_" + op[0])(key, *op[1:])
        except Exception as e:  # noqa: BLE001 - the caller judges which exceptions are allowed
            self.record(key, type(e).__name__)
            self.errors.append((op, e))
            return e
        return None

    def _start(self, key, name, data, context, hook, mode):
        sid = self.proton.start(self.out(name), data=data, context=context, hook=hook, mode=mode)
        if sid is not None and sid not in self.sessions:
            self.sessions.append(sid)

    def _finalize(self, key, ref, fmt):
        self.proton.finalize(self.ref(ref), fmt)

    def _activate(self, key, ref):
        self.proton.activate(self.ref(ref))

    def _deactivate(self, key, ref):
        self.proton.deactivate(self.ref(ref))

    def _phase(self, key, ref):
        self.record(key, self.proton.data.advance_phase(self.ref(ref)))

    def _get(self, key, ref, msgpack):
        sid = self.ref(0 if ref is None else ref)
        if msgpack:
            self.record(key, type(self.proton.data.get_msgpack(sid)).__name__)
        else:
            self.record(key, self.proton.data.get(sid))

    def _depth(self, key, ref):
        self.record(key, self.proton.context.depth(self.ref(0 if ref is None else ref)))

    def _open(self, key, kind, name, metrics):
        m = metrics_of(metrics)
        p = self.proton
        if kind == "manual":
            p.enter_scope(name, metrics=m)
            self.open.append(("manual", name))
            return
        obj = {"scope": p.scope, "cpu": p.cpu_timed_scope}[kind](name, m) if kind != "state" else p.state(name)
        obj.__enter__()
        self.open.append((kind, obj))

    def _close(self, key, depth, exit_name, metrics):
        if not self.open:
            return
        kind, what = self.open.pop(len(self.open) - 1 - depth % len(self.open))
        if kind == "manual":
            name = {"same": what, "none": None, "other": f"{what}_other"}[exit_name]
            self.proton.exit_scope(name, metrics=metrics_of(metrics))
        else:
            what.__exit__(None, None, None)

    def _enter_state(self, key, name):
        self.proton.enter_state(name)

    def _exit_state(self, key):
        self.proton.exit_state()

    def _thread(self, key, ops):
        # the interpreter's own class: a subclass's ops run in threads too
        inner = type(self)(self.proton, self.out, self.record, self.sessions, f"{key}.", self.errors)
        ran = threading.Event()

        def body():
            for op in ops:
                inner.run(op)
            ran.set()
            self.finished.wait()  # alive until the program ends: no thread id is reused meanwhile
        t = threading.Thread(target=body)
        self.threads.append(t)
        t.start()
        ran.wait()

    def end(self):
        """Let the threads of ``thread`` ops end, and join them."""
        self.finished.set()
        for t in self.threads:
            t.join()
        self.threads.clear()

    def _bad(self, key, what):
        p = self.proton
        {"start": lambda: p.start(5),
         "finalize": lambda: p.finalize("x"),
         "activate": lambda: p.activate("x"),
         "scope": lambda: p.scope(3).__enter__(),
         "enter_state": lambda: p.enter_state(5),
         "get": lambda: p.data.get("x"),
         "depth": lambda: p.context.depth("x")}[what]()
