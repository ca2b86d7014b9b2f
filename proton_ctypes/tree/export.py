"""Turn one phase of one session into Proton's nested tree (the hatchet layout).

The nodes of a phase are the nodes it entered, the nodes holding user metrics and the
kernel nodes, plus all their ancestors.  Children keep first-creation order (3.9).
"""
from __future__ import annotations

from . import callpath
from . import metrics as tmetrics


def node_set(pd) -> set:
    """Every node of the phase, ancestors included."""
    nodes = set()
    parent = callpath.parent
    for src in (pd.created, pd.flex.keys(), pd.kernel_nodes):
        for n in src:
            while n >= 0 and n not in nodes:
                nodes.add(n)
                n = parent[n]
    nodes.add(callpath.ROOT)
    return nodes


def node_metrics(pd, node, device_type: str) -> dict:
    """The ``metrics`` object of one node: user metrics, then kernel metrics."""
    out = {}
    fm = pd.flex.get(node)
    if fm:
        for name, (_kind, vt, val) in fm.items():
            out[name] = tmetrics.json_value(vt, val)
    if node in pd.kernel_nodes:
        out["count"] = pd.kcount.get(node, 0)
        out["time (ns)"] = pd.ktime.get(node, 0)
        out["device_id"] = str(pd.kdevice.get(node, 0))
        out["device_type"] = device_type
    return out


def root_metrics(pd) -> dict:
    """ROOT's metrics: zeros for every kernel and summed scalar metric when kernels exist."""
    if not pd.kernel_nodes:
        return {}
    out = {"count": 0, "time (ns)": 0}
    for fm in pd.flex.values():
        for name, (kind, vt, _val) in fm.items():
            if vt <= tmetrics.DOUBLE and kind != tmetrics.EXC:
                out.setdefault(name, 0)
    return out


def build_tree(pd, device_type: str) -> dict:
    """The nested ``{"children", "frame", "metrics"}`` dict of the phase, rooted at ROOT."""
    nodes = node_set(pd)
    children = {}
    for n in sorted(nodes):
        if n != callpath.ROOT:
            children.setdefault(callpath.parent[n], []).append(n)
    name = callpath.name

    def make(n):
        return {"children": [make(c) for c in children.get(n, ())],
                "frame": {"name": name[n], "type": "function"},
                "metrics": root_metrics(pd) if n == callpath.ROOT else node_metrics(pd, n, device_type)}

    import sys
    limit = sys.getrecursionlimit()
    depth = max((callpath.depth[n] for n in nodes), default=0)
    if depth + 100 > limit:
        sys.setrecursionlimit(depth + 200)
    return make(callpath.ROOT)
