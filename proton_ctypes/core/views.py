"""Views: the scope stack and the log shared by the sessions whose stacks on a thread agree.

Every session has, per thread, its own stack of open scopes (Proton's semantics: a session
started while a scope is open does not see it; a deactivated session keeps its stack).
Sessions whose stacks on a thread are identical share one :class:`View`, so a scope is
resolved once for all of them.  A view holds the stack (scope ids and trie nodes), the set of
nodes entered while it lived, and a time-stamped **log** of the context in force, used to
attribute kernels to call paths after the fact.  Views are immutable in membership: when the
set of active sessions (or a phase) changes, each thread retires its views at its next event
and makes new ones (:func:`proton_ctypes.core.threads.resync`); ``t0``/``t1`` say when a
view was live, so the kernel join knows which view to read.

The log entry
-------------

A view's ``log`` is a flat list ``[t0, code0, t1, code1, ...]``: one entry is **two
consecutive items**, appended in this order by the thread that owns the view:

1. the log clock's time at the event (``View.now``, from :mod:`.clock`: ``time.time_ns()``,
   the clock of the launch-API records the kernels are joined with, or a backend's clock that
   reads it and notes the thread's launch position too); the entries of one view are in time
   order;
2. the context code in force from that instant on (:mod:`proton_ctypes.tree.codes`): the node
   a kernel launched now attaches below -- the top scope's node, or its child named after the
   thread's state -- or, while a ``hook="triton"`` launch op is open, the op's code.

An entry is written only when the view logs (``View.logging``: a member session's backend
produces kernel rows) and at every change of that context: a scope entered or exited, a state
set or cleared, a launch op opened or closed, a view made.  The general path writes it with
:meth:`View.note`; the fast paths (:mod:`.scopes`, :mod:`.scope_events`, :mod:`.states`,
:mod:`proton_ctypes.hooks.launch`) inline the two appends, and
``tests/test_log_entry.py`` runs both paths side by side and checks they log the same codes.
The kernel join (:mod:`.attribution`) reads the log through :meth:`View.entries_since` as an
``(n, 2)`` int64 array and takes, for each launch, the code of the last entry at or before it.
How long an entry is kept (until no kernel still to come can name it) is
:mod:`proton_ctypes.core.retention`'s (:meth:`View.drop_before`).

Rewriting the last entry
------------------------

An entry that no kernel can name may take the next entry's code instead of being followed by
it: the log stays as right and one entry shorter, and the edge costs no clock read and one list
store.  A view knows that only from its **edge cursor** (``View.cursor``: the log clock's
``cursor`` attribute, which a backend placing kernels by their launch positions gives its
per-thread clocks, :mod:`proton_ctypes.backends.nvidia.positions`; else None).  The rule:

* when ``cursor.last is view.log`` (the log's last entry was claimed, and nothing that may time a
  kernel happened since: a graph callback on the thread, a buffer request or a context change on
  any thread) and ``cursor.words[cursor.i]`` is 0 (no record written since), the edge replaces
  ``log[-1]``;
* else it appends, and claims the new entry (``cursor.last = log``) only if ``cursor.last`` is
  still the cursor itself, as the clock read left it (no other thread ended the rewrites
  meanwhile; the test and the store hold the GIL together).  The clock sets ``last`` before it
  reads the time: a request that ends the rewrites while the clock runs took its own time
  earlier, so the new entry may be the one in force for that request's kernels.

:meth:`View.note` implements it; the scope and state edges (:mod:`.scopes`, :mod:`.scope_events`,
:mod:`.states`) inline it; every other writer appends and claims nothing, and a node's
first-seen time is ``time_ns()``, not a clock read.  ``tests/test_log_rewrite.py`` runs the fast
and the general path side by side and checks they leave the same log.  A view with a trace
session (``View.tlog``) never rewrites: the chrome trace links each kernel to the scope record
open at its launch *time*, which launch positions give only as exactly as every edge marks
them (its scope edges with no record written since do the clock's work inline: ``cursor.last``
set to the cursor, then ``cursor.t``, the mark's time, moved to the edge's time).  Nor do the
views of a thread with two or more logging views (each one's append ends the other's claim).
The owner thread may rewrite its last complete entry at any time, so the collector's
:meth:`View._take_log` leaves it in the list and the readers see a copy of it.
"""
from __future__ import annotations

import itertools

import numpy as np
from time import time_ns

from . import clock

from ..backends.base import ATTRIBUTION_EXTCORR
from ..tree import callpath
from ..tree.codes import ext_id

#: log chunks a view keeps before merging them (the join reads the recent ones; the retention
#: trim merges them anyway, but a backend without a delivery watermark never trims)
MAX_CHUNKS = 64


class View:
    """Sessions sharing one scope stack on one thread (see module doc)."""

    __slots__ = ("sessions", "phases", "flexes", "ids", "top", "kids", "log", "chunks", "t0", "t1", "created",
                 "merged", "logging", "trace", "tlog", "ctx", "ext", "ext_pushed", "plans", "scope_plans",
                 "scope_ones", "now", "cursor")

    def __init__(self, ctx, sessions, ids, top, t0):
        self.ctx = ctx
        self.sessions = sessions
        self.phases = tuple(s.current for s in sessions)
        #: the user-metric dicts of the phases of the tree sessions (views hold only active
        #: sessions; a trace session keeps a scope's metrics in its trace event)
        self.flexes = tuple(p.flex for s, p in zip(sessions, self.phases) if s.data != "trace")
        #: scope ids of the open scopes, innermost last; their nodes are ``top`` and its
        #: ancestors (each open scope's node is the parent of the next one's)
        self.ids = ids
        self.top = top
        self.kids = callpath.kids[self.top]
        #: the log (module docstring): flat list t0, code0, t1, code1, ... (a list: appends are
        #: cheapest); compacted into ``chunks`` (int64 arrays of shape (n, 2)) by :meth:`compact`
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
        #: with trace sessions: the owner thread's trace log (set by ``trace_scopes.mark``), where
        #: the fast paths log each scope's entry and exit; else None
        self.tlog = None
        #: a backend attributing by external correlation ids (clock fallback), else None
        self.ext = next((s.backend for s in sessions if s.backend.attribution == ATTRIBUTION_EXTCORR), None)
        self.ext_pushed = False
        #: metric plans of this view: the launch hook's by op node (tree.metric_plans.plan), and
        #: the scopes' by scope node (tree.metric_plans.add_planned)
        self.plans = {}
        self.scope_plans = {}
        #: the scopes' one-key metrics by scope node: ``(key, type, stored entries)``, kept by the
        #: fast path of ``core.scopes`` after an add of that key and type went through
        self.scope_ones = {}
        #: the log clock of the view's thread (:func:`.clock.for_thread`): every entry's time
        self.now = clock.for_thread(getattr(ctx, "tid", None))
        #: the edge cursor of the view's thread (module docstring, "Rewriting the last entry"), or
        #: None: every entry is appended
        self.cursor = getattr(self.now, "cursor", None) if self.logging else None

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
        """Write the log entry ``(now, code)`` (module docstring) if kernels can be attributed
        through the log.

        In external-correlation mode the backend's per-thread stack also holds the code
        (encoded by :func:`ext_id`) so each launch record carries it.
        """
        if self.logging:
            log = self.log
            c = self.cursor
            if c is None:
                log.append(self.now())
                log.append(code)
            elif c.last is log and not c.words[c.i]:
                log[-1] = code    # no kernel can name the last entry (module docstring)
            else:
                log.append(self.now())
                log.append(code)
                if c.last is c:  # no buffer request or context change since the clock read
                    c.last = log
        ext = self.ext
        if ext is not None:
            if self.ext_pushed:
                ext.pop_external()
            ext.push_external(ext_id(code))
            self.ext_pushed = True

    def _take_log(self) -> None:
        """Move the logged pairs into a new int64 chunk (safe while the owner thread appends);
        past :data:`MAX_CHUNKS` chunks, they are merged into one.  With an edge cursor, the
        last complete pair stays in the list (its code may still be rewritten) unless the owner
        is between the two appends of a newer one (:meth:`_live` reads it)."""
        log = self.log
        n = len(log)
        if self.cursor is not None and not n & 1:
            n -= 2
        n &= ~1
        if n > 0:
            # straight from the list (no slice copy): only its first n items are read, and the
            # owner thread only appends
            chunk = np.fromiter(log, np.int64, n).reshape(-1, 2)
            del log[:n]
            self.chunks.append(chunk)
            if len(self.chunks) > MAX_CHUNKS:
                self.chunks[:] = [np.concatenate(self.chunks)]

    def _live(self):
        """The pair :meth:`_take_log` left in the list, as a ``(1, 2)`` array (a copy: the owner
        may rewrite its code after this, which a kernel delivered by now cannot need), or None."""
        if self.cursor is None:
            return None
        pair = self.log[:2]       # one C-level copy: the oldest pair not taken, or less
        return np.array([pair], np.int64) if len(pair) == 2 else None

    def entries_since(self, t: int):
        """The logged ``(time, code)`` pairs a kernel launched at ``t`` or later needs: from the
        last chunk starting at or before ``t`` on (the entry in force at ``t`` is there), so a
        batch of recent kernels copies the recent chunks, not the whole retained log."""
        self._take_log()
        chunks = self.chunks
        live = self._live()
        k = len(chunks) - 1
        while k > 0 and (not len(chunks[k]) or chunks[k][0, 0] > t):
            k -= 1
        if k < 0:
            return np.zeros((0, 2), dtype=np.int64) if live is None else live
        if live is not None:
            return np.concatenate(chunks[k:] + [live])
        return chunks[k] if k == len(chunks) - 1 else np.concatenate(chunks[k:])

    def compact(self):
        """Move the logged pairs into one int64 array and return it, with the pair still in the
        list when there is one (safe while the owner thread appends)."""
        self._take_log()
        if len(self.chunks) > 1:
            self.chunks[:] = [np.concatenate(self.chunks)]
        live = self._live()
        out = self.chunks[0] if self.chunks else np.zeros((0, 2), dtype=np.int64)
        return out if live is None else np.concatenate([out, live])

    def drop_before(self, keep_after: int, pins=None) -> None:
        """Drop the entries older than ``keep_after`` (ns) except the last one before it (the
        context then in force): kernels launched before ``keep_after`` were all delivered
        already.  ``pins`` (sorted int64 times, the capture points of graph replays still to
        come) keep the entry in force at each of them too.  Safe while the owner thread
        appends; the chunks from the one holding ``keep_after`` on are not copied."""
        self._take_log()
        chunks = self.chunks
        k = len(chunks) - 1
        while k > 0 and (not len(chunks[k]) or chunks[k][0, 0] > keep_after):
            k -= 1
        if k < 0 or not len(chunks[k]):
            return
        c = chunks[k]
        i = max(int(np.searchsorted(c[:, 0], keep_after, side="right")) - 1, 0)
        if k == 0 and i == 0:
            return                                   # nothing older than the entry in force
        head = c[i:].copy()                          # a view would keep the whole chunk alive
        if pins is not None and len(pins) and pins[0] < head[0, 0]:
            dropped = np.concatenate(chunks[:k] + [c[:i]])
            held = np.searchsorted(dropped[:, 0], pins[pins < head[0, 0]], side="right") - 1
            # a pin before the first entry is looked up as the first entry
            held = np.unique(np.maximum(held, 0))
            head = np.concatenate((dropped[held], head))
        chunks[:k + 1] = [head]

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


def first_seen(created: dict, node: int) -> None:
    """Record ``node`` in a ``created`` dict (node -> first time_ns) unless it is there."""
    if node not in created:
        created[node] = time_ns()
