"""Per-thread scope stacks and event logs: the only structures the hot path touches.

Model (proton-spec §2.3, §10.2): every session has, per thread, its own stack of open
scopes.  Sessions whose stacks on a thread are identical share one :class:`View`, so
a scope is resolved once for all of them.  A view holds the stack (scope ids and trie
nodes), the set of nodes entered while it lived, and a time-stamped log of the context
node (``time.time_ns()``, node) used to attribute kernels to call paths after the fact.

Views are immutable in membership: whenever the set of active sessions (or a phase)
changes, the global epoch is bumped and each thread, at its next event, retires its
views and creates new ones (:func:`resync`).  Views keep ``t0``/``t1`` so the kernel
join knows which view was live when.

Log entries are ``(time_ns, context code)`` pairs; :mod:`..tree.codes` says how a
context is encoded (a plain node, or a launch op of ``hook="triton"``).
"""
from __future__ import annotations

import itertools
import threading

import numpy as np
from time import time_ns

from .flags import flags as _flags, on_profiling_change
from ..backends.base import ATTRIBUTION_EXTCORR
from ..tree import callpath
from ..tree.codes import ext_id

tls = threading.local()


class _Global:
    """Process-wide state of the event layer."""

    __slots__ = ("epoch", "active", "sessions", "threads", "views_by_tid", "lock", "py_active")

    def __init__(self):
        self.epoch = 0
        #: active sessions (tuple), shadow and python context alike
        self.active = ()
        #: live (not finalized) sessions by id
        self.sessions = {}
        #: native tid -> ThreadCtx (latest thread of that id)
        self.threads = {}
        #: native tid -> list of every view ever created on that tid (for joins)
        self.views_by_tid = {}
        self.lock = threading.RLock()
        #: active sessions using context="python"
        self.py_active = ()


G = _Global()


class View:
    """Sessions sharing one scope stack on one thread (see module doc)."""

    __slots__ = ("sessions", "phases", "flexes", "ids", "top", "kids", "log", "chunks", "t0", "t1", "created",
                 "merged", "logging", "trace", "ctx", "ext", "ext_pushed", "plans")

    def __init__(self, ctx, sessions, ids, top, t0):
        self.ctx = ctx
        self.sessions = sessions
        self.phases = tuple(s.current for s in sessions)
        #: the user-metric dicts of those phases (views hold only active sessions)
        self.flexes = tuple(p.flex for p in self.phases)
        #: scope ids of the open scopes, innermost last; their nodes are ``top`` and its
        #: ancestors (each open scope's node is the parent of the next one's)
        self.ids = ids
        self.top = top
        self.kids = callpath.kids[self.top]
        #: flat list t0, code0, t1, code1, ... (a list: appends are cheapest); compacted
        #: into ``chunks`` (int64 arrays of shape (n, 2)) by :meth:`compact`
        self.log = []
        self.chunks = []
        self.t0 = t0
        self.t1 = None
        #: node -> time_ns it was first entered in this view (scopes, state children, ops)
        self.created = {}
        #: how many entries of ``created`` the phases already have (see merge_created)
        self.merged = 0
        self.logging = any(s.uses_device for s in sessions)
        self.trace = any(s.data == "trace" for s in sessions)
        #: a backend attributing by external correlation ids (clock fallback), else None
        self.ext = next((s.backend for s in sessions if s.backend.attribution == ATTRIBUTION_EXTCORR), None)
        self.ext_pushed = False
        #: metric plans of this view: the launch hook's by op node (tree.metrics.plan), the
        #: scopes' by (node, key order) (tree.metrics.add_planned)
        self.plans = {}

    def nodes(self):
        """Trie nodes of the open scopes, outermost first."""
        out = []
        n = self.top
        parent = callpath.parent
        for _ in self.ids:
            out.append(n)
            n = parent[n]
        out.reverse()
        return out

    def remove(self, i):
        """Close the open scope at stack index ``i``; re-root the scopes opened above it."""
        nodes = self.nodes()
        names = [callpath.name[n] for n in nodes]
        del self.ids[i]
        del names[i]
        node = callpath.parent[nodes[i]]
        for nm in names[i:]:
            node = callpath.child(node, nm)
        self.top = node if self.ids else callpath.ROOT
        self.kids = callpath.kids[self.top]

    def context_node(self, state):
        """The node kernels launched now attach under (the top, or its state child)."""
        return self.top if state is None else callpath.child(self.top, state)

    def note(self, code):
        """Append ``(now, code)`` to the log if kernels can be attributed through it.

        In external-correlation mode the backend's per-thread stack also holds the code
        (encoded by :func:`ext_id`) so each launch record carries it.
        """
        if self.logging:
            log = self.log
            log.append(time_ns())
            log.append(code)
        ext = self.ext
        if ext is not None:
            if self.ext_pushed:
                ext.pop_external()
            ext.push_external(ext_id(code))
            self.ext_pushed = True

    def compact(self, keep_after=None):
        """Move the logged pairs into an int64 chunk (safe while the owner thread appends).

        With ``keep_after`` (ns), entries older than it are dropped except the last one
        before it (the context then in force): kernels launched before ``keep_after``
        were all delivered already.
        """
        log = self.log
        n = len(log) & ~1
        if n:
            chunk = np.array(log[:n], dtype=np.int64).reshape(-1, 2)
            del log[:n]
            self.chunks.append(chunk)
        if len(self.chunks) > 1:
            self.chunks[:] = [np.concatenate(self.chunks)]
        if not self.chunks:
            return np.zeros((0, 2), dtype=np.int64)
        a = self.chunks[0]
        if keep_after is not None and len(a) > 1:
            i = int(np.searchsorted(a[:, 0], keep_after, side="right")) - 1
            if i > 0:
                a = self.chunks[0] = a[i:].copy()
        return a

    def merge_created(self):
        """Publish the nodes entered in this view to each member session's phase, each with
        the earliest time any view saw it (children are listed in first-seen order).

        Entries are only ever added to ``created``, so the ones merged before are skipped.
        """
        created = self.created
        done = self.merged
        if len(created) == done:
            return
        # one C-level copy: the owner thread may add entries meanwhile
        new = list(itertools.islice(created.items(), done, None)) if done else list(created.items())
        for pd in self.phases:
            into = pd.created
            if not into:
                into.update(new)
                continue
            get = into.get
            for node, t in new:
                old = get(node)
                if old is None or t < old:
                    into[node] = t
        self.merged = done + len(new)


class ThreadCtx:
    """Everything the profiler keeps for one thread."""

    __slots__ = ("tid", "epoch", "view", "views", "state", "frozen", "open_trace", "launch", "op_id", "op_name",
                 "__weakref__")

    def __init__(self):
        self.tid = threading.get_native_id()
        self.epoch = -1
        #: the single live view when exactly one exists and no slow feature is on, else None
        self.view = None
        self.views = []
        self.state = None
        #: session id -> (ids, top) of a deactivated session on this thread
        self.frozen = {}
        #: scope id -> [t_enter, {session id: node}, raw metrics dict] for trace sessions
        self.open_trace = {}
        #: the launch hook's place in a Triton launch on this thread: None outside one, else
        #: a marker of :mod:`proton_ctypes.hooks.launch` or the view of an open fast op
        self.launch = None
        #: scope id and name of the launch hook's latest op on this thread
        self.op_id = None
        self.op_name = None


def first_seen(created: dict, node: int) -> None:
    """Record ``node`` in a ``created`` dict (node -> first time_ns) unless it is there."""
    if node not in created:
        created[node] = time_ns()


def thread_ctx() -> ThreadCtx:
    """The calling thread's context, created (and registered) on first use."""
    try:
        return tls.ctx
    except AttributeError:
        ctx = ThreadCtx()
        tls.ctx = ctx
        with G.lock:
            G.threads[ctx.tid] = ctx
            G.views_by_tid.setdefault(ctx.tid, [])
        return ctx


def bump_epoch() -> None:
    """Signal every thread that the set of active sessions (or a phase) changed."""
    with G.lock:
        G.epoch += 1
        G.active = tuple(s for s in G.sessions.values() if s.active)
        G.py_active = tuple(s for s in G.active if s.context == "python")
        for ctx in G.threads.values():
            ctx.view = None


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
        epoch = G.epoch
        active = [s for s in G.active if s.context != "python"]
        stacks = {}
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
            if v.ids:
                # the open scopes exist in the new view (phase) too
                v.created[v.context_node(ctx.state)] = now
            v.note(_code(v, ctx.state))
            views.append(v)
            G.views_by_tid.setdefault(ctx.tid, []).append(v)
        ctx.views = views
        ctx.epoch = epoch
        # the fast-path view exists only while profiling is on: hot paths test the view alone
        ctx.view = views[0] if (len(views) == 1 and not views[0].trace and views[0].ext is None
                                and not G.py_active and _flags.profiling_on) else None
        if epoch != G.epoch:
            ctx.view = None


def _code(v, state):
    return v.context_node(state)


def ensure(ctx: ThreadCtx) -> None:
    """Resync the thread if the epoch moved since its last event."""
    if ctx.epoch != G.epoch:
        resync(ctx)


on_profiling_change(bump_epoch)
