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
    """Whether a launch is sampled now: some active tree session records ``backend``, and no
    stream capture is in progress (a range synchronises the device, which a capture forbids;
    Proton samples no captured launch either)."""
    return not G.capturing and any(s.backend is backend and s.data == "tree" for s in G.active)


#: frames above the launching program's in :func:`attribute_samples`'s ``here``: itself, the
#: function and the backend's lambda calling it (the backend's own frames above are skipped anyway)
PY_FRAMES_OF_OURS = 3
#: (backend id, function name) -> ``[(session ids, kernel node)]`` of that function's latest sampled
#: launch: where samples of it that arrive with a later launch's range are filed
_latest: dict = {}


def attribute_samples(backend, groups: dict, symbol=None) -> None:
    """File ``{(function, frame): int64[20]}`` of one launch's sampling range under kernel nodes
    in every active tree session of ``backend``, as seen from the launching (calling) thread.

    The kernel node is what the kernel's activity record is joined to: the open launch op
    (``hook="triton"``) itself, else ``<context>/<function>``; ``context="python"``
    sessions use the launching Python stack.  ``symbol`` names the kernel just launched: its
    node is remembered, and samples of another function (a kernel still running when its own
    range stopped) go to where that function was last launched, when it was.
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
    py_node = []

    def here(function):
        """``[(sessions, kernel node)]`` of ``function`` launched now."""
        out = []
        for sessions, code in targets:
            if code is None:
                if not py_node:      # from the launch's own frame: skip here, this function and its caller
                    py_node.append(general_path.python_node(PY_FRAMES_OF_OURS))
                out.append((sessions, callpath.child(py_node[0], function)))
            else:
                out.append((sessions, node_of(code) if code < 0 else callpath.child(code, function)))
        return out

    if symbol is not None:
        _latest[id(backend), symbol] = [(tuple(s.id for s in sessions), knode) for sessions, knode in here(symbol)]
    for (function, frame), values in groups.items():
        where = None
        if function != symbol and (id(backend), function) in _latest:
            where = [([G.sessions[i] for i in ids if i in G.sessions], knode)
                     for ids, knode in _latest[id(backend), function]]
            if not any(sessions for sessions, _ in where):   # launched in sessions gone since
                where = None
        if where is None:
            where = here(function)
        vals = dict(zip(METRIC_NAMES, (int(x) for x in values)))
        for sessions, knode in where:
            node = callpath.child(knode, frame) if frame else knode
            for s in sessions:
                if s.backend is backend and s.active and s.data == "tree":
                    with s.lock:
                        tmetrics.add((s.current.flex,), node, vals)
