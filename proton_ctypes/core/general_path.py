"""The general (slow) path of scope and state events, shared by every API entry point.

:mod:`.scopes` and :mod:`.states` inline a fast path for the common case (one view, no
trace or python-context session, no metrics); everything else lands here.
"""
from __future__ import annotations

import inspect
import itertools
import os
import sys
import threading
from time import time_ns

from . import graph_metric_kernel, signatures, threads, trace_scopes
from .registry import G
from .views import View, first_seen
from ..tree import callpath
from ..tree.codes import op_code
from ..tree import metrics as tmetrics

#: process-wide scope/op id counter, starting at 1 (as Proton's)
next_id = itertools.count(1).__next__

#: frames of files under this folder (a backend's launch callback) are not part of a
#: python-context path
_BACKENDS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "backends", "")


#: code flags of generators and coroutines (inspect.CO_*): their frame changes parent each time
#: it is resumed, so a walk never stops at one; an ordinary frame's parent is fixed for its life
_RESUMABLE = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ITERABLE_COROUTINE | inspect.CO_ASYNC_GENERATOR

_py = threading.local()
#: (parent node, code object, instruction offset) -> child node, so a known frame costs one lookup
_frame_steps: dict = {}


def scope_child(top: int, name, sid: int) -> int:
    """The node of scope ``name`` entered under ``top`` (on a miss of the kids cache: the
    hot paths look there first); Proton's ``TypeError`` for a name that is not a ``str``."""
    if type(name) is not str:
        raise signatures.scope_name(name)
    return callpath.child(top, name)


def state_child(top: int, name) -> int:
    """The node of state ``name`` under ``top`` (on a miss of the kids cache); Proton's
    ``TypeError`` for a name that is not a ``str``."""
    if type(name) is not str:
        raise signatures.state_name(name)
    return callpath.child(top, name)


def python_node(skip: int = 1) -> int:
    """Trie node of the calling thread's Python stack (outermost frame first).

    Frames are named ``<file>:<line>@<function>``.  Innermost frames of our backends (a
    launch callback) are left out.  The thread's state, if any, is the last frame (as in
    Proton's python context).  Each thread remembers the frames of its last walk, outermost
    first, with their nodes: the next walk stops at the first of them still on the stack at
    the same instruction (never at a generator's or coroutine's frame, whose caller changes),
    so a launch in a loop costs a few frames, not the whole stack; the frames below it are
    forgotten then, so only frames still on the stack are held.
    """
    f = sys._getframe(skip)
    while f is not None and f.f_code.co_filename.startswith(_BACKENDS_DIR):
        f = f.f_back
    # a thread with no Python frame (autograd's, CUPTI's) walks nothing: the root (the walk
    # still runs when the thread walked frames before, to forget them)
    node = _frames_node(f) if f is not None or _py.__dict__.get("walk") else callpath.ROOT
    ctx = threads.tls.__dict__.get("ctx")   # no AttributeError raised (and caught) on a thread without one
    st = None if ctx is None else ctx.state
    return node if st is None else callpath.child(node, st)


def _frames_node(f) -> int:
    """The trie node of frame ``f`` and its callers (None: the root), the walk of
    :func:`python_node`; the frames of the thread's last walk no longer on the stack are forgotten."""
    walk = _py.__dict__.get("walk")
    if walk is None:
        walk = _py.walk = ([], {})
    # walked: the frames of the last walk, outermost first; at: frame -> (its index there,
    # its instruction offset then, its node).  Frames hash by identity, and walked keeps each
    # alive while it is a key, so a frame seen here is the very frame walked before.
    walked, at = walk
    seen = at.get
    chain = []
    node = callpath.ROOT
    keep = 0
    while f is not None:
        e = seen(f)
        if e is not None and e[1] == f.f_lasti and not f.f_code.co_flags & _RESUMABLE:
            keep, node = e[0] + 1, e[2]
            break
        chain.append(f)
        f = f.f_back
    # frames walked last time below the one still in place have returned (or moved on):
    # forget them, so that no returned frame (and its locals) is kept alive
    if keep < len(walked):
        forget = at.pop
        for fr in walked[keep:]:
            forget(fr, None)   # None: a generator frame resumed elsewhere may stand twice
        del walked[keep:]
    steps = _frame_steps
    n = keep
    for fr in reversed(chain):
        # keyed by the instruction offset, which costs nothing to read; the line number (a
        # walk of the code's line table) is computed only the first time an offset is seen
        code, i = fr.f_code, fr.f_lasti
        key = (node, code, i)
        nxt = steps.get(key)
        if nxt is None:
            nxt = steps[key] = callpath.child(node, f"{code.co_filename}:{fr.f_lineno}@{code.co_name}")
        node = nxt
        at[fr] = (n, i, node)
        n += 1
        walked.append(fr)
    return node


def enter(ctx, name: str, sid: int):
    """Enter scope ``sid`` named ``name`` in every view and python session of the thread.

    Returns the targets ``[(view_or_session, node), ...]`` the scope's metrics go to.
    A name that is not a ``str`` is refused even with no session to record it, as in Proton.
    In trace sessions the scope's entry goes to the thread's trace log (:mod:`.trace_scopes`).
    """
    if type(name) is not str:
        raise signatures.scope_name(name)
    threads.ensure(ctx)
    st = ctx.state
    targets = []
    traced = None
    for v in ctx.views:
        node = v.kids.get(name)
        if node is None:
            node = scope_child(v.top, name, sid)
        v.ids.append(sid)
        v.top = node
        v.kids = callpath.kids[node]
        eff = node if st is None else callpath.child(node, st)
        if eff not in v.created:
            v.created[eff] = time_ns()
        v.note(eff)
        targets.append((v, eff))
        if v.trace:
            if traced is None:
                traced = {}
            for s in v.sessions:
                if s.data == "trace":
                    traced[s.id] = eff
                    s.trace_thread(ctx.ident, ctx.tid)
    if G.py_active:
        node = python_node(3)
        for s in G.py_active:
            first_seen(s.current.created, node)
            targets.append((s, node))
            if s.data == "trace":
                if traced is None:
                    traced = {}
                traced[s.id] = node
                s.trace_thread(ctx.ident, ctx.tid)
    if traced is not None:
        ctx.trace.log.append((sid, time_ns(), traced))
    return targets


def exit(ctx, sid: int) -> None:
    """Close scope ``sid`` in every view of the thread that recorded it (scopes opened inside it
    are re-rooted: README, "Differences from Proton"); log its exit for trace sessions."""
    threads.ensure(ctx)
    st = ctx.state
    for v in ctx.views:
        ids = v.ids
        if ids and ids[-1] == sid:
            ids.pop()
            v.top = callpath.parent[v.top] if ids else callpath.ROOT
            v.kids = callpath.kids[v.top]
        elif sid in ids:
            v.remove(ids.index(sid))
        else:
            continue
        v.note(v.context_node(st))
    tr = ctx.trace
    if tr is not None and tr.active:
        tr.log.append((sid, time_ns()))


def session_targets(targets):
    """Expand ``(view|session, node)`` targets into active ``(session, node)`` pairs."""
    out = []
    for t, node in targets:
        if isinstance(t, View):
            for s in t.sessions:
                if s.active:
                    out.append((s, node))
        elif t.active:
            out.append((t, node))
    return out


def _trace_entered(targets) -> bool:
    """Whether a scope entered with ``targets`` has a trace event (a trace view or session)."""
    for t, _node in targets:
        if t.trace if isinstance(t, View) else t.data == "trace":
            return True
    return False


def add_metrics(ctx, sid, targets, scalar: dict) -> None:
    """Validate ``scalar`` metrics (all or nothing) and add them at each target node of a tree
    session, and to the trace event of scope ``sid`` (:func:`.trace_scopes.add_metrics`: an
    event checks types within itself only, as in Proton).

    While a CUDA graph is captured the metrics go to the graph instead: each replay adds them
    (:mod:`.graph_metric_kernel`)."""
    if G.capturing and graph_metric_kernel.capture_host_metrics(session_targets(targets), scalar):
        return
    for s, node in session_targets(targets):
        if s.data != "trace":
            tmetrics.add((s.current.flex,), node, scalar)
    if ctx.trace is not None and _trace_entered(targets):
        trace_scopes.add_metrics(ctx.trace, sid, [(k, tmetrics.normalize(k, scalar[k])) for k in sorted(scalar)])


def add_op_metrics(targets, scalar: dict) -> None:
    """Add a launch op's ``scalar`` metrics at each target node of a tree session (an op has no
    trace event); inside a capture, to the graph (see :func:`add_metrics`)."""
    if G.capturing and graph_metric_kernel.capture_host_metrics(session_targets(targets), scalar):
        return
    for s, node in session_targets(targets):
        if s.data != "trace":
            tmetrics.add((s.current.flex,), node, scalar)


def clear_state_after_metrics(ctx) -> None:
    """Proton adds metrics inside ``metadata_state()``, whose exit empties the state slot."""
    if ctx.state is not None:
        set_state(ctx, None)


def set_state(ctx, name) -> None:
    """Set (or clear, with None) the thread's single state slot and log the new context."""
    if name is not None and type(name) is not str:
        raise signatures.state_name(name)
    threads.ensure(ctx)
    ctx.state = name
    for v in ctx.views:
        if v.logging:
            v.note(v.context_node(name))


def op_prepare(ctx, name: str):
    """Resolve the nodes of a launch op named ``name`` (see :func:`op_open`).

    Returns the metric targets, as :func:`enter` does.
    """
    threads.ensure(ctx)
    targets = []
    for v in ctx.views:
        node = callpath.child(v.context_node(ctx.state), name)
        first_seen(v.created, node)
        targets.append((v, node))
    if G.py_active:
        node = callpath.child(python_node(2), name)
        for s in G.py_active:
            first_seen(s.current.created, node)
            targets.append((s, node))
    return targets


def op_open(ctx, targets) -> None:
    """Open the op: until :func:`op_exit`, a kernel launched on this thread *is* its node."""
    for t, node in targets:
        if isinstance(t, View):
            t.note(op_code(node))


def op_exit(ctx) -> None:
    """Leave the launch op: the context is the scope path again."""
    threads.ensure(ctx)
    for v in ctx.views:
        v.note(v.context_node(ctx.state))
