"""Per-thread state: the calling thread's context (its views, state slot, trace log and
launch-hook state) and the regrouping of its views when the active sessions change.

:func:`thread_ctx` is the hot paths' entry point (one thread-local read); :func:`ensure`
regroups the thread's views when the registry's epoch moved (:mod:`.registry`), and
:func:`resync` does it: each thread keeps at most one *fast-path* view (``ThreadCtx.view``,
:func:`fast_view`), set only when exactly one plain view exists and profiling is on, so the
hot paths test the view alone.  Until a thread regroups, a session active again has, on that
thread, the stack it kept while it was off: :func:`bridge_frozen_stacks` makes that view at
the change itself, for the kernels the thread launches before its next event.
"""
from __future__ import annotations

import threading

from time import time_ns

from . import registry, trace_scopes
from .flags import flags as _flags
from .registry import G
from .views import View
from ..tree import callpath

tls = threading.local()


class ThreadCtx:
    """Everything the profiler keeps for one thread."""

    __slots__ = ("tid", "ident", "epoch", "view", "views", "state", "frozen", "bridges", "ended", "trace", "launch",
                 "op_id", "op_name", "entered", "__weakref__")

    def __init__(self):
        self.tid = threading.get_native_id()
        #: ``threading.get_ident()``: trace sessions number their lanes by it
        self.ident = threading.get_ident()
        self.epoch = -1
        #: the single live view when exactly one exists and no slow feature is on, else None
        self.view = None
        self.views = []
        self.state = None
        #: session id -> (ids, top) of a deactivated session on this thread
        self.frozen = {}
        #: views made for this thread by another one (:func:`bridge_frozen_stacks`), until it regroups
        self.bridges = []
        #: the thread has ended (its native id may be given to another thread)
        self.ended = False
        #: the thread's trace log (:class:`.trace_scopes.ThreadTrace`), from the first regrouping
        #: that saw a ``data="trace"`` session
        self.trace = None
        #: the launch hook's place in a Triton launch on this thread: None outside one, else
        #: a marker of :mod:`proton_ctypes.hooks.launch` or the view of an open fast op
        self.launch = None
        #: scope id and name of the launch hook's latest op on this thread
        self.op_id = None
        self.op_name = None
        #: the scopes ``enter_scope`` opened and ``exit_scope`` has not closed yet, innermost last:
        #: ``(scope id, name, view or None, metric targets)`` (kept here, not in a thread-local of
        #: its own: one thread-local read per call instead of two)
        self.entered = []


class _ThreadEnd:
    """Held only by a thread's thread-local storage: dropped when the thread ends, it closes
    the thread's live views then.  The OS reuses native ids, and a view left open would take
    the kernels of the next thread given the same id."""

    __slots__ = ("ctx",)

    def __init__(self, ctx: "ThreadCtx"):
        self.ctx = ctx

    def __del__(self):
        try:
            self.ctx.ended = True
            now = time_ns()
            for v in list(G.views_by_tid.get(self.ctx.tid, ())):
                if v.t1 is None:
                    v.t1 = now
        except Exception:  # interpreter teardown
            pass


def thread_ctx() -> ThreadCtx:
    """The calling thread's context, created (and registered) on first use."""
    try:
        return tls.ctx
    except AttributeError:
        ctx = ThreadCtx()
        with G.lock:
            # views still open under this native id belong to an ended thread (ids are reused)
            now = time_ns()
            for v in G.views_by_tid.get(ctx.tid, ()):
                if v.t1 is None:
                    v.t1 = now
            old = G.threads.get(ctx.tid)
            if old is not None:
                old.ended = True
            G.threads[ctx.tid] = ctx
            G.views_by_tid.setdefault(ctx.tid, [])
        tls.ctx = ctx
        tls.end = _ThreadEnd(ctx)
        return ctx


def forget_ended() -> None:
    """Forget the threads that ended and that nothing still to come can name (under ``G.lock``):
    no view of theirs is left (a kernel of theirs still to come, or a capture point, keeps its
    view, :mod:`.retention`) and no live session was started by them (other threads copy a
    starter's stack).  A program that makes threads all day keeps only those that live, and
    what loops over every thread (each change of the active sessions, each log trim) stays as
    short.  A trace log of a forgotten thread goes once it is written out (:mod:`.trace_scopes`)."""
    starters = {s.starter_tid for s in G.sessions.values()}
    for tid, ctx in list(G.threads.items()):
        if ctx.ended and tid not in starters and not G.views_by_tid.get(tid):
            del G.threads[tid]
    for tid in [t for t, views in G.views_by_tid.items() if not views and t not in G.threads]:
        del G.views_by_tid[tid]


def stack_of(ctx, session):
    """The (ids, top) that ``session`` currently has on thread ``ctx`` or None."""
    for v in ctx.views:
        if session in v.sessions:
            return v.ids, v.top
    return ctx.frozen.get(session.id)


def resync(ctx: ThreadCtx) -> None:
    """Retire the thread's views and regroup the active shadow sessions into new ones."""
    with G.lock:
        now = time_ns()
        for backend in {s.backend for s in G.active}:   # views log from now on: launches need times
            backend.context_in_use(now)
        epoch = G.epoch
        active = [s for s in G.active if s.context != "python"]
        stacks = {}
        for v in ctx.bridges:
            v.t1 = now
        ctx.bridges = []
        for v in ctx.views:
            v.t1 = now
            v.merge_created()
            if v.ext is not None and v.ext_pushed:
                try:
                    v.ext.pop_external()
                except Exception:
                    pass
                v.ext_pushed = False
            for s in v.sessions:
                stacks[s] = (v.ids, v.top)
        for s, st in stacks.items():
            if not s.active and not s.finalized:
                ctx.frozen[s.id] = (list(st[0]), st[1])
        for sid in [k for k in ctx.frozen if k not in G.sessions]:
            del ctx.frozen[sid]
        groups = {}
        for s in active:
            st = stacks.get(s)
            if st is None:
                st = ctx.frozen.pop(s.id, None)
            if st is None:
                starter = G.threads.get(s.starter_tid)
                if starter is not None and starter is not ctx:
                    st = stack_of(starter, s)
            if st is None:
                st = ([], callpath.ROOT)
            key = tuple(st[0])
            g = groups.get(key)
            if g is None:
                groups[key] = ([s], st)
            else:
                g[0].append(s)
        views = []
        for members, (ids, top) in groups.values():
            v = View(ctx, tuple(members), list(ids), top, now)
            v.note(_code(v, ctx.state))
            views.append(v)
            G.views_by_tid.setdefault(ctx.tid, []).append(v)
        ctx.views = views
        ctx.epoch = epoch
        trace_scopes.mark(ctx, views)
        ctx.view = fast_view(ctx, views) if epoch == G.epoch else None


def bridge_frozen_stacks() -> None:
    """After the active sessions changed (:func:`.registry.bump_epoch`, under ``G.lock``): a
    session active again on a thread that kept its stack while it was off (``ThreadCtx.frozen``)
    gets, on that thread, a view of that stack from now on, made here.

    A thread regroups its own views only at its next event, and kernels it launches before
    that need the session's context: it is the frozen stack (no event of the thread could
    change it meanwhile), with the thread's state.  The bridge views of the previous change
    end now; the thread's own regrouping ends the others.
    """
    now = time_ns()
    shadow = [s for s in G.active if s.context != "python"]
    made = False
    for ctx in list(G.threads.values()):
        for v in ctx.bridges:
            v.t1 = now
        ctx.bridges = []
        if not ctx.frozen or ctx.ended:
            continue
        live = {s for v in ctx.views if v.t1 is None for s in v.sessions}
        for s in shadow:
            st = ctx.frozen.get(s.id)
            if st is None or s in live:
                continue
            v = View(ctx, (s,), list(st[0]), st[1], now)
            if v.ext is not None:
                continue      # external correlation ids are pushed by the launching thread itself
            v.note(_code(v, ctx.state))
            ctx.bridges.append(v)
            G.views_by_tid.setdefault(ctx.tid, []).append(v)
            made = True
    if made:
        for backend in {s.backend for s in shadow}:   # kernels launched from now on need their times
            backend.context_in_use(now)


def fast_view(ctx: ThreadCtx, views):
    """The thread's fast-path view among its ``views``: the only one, while profiling is on, no
    python-context session is active, no CUDA graph is being captured and the view's backend
    attributes kernels through the log (not by external ids); else None (the hot paths test the
    view alone)."""
    if len(views) != 1 or G.py_active or G.capturing or not _flags.profiling_on:
        return None
    v = views[0]
    return None if v.ext is not None else v


def _code(v, state):
    return v.context_node(state)


def ensure(ctx: ThreadCtx) -> None:
    """Resync the thread if the epoch moved since its last event."""
    if ctx.epoch != G.epoch:
        resync(ctx)


registry.after_epoch(bridge_frozen_stacks)
