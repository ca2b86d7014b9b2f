"""Attribute a kernel batch to call paths, in bulk.

For every session using the backend that produced the batch:

1. keep the rows launched inside one of the session's active windows;
2. per launching thread, find the context node current at each launch time by
   ``np.searchsorted`` over the logs of that thread's views the session belonged to
   (rows no view of their thread covers get the starter thread's context at that thread's
   first launch in the session, kept from then on; else ROOT);
3. graft capture-time paths below replay-time paths for graph replays;
4. group rows by (phase, context, kernel name) with ``np.unique`` and add count, time
   and device per group -- Python runs per distinct kernel node, never per kernel.
"""
from __future__ import annotations

import numpy as np

from . import callpath, strings
from .codes import FAR_FUTURE, codes_of_ext, node_of

_EMPTY = np.zeros(0, dtype=np.int64)


def _log_arrays(view):
    a = view.compact()
    return a[:, 0], a[:, 1]


def _join_thread(session, views_by_tid, tid, t, out, done):
    """Fill ``out`` (context codes) for rows ``t`` launched on ``tid``; mark ``done``."""
    for v in views_by_tid.get(int(tid), ()):
        if session not in v.sessions:
            continue
        t1 = FAR_FUTURE if v.t1 is None else v.t1
        m = (~done) & (t >= v.t0) & (t < t1)
        if not m.any():
            continue
        times, codes = _log_arrays(v)
        if len(times) == 0:
            out[m] = v.top if v.ids else callpath.ROOT
        else:
            i = np.searchsorted(times, t[m], side="right") - 1
            out[m] = codes[np.maximum(i, 0)]
        done |= m


def context_codes(session, views_by_tid, tids, times):
    """Context code (node, or ``-(node+1)`` for ops) of each (thread, time) pair."""
    n = len(times)
    out = np.zeros(n, dtype=np.int64)
    if n == 0:
        return out
    done = np.zeros(n, dtype=bool)
    for tid in np.unique(tids):
        sel = np.nonzero(tids == tid)[0]
        sub_out = np.zeros(len(sel), dtype=np.int64)
        sub_done = np.zeros(len(sel), dtype=bool)
        _join_thread(session, views_by_tid, tid, times[sel], sub_out, sub_done)
        if not sub_done.all() and tid != session.starter_tid:
            # a thread whose launches no view of its own covers (say autograd's, which never
            # enters a scope): its stack is a copy of the starter thread's taken at its first
            # launch in the session, and kept (Proton copies the stack at a thread's first event)
            rest = ~sub_done
            first = session.first_launch.setdefault(int(tid), int(times[sel][rest].min()))
            alt = np.zeros(1, dtype=np.int64)
            alt_done = np.zeros(1, dtype=bool)
            _join_thread(session, views_by_tid, session.starter_tid, np.array([first], dtype=np.int64),
                         alt, alt_done)
            sub_out[rest] = alt[0] if alt_done[0] else callpath.ROOT
        out[sel] = sub_out
        done[sel] = True
    return out


def _graft(codes, cap_codes, has_cap):
    if not has_cap.any():
        return codes
    codes = codes.copy()
    pairs = {}
    for i in np.nonzero(has_cap)[0]:
        key = (int(codes[i]), int(cap_codes[i]))
        node = pairs.get(key)
        if node is None:
            node = pairs[key] = callpath.graft(node_of(key[0]), node_of(key[1]))
        codes[i] = node
    return codes


def kernel_nodes(codes, name_ids):
    """Kernel node of each row: a child named after the kernel, or the op node itself."""
    nids = name_ids.astype(np.int64)
    base = int(nids.max()) + 1 if len(nids) else 1
    lo = int(codes.min()) if len(codes) else 0
    keys = (codes - lo) * base + nids
    uniq, first, inv = np.unique(keys, return_index=True, return_inverse=True)
    nodes = np.empty(len(uniq), dtype=np.int64)
    for j, i in enumerate(first.tolist()):
        code, nid = int(codes[i]), int(nids[i])
        nodes[j] = node_of(code) if code < 0 else callpath.child(code, strings.name_of(nid))
    return nodes[inv.reshape(-1)]


def ingest(session, views_by_tid, batch) -> None:
    """Add the rows of ``batch`` that belong to ``session`` to its phases."""
    t = batch["launch_ns"]
    if len(t) == 0:
        return
    on = np.asarray(session.win_on, dtype=np.int64)
    off = np.asarray(session.win_off, dtype=np.int64)
    w = np.searchsorted(on, t, side="right") - 1
    keep = (w >= 0) & (t < off[np.maximum(w, 0)])
    if not keep.any():
        return
    rows = batch[keep]
    t = rows["launch_ns"]
    if session.backend.attribution == "extcorr" and session.context != "python":
        codes = codes_of_ext(rows["py_node"])
    elif session.context == "python":
        codes = rows["py_node"].astype(np.int64)
        codes[codes < 0] = callpath.ROOT
    else:
        codes = context_codes(session, views_by_tid, rows["tid"], t)
        has_cap = rows["cap_tid"] >= 0
        if has_cap.any():
            cap = context_codes(session, views_by_tid, rows["cap_tid"][has_cap], rows["cap_ns"][has_cap])
            cap_full = np.zeros(len(rows), dtype=np.int64)
            cap_full[has_cap] = cap
            codes = _graft(codes, cap_full, has_cap)
    knodes = kernel_nodes(codes, rows["name_id"])
    phase = np.searchsorted(np.asarray(session.phase_t, dtype=np.int64), t, side="right") - 1
    phase = np.maximum(phase, 0)
    if session.data == "trace":
        _add_trace(session, rows, knodes, phase)
        return
    _add_tree(session, rows, knodes, phase)


def _add_tree(session, rows, knodes, phase):
    dur = (rows["end_ns"] - rows["start_ns"]).astype(np.int64)
    span = int(knodes.max()) + 1
    keys = phase.astype(np.int64) * span + knodes
    uniq, inv = np.unique(keys, return_inverse=True)
    inv = inv.reshape(-1)
    counts = np.bincount(inv, minlength=len(uniq))
    times = np.bincount(inv, weights=dur, minlength=len(uniq))
    last = np.zeros(len(uniq), dtype=np.int64)
    last[inv] = np.arange(len(inv))
    first_launch = np.full(len(uniq), np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first_launch, inv, rows["launch_ns"].astype(np.int64))
    first_launch = first_launch.tolist()
    devices = rows["device"]
    for j, key in enumerate(uniq.tolist()):
        pd = session.phases.get(key // span)
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


def _trace_lanes(session, rows):
    """The session's trace number of each row's launching thread (-1: unknown); a thread
    seen for the first time gets the next number, in order of first launch."""
    tids = rows["tid"].astype(np.int64)
    uniq, first = np.unique(tids, return_index=True)
    table = {}
    for i in np.argsort(first, kind="stable").tolist():
        tid = int(uniq[i])
        table[tid] = session.trace_launcher(tid) if tid >= 0 else -1
    if len(uniq) == 1:
        return np.full(len(tids), table[int(uniq[0])], dtype=np.int64)
    return np.array([table[t] for t in tids.tolist()], dtype=np.int64)


def _add_trace(session, rows, knodes, phase):
    lanes = _trace_lanes(session, rows)
    for p in np.unique(phase):
        pd = session.phases.get(int(p))
        if pd is None:
            continue
        m = phase == p
        sub = rows[m]
        # start, end, stream, device, node, launch time, the launching thread's trace number
        pd.trace.append(("kernels", sub["start_ns"].copy(), sub["end_ns"].copy(), sub["stream"].copy(),
                         sub["device"].copy(), knodes[m].copy(), sub["launch_ns"].copy(), lanes[m]))
        pd.devices.update(int(d) for d in np.unique(sub["device"]))
