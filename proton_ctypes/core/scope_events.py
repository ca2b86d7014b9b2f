"""What entering and exiting a scope does on the calling thread: the fast path on the thread's
fast-path view (:func:`push`, :func:`pop`), the hand-off to :mod:`.general_path` in every other
case, and the scope's metrics.

``scope.__enter__``/``__exit__`` (:mod:`.scopes`) inline :func:`push` and :func:`pop`;
``cpu_timed_scope``, ``enter_scope`` and ``exit_scope`` call :func:`enter` and :func:`exit`.

On the fast path a scope costs one dict lookup in the call-path trie, two list operations on
the view's stack and, when the view needs them, the log entry ``(time_ns, node)`` for the
kernel join (``View.log``: the contract is in :mod:`.views`) and the scope's entry and exit in
the thread's trace log for ``data="trace"`` sessions (``View.tlog``: the contract is in
:mod:`.trace_scopes`); both share one ``time_ns()``.
"""
from __future__ import annotations

from time import time_ns

from . import general_path, trace_scopes
from .threads import tls, thread_ctx
from .metric_values import transform_tensor_metrics
from .tensor_metrics import add_tensor_metrics
from ..tree import callpath, messages
from ..tree.metric_plans import add_planned

_kids = callpath.kids
_parent = callpath.parent
_child = callpath.child
#: the counter behind ``general_path.next_id`` (``next(ids)`` is the cheaper call)
ids = general_path.next_id.__self__


def add_scope_metrics(ctx, sid, targets, metrics) -> None:
    """Add ``metrics`` (host values and tensors) to scope ``sid`` entered with ``targets``."""
    scalar, tensor = transform_tensor_metrics(metrics)
    try:
        if scalar:
            general_path.add_metrics(ctx, sid, targets, scalar)
        if tensor:
            # as in Proton, the metric kernels run inside metadata_state(): their kernel
            # records land under __proton_launch_metadata, which the viewer hides
            general_path.set_state(ctx, callpath.METADATA_FRAME)
            add_tensor_metrics(ctx, sid, targets, tensor)
    finally:
        general_path.clear_state_after_metrics(ctx)


def push(ctx, v, sid: int, name: str) -> int:
    """Open scope ``sid`` named ``name`` in the thread's fast-path view ``v``; return the node
    kernels now attach to (the scope's, or its state child).  ``scope.__enter__`` inlines this."""
    try:  # a subscript, not dict.get (~5 ns less); a miss (first use, a name not a str) is rare
        node = v.kids[name]
    except (KeyError, TypeError):  # TypeError: an unhashable name, refused by scope_child
        node = general_path.scope_child(v.top, name, sid)
    v.ids.append(sid)
    v.top = node
    v.kids = _kids[node]
    st = ctx.state
    if st is not None:
        node = _child(node, st)
    if node not in v.created:
        # first seen: time_ns, not the edge clock (whose read would end a rewritable entry)
        v.created[node] = time_ns()
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
        t = v.now()
        # the trace log's enter entry: the contract is in core/trace_scopes.py
        tl.append((sid, t, node))
        if v.logging:
            log = v.log
            log.append(t)
            log.append(node)
    return node


def abandon(ctx, sid, metrics) -> None:
    """Close scope ``sid`` whose ``metrics`` were refused (a type error, a type mismatch):
    the caller raises and no ``__exit__`` follows, so nothing may stay open (Proton leaves it
    open).  The state goes first, as Proton's ``metadata_state`` exit clears it.  Metrics
    that are not a dict at all get the one error that says so, whatever broke first."""
    general_path.clear_state_after_metrics(ctx)
    exit(sid)
    if not hasattr(metrics, "items"):
        raise messages.metrics_not_a_dict(metrics) from None


def enter(obj, metrics) -> int:
    """Enter a scope for ``obj`` (anything with ``name``); store targets on it; return the id.

    If the metrics are refused, the scope is closed again before the error propagates.
    """
    sid = next(ids)
    name = obj.name
    try:
        ctx = tls.ctx
    except AttributeError:
        ctx = thread_ctx()
    v = ctx.view
    if v is not None:
        node = push(ctx, v, sid, name)
        obj._targets = ((v, node),)
        if metrics:
            try:
                if v.tlog is not None:  # the trace event takes them (tree sessions too: the general path)
                    done = not v.flexes and trace_scopes.add_plain(ctx.trace, sid, metrics)
                else:
                    done = add_planned(v.flexes, node, metrics, v.scope_plans)
                if not done:
                    add_scope_metrics(ctx, sid, obj._targets, metrics)
                elif ctx.state is not None:
                    general_path.clear_state_after_metrics(ctx)
            except BaseException:
                abandon(ctx, sid, metrics)
                raise
        return sid
    obj._targets = general_path.enter(ctx, name, sid)
    if metrics:
        try:
            add_scope_metrics(ctx, sid, obj._targets, metrics)
        except BaseException:
            abandon(ctx, sid, metrics)
            raise
    return sid


def pop(ctx, v, sid: int) -> bool:
    """Close scope ``sid`` if it is the innermost one of the fast-path view ``v``; False (nothing
    done) otherwise.  ``scope.__exit__`` inlines this."""
    ids_ = v.ids
    if not ids_ or ids_[-1] != sid:
        return False
    ids_.pop()
    top = _parent[v.top] if ids_ else 0
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
        t = v.now()
        # the trace log's exit entry: the contract is in core/trace_scopes.py
        tl.append((sid, t))
        if v.logging:
            st = ctx.state
            log = v.log
            log.append(t)
            log.append(top if st is None else _child(top, st))
    return True


def exit(sid) -> None:  # noqa: A001 -- the scope's exit
    """Exit scope ``sid`` on the calling thread (the fast path, else the general path)."""
    try:
        ctx = tls.ctx
    except AttributeError:
        ctx = thread_ctx()
    close(ctx, sid)


def close(ctx, sid) -> None:
    """Exit scope ``sid`` on the thread of ``ctx``, the calling thread's context (for a caller
    that holds it already: a thread-local read costs about as much as :func:`pop`)."""
    v = ctx.view
    if v is not None and pop(ctx, v, sid):
        return
    general_path.exit(ctx, sid)
