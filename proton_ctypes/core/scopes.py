"""Scopes: ``scope``, ``cpu_timed_scope``, ``enter_scope`` and ``exit_scope``.

A scope names a region of host code; kernels launched inside it, and the metrics given
to it, land on its call-path node (``ROOT/outer/inner``).  Scopes nest per thread; a new
thread starts from a copy of the stack of the thread that started the session.

The common case (one group of sessions on this thread, shadow context) is inlined here:
a dict lookup in the call-path trie, two list appends, and -- only when a GPU backend will
need to attribute kernels -- a ``(time_ns(), node)`` log entry, and -- only for
``data="trace"`` sessions -- the scope's entry and exit in the thread's trace log
(:mod:`.scope_events` says more).  Every other case goes through :mod:`.general_path`.
"""
from __future__ import annotations

import time
from functools import wraps
from typing import Any, Optional

from . import general_path, scope_events, trace_scopes
from .threads import tls, thread_ctx
from .flags import flags
from ..tree import callpath
from ..tree import metrics as _tmetrics
from ..tree.metric_plans import MAX_PLANS, SMALL_MAX, SMALL_MIN, add_planned
from ..tree.metrics import I64_MAX, I64_MIN, PTY

_flags = flags
_time_ns = time.time_ns

_kids = callpath.kids
_parent = callpath.parent
_child = callpath.child
_ids = scope_events.ids
_enter = scope_events.enter
_exit = scope_events.exit
_close = scope_events.close
_push = scope_events.push
_pop = scope_events.pop
_abandon = scope_events.abandon
_add_scope_metrics = scope_events.add_scope_metrics
_trace_plain = trace_scopes.add_plain
# bound by assignment, not import: CPython 3.11 compiles ``name.get(...)`` on an imported
# name as an attribute load (no LOAD_METHOD), which costs a bound-method object per call
_scalar_keys = _tmetrics.scalar_keys


def _keep_one(v, node: int, metrics: dict) -> None:
    """After ``metrics`` (one key) went into ``node`` in every flex of ``v``: keep, in
    ``v.scope_ones``, its key, its value's type and the stored entries it went into, for the
    fast path of :class:`scope` -- unless the value was converted (a roofline key, a type other
    than ``int`` or ``float``) or an entry is a property (overwritten, not summed)."""
    for key in metrics:
        break
    typ = type(metrics[key])
    info = _scalar_keys.get(key)
    if info is None or (typ is not float and typ is not int):
        return
    curs = tuple(flex[node][info[0]] for flex in v.flexes)
    if all(cur[0] != PTY for cur in curs):
        ones = v.scope_ones
        if len(ones) >= MAX_PLANS:
            ones.clear()
        ones[node] = (key, typ, curs)


class _Through:
    """The ``__enter__`` and ``__exit__`` of :class:`scope`'s subclasses that override
    ``_enter_scope`` or ``_exit_scope`` (:meth:`scope.__init_subclass__`): through those methods,
    as Proton's are (and named as Proton's in a python context's path)."""

    def __enter__(self):
        self._enter_scope()
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        self._exit_scope()


class scope:
    """A context manager and decorator that records a named region of host code.

    Usage::

        with proton.scope("attention", {"flops": 2e9}):
            kernel[grid](...)

        @proton.scope("step")
        def step(): ...

    Args:
        name: the frame name of the scope in the call-path tree.
        metrics: optional ``{name: value}`` added to the scope's node at entry; values are
            ints, floats, lists of them, or tensors. Suffixes ``(inc)``, ``(exc)`` and
            ``(pty)`` choose how repeated values combine (see :mod:`proton_ctypes.tree.metrics`).

    ``id`` holds the scope id while entered (None when profiling is off).
    """

    __slots__ = ("name", "metrics", "id", "_targets")

    def __init__(self, name: str, metrics: Optional[dict[str, Any]] = None) -> None:
        self.name = name
        self.metrics = metrics
        self.id = None

    def __init_subclass__(cls, **kwargs):
        """A subclass that overrides ``_enter_scope`` or ``_exit_scope`` has it called at every
        entry or exit, as Proton's ``__enter__``/``__exit__`` do (this class's own inline the
        fast path and would pass the override by)."""
        super().__init_subclass__(**kwargs)
        if "_enter_scope" in cls.__dict__ and "__enter__" not in cls.__dict__:
            cls.__enter__ = _Through.__enter__
        if "_exit_scope" in cls.__dict__ and "__exit__" not in cls.__dict__:
            cls.__exit__ = _Through.__exit__

    def _enter_scope(self):
        if flags.profiling_on:
            self.id = _enter(self, self.metrics)

    def _exit_scope(self):
        if flags.profiling_on and self.id is not None:
            _exit(self.id)

    def __enter__(self):
        # _enter with _push inlined (the call would cost ~10 % of a scope): one trie lookup,
        # two appends (+ the log for GPUs); a thread's fast-path view exists only while
        # profiling is on (threads.resync)
        try:
            ctx = tls.ctx
        except AttributeError:
            ctx = thread_ctx()
        v = ctx.view
        if v is None:
            if _flags.profiling_on:
                # through _enter_scope, as Proton: its frame is the deepest of a python context's path
                self._enter_scope()
            return self
        self.id = sid = next(_ids)
        try:  # a subscript, not dict.get (~5 ns less); a miss (first use, a name not a str) is rare
            node = v.kids[self.name]
        except (KeyError, TypeError):  # TypeError: an unhashable name, refused by scope_child
            node = general_path.scope_child(v.top, self.name, sid)
        v.ids.append(sid)
        v.top = node
        v.kids = _kids[node]
        st = ctx.state
        if st is not None:
            node = _child(node, st)
        if node not in v.created:
            # first seen: time_ns, not the edge clock (whose read would end a rewritable entry)
            v.created[node] = _time_ns()
        tl = v.tlog
        if tl is None:
            c = v.cursor
            if c is not None:
                log = v.log
                # the log entry (time_ns, code), or the last one's code rewritten: core/views.py
                if c.last is log and not c.words[c.i]:
                    log[-1] = node
                else:
                    log.append(v.now())
                    log.append(node)
                    if c.last is c:  # no buffer request or context change since the clock read
                        c.last = log
            elif v.logging:
                log = v.log
                # the log entry (time_ns, code): the contract is in core/views.py
                log.append(v.now())
                log.append(node)
        else:
            c = v.cursor
            if c is not None and not c.words[c.i]:
                # no launch since the thread's last mark: the clock's work, inlined (it moves the
                # mark to this time: a trace links kernels by time, so a trace edge never rewrites)
                c.last = c
                c.t = t = _time_ns()
            else:
                t = v.now()
            # the trace log's enter entry: the contract is in core/trace_scopes.py
            tl.append((sid, t, node))
            if v.logging:
                log = v.log
                log.append(t)
                log.append(node)
        m = self.metrics
        if m:
            try:
                if tl is not None:  # the trace event takes the metrics (tree sessions too: the general path)
                    if v.flexes or not _trace_plain(ctx.trace, sid, m):
                        _add_scope_metrics(ctx, sid, ((v, node),), m)
                    elif st is not None:
                        general_path.clear_state_after_metrics(ctx)
                    return self
                if len(m) == 1:
                    # one plain number under the key this node took last: in place, into the stored
                    # entries the view keeps (_keep_one; a plan of add_planned costs more for one key)
                    one = v.scope_ones.get(node)
                    if one is not None:
                        k, t, curs = one
                        try:
                            val = m[k]
                        except KeyError:  # another key: the add below
                            val = None
                        if type(val) is t and (t is float or SMALL_MIN <= val <= SMALL_MAX
                                               or I64_MIN <= val <= I64_MAX):
                            for cur in curs:
                                cur[2] += val
                            if st is not None:
                                general_path.clear_state_after_metrics(ctx)
                            return self
                if add_planned(v.flexes, node, m, v.scope_plans):
                    if len(m) == 1:
                        _keep_one(v, node, m)
                    if st is not None:
                        general_path.clear_state_after_metrics(ctx)
                else:
                    _add_scope_metrics(ctx, sid, ((v, node),), m)
            except BaseException:  # refused metrics: the scope must not stay open
                self.id = None
                _abandon(ctx, sid, m)
                raise
        return self

    def __exit__(self, exc_type, exc_value, traceback):
        sid = self.id
        if sid is not None:
            try:
                ctx = tls.ctx
            except AttributeError:
                ctx = thread_ctx()
            v = ctx.view
            if v is None:
                if _flags.profiling_on:
                    general_path.exit(ctx, sid)
                return
            ids = v.ids
            if ids and ids[-1] == sid:
                ids.pop()
                top = _parent[v.top] if ids else 0
                v.top = top
                v.kids = _kids[top]
                tl = v.tlog
                if tl is None:
                    c = v.cursor
                    if c is not None:
                        st = ctx.state
                        code = top if st is None else _child(top, st)
                        log = v.log
                        # the log entry (time_ns, code), or the last one's code rewritten: core/views.py
                        if c.last is log and not c.words[c.i]:
                            log[-1] = code
                        else:
                            log.append(v.now())
                            log.append(code)
                            if c.last is c:  # no buffer request or context change since the clock read
                                c.last = log
                    elif v.logging:
                        st = ctx.state
                        log = v.log
                        # the log entry (time_ns, code): the contract is in core/views.py
                        log.append(v.now())
                        log.append(top if st is None else _child(top, st))
                else:
                    c = v.cursor
                    if c is not None and not c.words[c.i]:  # the clock's work, inlined (as at entry)
                        c.last = c
                        c.t = t = _time_ns()
                    else:
                        t = v.now()
                    # the trace log's exit entry: the contract is in core/trace_scopes.py
                    tl.append((sid, t))
                    if v.logging:
                        st = ctx.state
                        log = v.log
                        log.append(t)
                        log.append(top if st is None else _child(top, st))
                return
            general_path.exit(ctx, sid)

    def __call__(self, func):
        @wraps(func)
        def wrapper(*args, **kwargs):
            self._enter_scope()
            try:
                return func(*args, **kwargs)
            finally:
                self._exit_scope()

        return wrapper


class cpu_timed_scope(scope):
    """A scope that also records the host wall time spent inside it as ``cpu_time (ns)``.

    The time includes nested scopes but is stored as an exclusive metric (summed over
    repeats, never propagated), as in Proton.  The key ``cpu_time`` is reserved.

    Args:
        name: the frame name of the scope.
        metrics: optional extra metrics, as for :class:`scope`.
    """

    __slots__ = ("start_time",)

    def __init__(self, name: str, metrics: Optional[dict[str, Any]] = None) -> None:
        super().__init__(name, metrics)
        self.start_time = None
        if metrics and "cpu_time" in metrics:
            raise ValueError("The metric name 'cpu_time' is reserved.")

    def _enter_scope(self):
        if not flags.profiling_on:
            return
        self.start_time = time.perf_counter_ns()
        super()._enter_scope()   # a frame of its own, as in Proton (the python context's path)

    def _exit_scope(self):
        if not flags.profiling_on:
            return
        if self.id is None:
            return
        try:
            if self.start_time is not None:
                elapsed = time.perf_counter_ns() - self.start_time
                # added directly, as Proton does (not inside metadata_state): the state stays set
                general_path.add_metrics(thread_ctx(), self.id, self._targets, {"cpu_time (ns)(exc)": elapsed})
        finally:  # a refused cpu_time (a float "cpu_time (ns)" given at entry) still closes the scope
            _exit(self.id)


class _Entered:
    """What ``enter_scope`` remembers for ``exit_scope``: the name and metric targets."""

    __slots__ = ("name", "_targets")

    def __init__(self, name):
        self.name = name


def enter_scope(name: str, *, metrics: Optional[dict[str, Any]] = None) -> Optional[int]:
    """Enter a scope without a ``with`` block; pair it with :func:`exit_scope`.

    Returns the scope id, or None when profiling is off.
    """
    if not _flags.profiling_on:
        return None
    try:
        ctx = tls.ctx
    except AttributeError:
        ctx = thread_ctx()
    v = ctx.view
    if v is None or metrics:
        e = _Entered(name)
        sid = _enter(e, metrics)
        ctx.entered.append((sid, name, None, e._targets))
        return sid
    sid = next(_ids)
    ctx.entered.append((sid, name, v, _push(ctx, v, sid, name)))
    return sid


def exit_scope(name: Optional[str] = None, *, metrics: Optional[dict[str, Any]] = None) -> Optional[int]:
    """Exit the innermost scope opened with :func:`enter_scope` on this thread.

    ``name``, when given, must match that scope's name (``ValueError`` otherwise; the
    scope is closed all the same).  ``metrics`` are added to the scope before it closes.
    Returns the scope id, or None when profiling is off.
    """
    if not _flags.profiling_on:
        return None
    try:
        ctx = tls.ctx
    except AttributeError:
        ctx = thread_ctx()
    sid, popped, v, node = ctx.entered.pop()
    if name and name != popped:
        _close(ctx, sid)
        raise ValueError(f"Scope name mismatch: {name} != {popped}")
    if metrics:
        try:
            _add_scope_metrics(ctx, sid, ((v, node),) if v is not None else node, metrics)
        finally:  # refused metrics still close the scope (Proton leaves it open)
            _close(ctx, sid)
        return sid
    v = ctx.view
    if v is None or not _pop(ctx, v, sid):  # scope_events.close, inlined (a frame is ~5 % of the pair)
        general_path.exit(ctx, sid)
    return sid
