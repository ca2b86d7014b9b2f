"""PC-sampling results into the call-path tree (the API side of ``mode="pcsampling"``).

The CUPTI backend's PC sampler hands each launch's samples, grouped by (function, source
line frame), to :func:`attribute_samples`; the manager gives the backend these functions
when it starts it, so the backend never reaches into sessions or thread state itself.
"""
from __future__ import annotations

from . import general_path, threads
from .registry import G
from ..backends.nvidia.pcsampling import METRIC_NAMES
from ..tree import callpath
from ..tree.codes import node_of
from ..tree import metrics as tmetrics


def _view_code(view, state) -> int:
    """The context code now in force in ``view``: its last logged code (``-(op+1)`` while a
    ``hook="triton"`` launch op is open), else its context node."""
    log = view.log
    if len(log) >= 2:
        return int(log[-1])
    if view.chunks and len(view.chunks[-1]):
        return int(view.chunks[-1][-1, 1])
    return view.context_node(state)


def sessions_active(backend) -> bool:
    """Whether any active tree session records ``backend`` (sampling is skipped otherwise)."""
    return any(s.backend is backend and s.data == "tree" for s in G.active)


def attribute_samples(backend, groups: dict) -> None:
    """File ``{(function, frame): int64[20]}`` of one launch under its kernel node in every active
    tree session of ``backend``, as seen from the launching (calling) thread.

    The kernel node is what the kernel's activity record is joined to: the open launch op
    (``hook="triton"``) itself, else ``<context>/<function>``; ``context="python"``
    sessions use the launching Python stack.
    """
    ctx = threads.thread_ctx()
    threads.ensure(ctx)
    targets = []
    for v in ctx.views:
        sessions = [s for s in v.sessions if s.backend is backend and s.active and s.data == "tree"]
        if sessions:
            targets.append((sessions, _view_code(v, ctx.state)))
    py = [s for s in G.py_active if s.backend is backend and s.active and s.data == "tree"]
    if py:
        targets.append((py, None))
    if not targets:
        return
    py_node = None
    for sessions, code in targets:
        for (function, frame), values in groups.items():
            if code is None:
                if py_node is None:
                    py_node = general_path.python_node(1)
                knode = callpath.child(py_node, function)
            else:
                knode = node_of(code) if code < 0 else callpath.child(code, function)
            node = callpath.child(knode, frame) if frame else knode
            vals = [int(x) for x in values]
            for s in sessions:
                with s.lock:
                    tmetrics.add((s.current.flex,), node, dict(zip(METRIC_NAMES, vals)))
