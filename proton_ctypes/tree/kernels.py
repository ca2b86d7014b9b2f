"""Kernel rows into a phase's tree or trace, in bulk (the tree half of the kernel join).

:mod:`proton_ctypes.core.attribution` finds, for every kernel row of a batch, the context code
in force on the launching thread at launch and the phase it fell into; the functions here turn
codes into kernel nodes and add the rows to :class:`~.phase.PhaseData`: :func:`group` groups
the rows by (phase, node), so Python runs once per distinct kernel node, never once per kernel.
They know nodes, codes and phases; nothing of sessions, threads or views.
"""
from __future__ import annotations

from typing import Dict

import numpy as np

from . import callpath, strings
from .codes import node_of, op_code
from .phase import KernelRecords, PhaseData


#: :func:`group` counts keys in a table (one pass, no sort) when they span at most this many
#: values per row of the batch; a wider spread is sorted (``np.unique``)
TABLE_SPAN_PER_ROW = 4


def group(keys: np.ndarray) -> tuple:
    """``(uniq, first, inverse)`` of int64 ``keys``, as ``np.unique(keys, return_index=True,
    return_inverse=True)`` gives them (sorted distinct keys, the index of each one's first row,
    each row's index into them), without sorting when the keys lie close together: a batch's
    kernels fall on a few nodes, numbered near each other, and sorting them is the larger part
    of grouping them."""
    n = len(keys)
    if n:
        lo = int(keys.min())
        span = int(keys.max()) - lo + 1
        if span <= TABLE_SPAN_PER_ROW * n:
            k = keys - lo
            first_of = np.full(span, n, dtype=np.int64)
            first_of[k[::-1]] = np.arange(n - 1, -1, -1, dtype=np.int64)   # the last write is the first row
            present = np.flatnonzero(first_of < n)
            index_of = np.empty(span, dtype=np.int64)
            index_of[present] = np.arange(len(present), dtype=np.int64)
            return present + lo, first_of[present], index_of[k]
    uniq, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    return uniq, first, inverse.reshape(-1)


def graft(codes: np.ndarray, cap_codes: np.ndarray, has_cap: np.ndarray) -> np.ndarray:
    """Codes of graph-replayed rows (``has_cap``): the capture-time path (``cap_codes``) grafted
    below the replay-time path (``codes``) under ``<captured_at>``; other rows unchanged.  A
    kernel captured inside a launch op stays that op's kernel (the grafted op node itself)."""
    if not has_cap.any():
        return codes
    codes = codes.copy()
    rows = np.nonzero(has_cap)[0]
    # Python once per distinct (replay path, capture path), never per replayed kernel: each side
    # grouped on its own (a few codes each), then the pairs by their indices (a dense key)
    replays, _, r_index = group(codes[rows])
    captures, _, c_index = group(cap_codes[rows])
    pairs, _, inverse = group(r_index * len(captures) + c_index)
    grafted = np.empty(len(pairs), dtype=np.int64)
    for j, pair in enumerate(pairs.tolist()):
        replay, captured = int(replays[pair // len(captures)]), int(captures[pair % len(captures)])
        node = callpath.graft(node_of(replay), node_of(captured))
        grafted[j] = op_code(node) if captured < 0 else node
    codes[rows] = grafted[inverse]
    return codes


def kernel_nodes(codes: np.ndarray, name_ids: np.ndarray) -> np.ndarray:
    """Kernel node of each row: a child named after the kernel, or the op node itself."""
    nids = name_ids.astype(np.int64)
    base = int(nids.max()) + 1 if len(nids) else 1
    lo = int(codes.min()) if len(codes) else 0
    keys = (codes - lo) * base + nids
    uniq, first, inv = group(keys)
    nodes = np.empty(len(uniq), dtype=np.int64)
    for j, i in enumerate(first.tolist()):
        code, nid = int(codes[i]), int(nids[i])
        nodes[j] = node_of(code) if code < 0 else callpath.child(code, strings.name_of(nid))
    return nodes[inv]


def add_to_trees(phases: Dict[int, PhaseData], rows: np.ndarray, knodes: np.ndarray, phase: np.ndarray) -> None:
    """Add launch count, summed duration and device per (phase, kernel node) of ``rows``
    (a kernel batch) to ``phases`` (phase number -> data; rows of a phase not there are dropped)."""
    dur = (rows["end_ns"] - rows["start_ns"]).astype(np.int64)
    span = int(knodes.max()) + 1
    keys = phase.astype(np.int64) * span + knodes
    uniq, _, inv = group(keys)
    counts = np.bincount(inv, minlength=len(uniq))
    times = np.bincount(inv, weights=dur, minlength=len(uniq))
    last = np.zeros(len(uniq), dtype=np.int64)
    last[inv] = np.arange(len(inv))
    first_launch = np.full(len(uniq), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first_launch, inv, rows["launch_ns"].astype(np.int64))
    first_launch = first_launch.tolist()
    devices = rows["device"]
    for j, key in enumerate(uniq.tolist()):
        pd = phases.get(key // span)
        if pd is None:
            continue
        node = key % span
        pd.kcount[node] = pd.kcount.get(node, 0) + int(counts[j])
        pd.ktime[node] = pd.ktime.get(node, 0) + int(round(times[j]))
        dev = int(devices[last[j]])
        pd.kdevice[node] = dev
        seen = pd.kernel_nodes.get(node)
        if seen is None or first_launch[j] < seen:
            pd.kernel_nodes[node] = first_launch[j]  # Proton inserts the node at launch
        pd.devices.add(dev)


def add_to_traces(phases: Dict[int, PhaseData], rows: np.ndarray, knodes: np.ndarray, phase: np.ndarray,
                  lanes: np.ndarray) -> None:
    """Append ``rows`` (a kernel batch) to the traces of ``phases`` as one
    :class:`~.phase.KernelRecords` per phase; ``lanes``: each row's launching-thread number."""
    for p in np.unique(phase):
        pd = phases.get(int(p))
        if pd is None:
            continue
        m = phase == p
        sub = np.compress(m, rows)
        pd.trace.kernels.append(KernelRecords(sub["start_ns"].copy(), sub["end_ns"].copy(), sub["stream"].copy(),
                                              sub["device"].copy(), knodes[m].copy(), sub["launch_ns"].copy(),
                                              lanes[m]))
        pd.devices.update(int(d) for d in np.unique(sub["device"]))
