"""Turn one phase of one session into Proton's nested tree (the hatchet layout).

The nodes of a phase are the nodes it entered, the nodes holding user metrics and the
kernel nodes, plus all their ancestors.  Children are listed in the order the phase first
saw them (3.9's per-session, per-phase insertion order), see :func:`node_set`.
"""
from __future__ import annotations

from . import callpath
from . import metrics as tmetrics


def node_set(pd) -> dict:
    """Every node of the phase, ancestors included, in the order the phase first saw them
    (a dict used as an ordered set; an ancestor comes right before its first descendant).

    Proton lists children in the order they were inserted into *that* session's tree of
    that phase (the trie's node ids are process-wide): entered nodes at their first entry,
    kernel nodes at their first launch (``pd.created``, ``pd.kernel_nodes``: node -> time),
    then nodes holding only metrics (instrumentation scopes, PC samples) in the order the
    metrics were added.
    """
    seen = dict(pd.created)
    for n, t in pd.kernel_nodes.items():
        old = seen.get(n)
        if old is None or t < old:
            seen[n] = t
    nodes = {callpath.ROOT: None}
    parent = callpath.parent
    chain = []
    for src in (sorted(seen, key=seen.__getitem__), pd.flex):
        for n in src:
            while n >= 0 and n not in nodes:
                chain.append(n)
                n = parent[n]
            while chain:
                nodes[chain.pop()] = None
    return nodes


def node_metrics(pd, node, device_type: str, finite_only: bool = True) -> dict:
    """The ``metrics`` object of one node: user metrics, then kernel metrics.

    ``finite_only``: NaN and infinities as None (JSON's ``null``, as Proton's hatchet file has
    them); else as stored (MessagePack keeps them as doubles).
    """
    out = {}
    fm = pd.flex.get(node)
    if fm:
        for name, (_kind, vt, val) in fm.items():
            out[name] = tmetrics.json_value(vt, val) if finite_only else val
    if node in pd.kernel_nodes:
        out["count"] = pd.kcount.get(node, 0)
        out["time (ns)"] = pd.ktime.get(node, 0)
        out["device_id"] = str(pd.kdevice.get(node, 0))
        out["device_type"] = device_type
    return out


#: the fields of an instrumentation cycle metric (libproton's ``CycleMetric``) at a node
_CYCLE_FIELDS = ("cycles", "normalized_cycles", "device_id", "device_type")


def _is_cycle_metric(fm: dict) -> bool:
    """Whether a node's metrics hold an instrumentation cycle metric.

    :func:`proton_ctypes.core.instrumentation.add_cycles` stores ``cycles`` (int),
    ``normalized_cycles`` (double) and the ``device_id``/``device_type`` properties as
    *strings*; user metrics are always numeric, so a string ``device_type`` next to the
    two cycle values marks the node as holding libproton's fixed-schema CycleMetric.
    """
    nc = fm.get("normalized_cycles")
    dt = fm.get("device_type")
    return (nc is not None and dt is not None and "cycles" in fm
            and nc[1] == tmetrics.DOUBLE and isinstance(dt[2], str))


#: ROOT's metric counting the records the backend lost while the session ran (only when some were)
LOST_METRIC = "lost_records"


def root_metrics(pd) -> dict:
    """ROOT's metrics, the same for ``hatchet`` and ``hatchet_msgpack`` (3.9 ``TreeData``).

    * kernels anywhere: ``count``/``time (ns)`` zeros, plus a zero for every summed scalar
      user metric (not ``(exc)`` ones, not vectors);
    * instrumentation cycle metrics anywhere: ``cycles: 0`` and ``normalized_cycles: 0``
      (both integers, also in MessagePack), independent of kernels; the cycle metric's
      ``device_id``/``device_type`` are never listed at ROOT;
    * records lost while the session ran (not in Proton's files, which never say so):
      ``lost_records``, the count (only when some were lost).
    """
    cycles = False
    scalars = []
    for fm in pd.flex.values():
        is_cycle = _is_cycle_metric(fm)
        cycles = cycles or is_cycle
        if not pd.kernel_nodes:
            if cycles:
                break  # nothing else can reach ROOT
            continue
        for name, (kind, vt, _val) in fm.items():
            if is_cycle and name in _CYCLE_FIELDS:
                continue
            if vt <= tmetrics.DOUBLE and kind != tmetrics.EXC:
                scalars.append(name)
    out = {}
    if pd.kernel_nodes:
        out["count"] = 0
        out["time (ns)"] = 0
    if cycles:
        out["cycles"] = 0
        out["normalized_cycles"] = 0
    for name in scalars:
        out.setdefault(name, 0)
    lost = sum(pd.lost.values())
    if lost:
        out[LOST_METRIC] = lost
    return out


def build_tree(pd, device_type: str, finite_only: bool = True) -> dict:
    """The nested ``{"children", "frame", "metrics"}`` dict of the phase, rooted at ROOT
    (``finite_only``: see :func:`node_metrics`).  Built without recursion: a call path may be
    thousands of frames deep (``context="python"``, deeply nested scopes)."""
    name = callpath.name
    parent = callpath.parent
    made = {}
    for n in node_set(pd):  # an ancestor before its descendants; siblings in first-seen order, as in Proton
        d = made[n] = {"children": [], "frame": {"name": name[n], "type": "function"},
                       "metrics": root_metrics(pd) if n == callpath.ROOT else node_metrics(pd, n, device_type,
                                                                                           finite_only)}
        if n != callpath.ROOT:
            made[parent[n]]["children"].append(d)
    return made[callpath.ROOT]
