"""Scope events of ``data="trace"`` sessions: logged by the scope's thread, made into records later.

Every scope instance of a trace session becomes a :class:`~proton_ctypes.tree.phase.ScopeRecord`
(its thread's lane, start, end, node, scope id, metrics).  The thread that enters and exits the
scope does the least it can: it appends one tuple to its **trace log** at each end (on the fast
path of :mod:`.scopes`, beside what a tree scope does; the ``time_ns()`` of a logging view's entry
serves both), and the records are made when a session is flushed (:func:`settle_all`, called by
``core.manager``), on the flushing thread.

The trace log
-------------

``ThreadTrace.log``, a flat list appended only by its thread (the fast path holds it as
``View.tlog``); each item is one of

* ``(scope id, t_enter, node)``: a scope entered on the thread's fast-path view, at ``node`` (its
  state child when a state is set) in every trace session of that view (the :class:`Mark` in force
  names them);
* ``(scope id, t_enter, {session id: node})``: a scope entered on the general path;
* ``(scope id, t_exit)``: a scope exited;
* a :class:`Mark`, written when the thread regroups its views (``threads.resync``, at every change
  of the active sessions or of a phase): the trace sessions active from then on, each with its
  current phase, and those of the thread's fast-path view.

As in Proton, a scope's record goes to the sessions it was entered in that are still active when
it exits, into their phase current then (the mark in force at the exit): a session deactivated
meanwhile gets nothing.  A scope that never exits (left open at finalize) gives no record; nor
does one that exits while no trace session is active (its exit is not logged: it stays open in
``ThreadTrace.pending`` until the sessions it was entered in end).  Metrics given to a scope wait
in ``ThreadTrace.metrics`` until its record is made.
"""
from __future__ import annotations

import gc

from .registry import G
from ..tree import metrics as tmetrics
from ..tree.metrics import DOUBLE, I64_MAX, I64_MIN, INT, ROOFLINE_FLOAT, ROOFLINE_INT
from ..tree.phase import ScopeRecord

#: a ScopeRecord from its fields, without the Python frame of the named tuple's ``__new__``
_record = tuple.__new__
#: items of an enter entry of the trace log (an exit entry has two)
ENTER_LEN = 3

#: every thread that has a trace log (its ThreadTrace), until its log is settled and a new
#: thread took its native id
_traced: set = set()


class Mark:
    """The trace sessions in force on a thread from one regrouping on (see the module doc)."""

    __slots__ = ("phases", "fast")

    def __init__(self, phases: dict, fast: tuple):
        #: session id -> (session, its current phase) of every active trace session
        self.phases = phases
        #: ids of the trace sessions of the thread's fast-path view (its enter entries name no session)
        self.fast = fast


class ThreadTrace:
    """One thread's trace log, and what settling it keeps between flushes."""

    __slots__ = ("ctx", "log", "active", "metrics", "pending", "entered_under", "at")

    def __init__(self, ctx):
        #: the thread's context (``ctx.ident`` numbers its lane in a session)
        self.ctx = ctx
        #: the trace log (module doc)
        self.log = []
        #: whether a trace session was active at the thread's latest regrouping (exits are logged)
        self.active = False
        #: scope id -> ``{name: (value type, value)}``: metrics of scopes not yet made into records
        self.metrics = {}
        #: settling: scope id -> the enter entry of the scopes entered and not exited yet
        self.pending = {}
        #: settling: scope id -> the fast-path view's trace sessions (``Mark.fast``) when it was
        #: entered, for the fast-path scopes of ``pending`` entered before the latest mark
        self.entered_under = {}
        #: settling: the mark in force at the end of the settled part of the log
        self.at = Mark({}, ())


def mark(ctx, views) -> None:
    """Log a :class:`Mark` for the thread of ``ctx`` (called when it regroups its ``views``, under
    ``G.lock``): nothing while neither it nor any active session traces."""
    traced = [s for s in G.active if s.data == "trace"]
    tr = ctx.trace
    if tr is None:
        if not traced:
            return
        tr = ctx.trace = ThreadTrace(ctx)
        _traced.add(tr)
    elif not traced and not tr.active:
        return
    fast = tuple(s.id for s in views[0].sessions if s.data == "trace") if len(views) == 1 else ()
    tr.log.append(Mark({s.id: (s, s.current) for s in traced}, fast))
    tr.active = bool(traced)
    for v in views:
        if v.trace:
            v.tlog = tr.log if is_numbered(ctx, v) else FirstScope(v, tr.log)


def is_numbered(ctx, v) -> bool:
    """Whether the thread has its lane in every trace session of view ``v`` (``Session.trace_thread``
    numbers it at its first trace scope)."""
    for s in v.sessions:
        if s.data == "trace":
            num = s.trace_threads.get(ctx.ident)
            if num is None or s.trace_native.get(ctx.tid) != num:
                return False
    return True


class FirstScope:
    """``View.tlog`` of a view whose thread has no lane yet in its trace sessions: the first entry
    appended numbers the thread (at its first scope, as the general path does), then puts the
    trace log itself in the view's place and passes the entry on."""

    __slots__ = ("view", "log")

    def __init__(self, view, log: list):
        self.view = view
        self.log = log

    def append(self, entry: tuple) -> None:
        """Log ``entry``; an enter entry numbers the thread first."""
        if len(entry) == ENTER_LEN:
            v = self.view
            ctx = v.ctx
            for s in v.sessions:
                if s.data == "trace":
                    s.trace_thread(ctx.ident, ctx.tid)
            v.tlog = self.log
        self.log.append(entry)


def add_metrics(tr: ThreadTrace, sid: int, items) -> None:
    """Add normalised metrics ``items`` (``[(key, (stored, pty, value type, value)), ...]``, keys
    sorted) to the trace event of scope ``sid``.  The event checks types within itself only (the
    metrics given at entry and at exit), as in Proton; a mismatch raises at the first failing
    key, the keys before it staying applied."""
    raw = tr.metrics.get(sid)
    if raw is None:
        raw = tr.metrics[sid] = {}
    for k, (stored, pty, vt, val) in items:
        cur = raw.get(k)
        if cur is not None and cur[0] != vt:
            raise tmetrics.type_mismatch(stored, cur[0], vt)
        if cur is None or pty == tmetrics.PTY:
            raw[k] = (vt, val)
        elif vt >= tmetrics.VINT:
            if len(cur[1]) != len(val):
                raise tmetrics.size_mismatch(stored, len(cur[1]), len(val))
            raw[k] = (vt, [a + b for a, b in zip(cur[1], val)])
        else:
            raw[k] = (vt, cur[1] + val)


def add_plain(tr: ThreadTrace, sid: int, metrics) -> bool:
    """The trace event of scope ``sid``, just entered, takes ``metrics`` if it is a dict of plain
    values (``int`` within int64, ``float``) under ``str`` keys: what :func:`add_metrics` would
    store (a ``flops*`` int as a float, as :func:`~proton_ctypes.tree.metrics.normalize` converts
    it), with no check to make.  False, having stored nothing, for any other dict (and for a float
    under ``bytes``, which the general path converts)."""
    if type(metrics) is not dict:
        return False
    raw = {}
    for k, val in metrics.items():
        if type(k) is not str:
            return False
        t = type(val)
        if t is float:
            if k == ROOFLINE_INT:
                return False
            raw[k] = (DOUBLE, val)
        elif t is int and I64_MIN <= val <= I64_MAX:
            raw[k] = (DOUBLE, float(val)) if k in ROOFLINE_FLOAT else (INT, val)
        else:
            return False
    tr.metrics[sid] = raw
    return True


def settle(tr: ThreadTrace) -> None:
    """Make the records of the scopes exited in ``tr``'s log so far (safe while its thread appends)."""
    log = tr.log
    n = len(log)
    if not n:
        return
    items = log[:n]
    del log[:n]
    pending = tr.pending
    pop = pending.pop
    entered_under = tr.entered_under
    at = tr.at
    metrics = tr.metrics
    ident = tr.ctx.ident
    for e in items:
        if type(e) is not tuple:
            # a new mark: the fast-path scopes still open were entered under the one before
            for sid, entry in pending.items():
                if type(entry[2]) is int and sid not in entered_under:
                    entered_under[sid] = at.fast
            at = e
            continue
        sid = e[0]
        if len(e) == ENTER_LEN:
            pending[sid] = e
            continue
        entry = pop(sid, None)
        if entry is None:
            continue
        raw = metrics.pop(sid, None) if metrics else None
        t0 = entry[1]
        nodes = entry[2]
        live = at.phases
        if type(nodes) is int:
            fast = entered_under.pop(sid, None) if entered_under else None
            for s_id in at.fast if fast is None else fast:
                hit = live.get(s_id)
                if hit is not None:
                    s, pd = hit
                    pd.trace.scopes.append(_record(ScopeRecord, (s.trace_threads.get(ident, 0), t0, e[1], nodes, sid,
                                                                 dict(raw) if raw else None)))
        else:
            for s_id, node in nodes.items():
                hit = live.get(s_id)
                if hit is not None:
                    s, pd = hit
                    pd.trace.scopes.append(_record(ScopeRecord, (s.trace_threads.get(ident, 0), t0, e[1], node, sid,
                                                                 dict(raw) if raw else None)))
    tr.at = at
    if pending:
        _forget_dead(tr)


def _forget_dead(tr: ThreadTrace) -> None:
    """Drop the open scopes (and their metrics) of ``tr`` no live session can take any more."""
    live = G.sessions
    for sid, entry in list(tr.pending.items()):
        nodes = entry[2]
        ids = tr.entered_under.get(sid, tr.at.fast) if type(nodes) is int else nodes
        if not any(s_id in live for s_id in ids):
            del tr.pending[sid]
            tr.entered_under.pop(sid, None)
            tr.metrics.pop(sid, None)


def settle_all() -> None:
    """Make the records of every scope exited so far, on every thread (``core.manager``'s flush).

    The garbage collector's automatic passes wait meanwhile: settling makes no cyclic garbage, and
    the records (tuple subclasses, which it never stops tracking) would make each full pass it
    starts walk all of them again."""
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        with G.lock:
            for tr in list(_traced):
                settle(tr)
                if not tr.log and not tr.pending and G.threads.get(tr.ctx.tid) is not tr.ctx:
                    _traced.discard(tr)  # its thread ended and another took its native id
    finally:
        if paused:
            gc.enable()


def forget_all() -> None:
    """Forget every trace log (a forked child starts with none)."""
    _traced.clear()
