"""A kernel batch into the sessions of its backend: the engine half of the kernel join.

For every session using the backend that produced the batch (:func:`ingest`):

1. keep the rows launched inside one of the session's active windows;
2. per launching thread, find the context code in force at each launch time by
   ``np.searchsorted`` over the logs of that thread's views the session belonged to
   (rows no view of their thread covers get the starter thread's context at that thread's
   first launch in the session, resolved once and kept from then on; else ROOT); external-correlation
   and python-context rows carry their code already;
3. graft capture-time paths below replay-time paths for graph replays;
4. the phase of each row from the session's phase start times; then
   :mod:`proton_ctypes.tree.kernels` adds the rows to the phases in bulk.
"""
from __future__ import annotations

import numpy as np

from .session import Session
from ..backends.base import ATTRIBUTION_EXTCORR
from ..tree import callpath
from ..tree import kernels as tkernels
from ..tree import strings
from ..tree.codes import FAR_FUTURE, codes_of_ext

#: the name of our metric kernels (:mod:`.tensor_metrics`, :mod:`.graph_metric_kernel`) and the
#: frame a replayed one is filed under
METRIC_KERNEL, METRIC_FRAME = "write_metric_record", "<metric>"


def _join_thread(session, views_by_tid, tid, t, out, done):
    """Fill ``out`` (context codes) for rows ``t`` launched on ``tid``; mark ``done``."""
    pending = True     # no row done yet: the first view that covers every row needs no mask
    lo, hi = int(t.min()), int(t.max())
    for v in views_by_tid.get(int(tid), ()):
        if session not in v.sessions:
            continue
        t1 = FAR_FUTURE if v.t1 is None else v.t1
        if pending and lo >= v.t0 and hi < t1:
            # the common batch: one view holds every row (no mask, no boolean index or store)
            out[:] = _codes_at(v, lo, t)
            done[:] = True
            return
        m = (~done) & (t >= v.t0) & (t < t1)
        if not m.any():
            continue
        pending = False
        tm = t[m]
        out[m] = _codes_at(v, int(tm.min()), tm)
        done |= m


def _codes_at(v, first: int, t: np.ndarray):
    """The context code in force in view ``v`` at each launch time ``t`` (none before ``first``)."""
    log = v.entries_since(first)
    if len(log) == 0:
        return v.top if v.ids else callpath.ROOT
    i = np.searchsorted(log[:, 0], t, side="right") - 1
    return log[:, 1][np.maximum(i, 0)]


def context_codes(session: Session, views_by_tid: dict, tids: np.ndarray, times: np.ndarray) -> np.ndarray:
    """Context code (node, or ``-(node+1)`` for ops) of each (thread, time) pair."""
    n = len(times)
    out = np.zeros(n, dtype=np.int64)
    if n == 0:
        return out
    done = np.zeros(n, dtype=bool)
    one_thread = tids.min() == tids.max()     # the common batch: no sort, no per-thread copies
    for tid in (tids[:1] if one_thread else np.unique(tids)):
        sel = slice(None) if one_thread else np.nonzero(tids == tid)[0]
        sub_out = np.zeros(n if one_thread else len(sel), dtype=np.int64)
        sub_done = np.zeros(len(sub_out), dtype=bool)
        _join_thread(session, views_by_tid, tid, times[sel], sub_out, sub_done)
        if not sub_done.all() and tid != session.starter_tid:
            # a thread whose launches no view of its own covers (say autograd's, which never
            # enters a scope): its stack is a copy of the starter thread's taken at its first
            # launch in the session, and kept (Proton copies the stack at a thread's first event)
            rest = ~sub_done
            code = session.first_context.get(int(tid))
            if code is None:
                first = int(times[sel][rest].min())
                alt = np.zeros(1, dtype=np.int64)
                alt_done = np.zeros(1, dtype=bool)
                _join_thread(session, views_by_tid, session.starter_tid, np.array([first], dtype=np.int64),
                             alt, alt_done)
                code = session.first_context[int(tid)] = int(alt[0]) if alt_done[0] else callpath.ROOT
            sub_out[rest] = code
        out[sel] = sub_out
        done[sel] = True
    return out


def _row_codes(session: Session, views_by_tid: dict, rows: np.ndarray) -> np.ndarray:
    """The context code each row's kernel attaches to (step 2 and 3 of the module docstring)."""
    if session.backend.attribution == ATTRIBUTION_EXTCORR and session.context != "python":
        return codes_of_ext(rows["py_node"])
    if session.context == "python":
        codes = rows["py_node"].astype(np.int64)
        codes[codes < 0] = callpath.ROOT
        return codes
    codes = context_codes(session, views_by_tid, rows["tid"], rows["launch_ns"])
    has_cap = rows["cap_tid"] >= 0
    if has_cap.any():
        cap = context_codes(session, views_by_tid, rows["cap_tid"][has_cap], rows["cap_ns"][has_cap])
        cap_full = np.zeros(len(rows), dtype=np.int64)
        cap_full[has_cap] = cap
        codes = tkernels.graft(codes, cap_full, has_cap)
    return codes


def _trace_lanes(session: Session, rows: np.ndarray) -> np.ndarray:
    """The session's trace number of each row's launching thread (-1: unknown); a thread
    seen for the first time gets the next number, in order of first launch."""
    tids = rows["tid"].astype(np.int64)
    uniq, first, inverse = np.unique(tids, return_index=True, return_inverse=True)
    lanes = np.empty(len(uniq), dtype=np.int64)
    for i in np.argsort(first, kind="stable").tolist():
        tid = int(uniq[i])
        lanes[i] = session.trace_launcher(tid) if tid >= 0 else -1
    return lanes[inverse.reshape(-1)]


def _names(rows: np.ndarray) -> np.ndarray:
    """Name ids of ``rows``; a metric kernel replayed from a graph is named ``<metric>``, as
    libproton names the metric nodes of a graph."""
    names = rows["name_id"]
    replayed = (rows["cap_tid"] >= 0) & (names == strings.intern(METRIC_KERNEL))
    if replayed.any():
        names = names.copy()
        names[replayed] = strings.intern(METRIC_FRAME)
    return names


def _in_windows(session: Session, batch: np.ndarray, t: np.ndarray):
    """The rows of ``batch`` (launch times ``t``) launched inside one of the session's active
    windows, or None for none of them.  The common batch lies wholly inside the session's last
    window: two reductions say so, with no search per row."""
    on, off = session.win_on, session.win_off
    if on and int(t.min()) >= on[-1] and int(t.max()) < off[-1]:
        return batch
    on = np.asarray(on, dtype=np.int64)
    off = np.asarray(off, dtype=np.int64)
    w = np.searchsorted(on, t, side="right") - 1
    keep = (w >= 0) & (t < off[np.maximum(w, 0)])
    if not keep.any():
        return None
    # np.compress: a boolean index of a structured array copies row by row (~7x slower)
    return batch if keep.all() else np.compress(keep, batch)


def ingest(session: Session, views_by_tid: dict, batch: np.ndarray) -> None:
    """Add the rows of ``batch`` (a kernel batch) that belong to ``session`` to its phases."""
    t = batch["launch_ns"]
    if len(t) == 0:
        return
    rows = _in_windows(session, batch, t)
    if rows is None:
        return
    knodes = tkernels.kernel_nodes(_row_codes(session, views_by_tid, rows), _names(rows))
    if len(session.phase_t) == 1:    # one phase (no data_phase yet): no search per row
        phase = np.zeros(len(rows), dtype=np.int64)
    else:
        phase = np.searchsorted(np.asarray(session.phase_t, dtype=np.int64), rows["launch_ns"], side="right") - 1
        phase = np.maximum(phase, 0)
        session.latest_row_phase = max(session.latest_row_phase, int(phase.max()))
    if session.data == "trace":
        tkernels.add_to_traces(session.phases, rows, knodes, phase, _trace_lanes(session, rows))
    else:
        tkernels.add_to_trees(session.phases, rows, knodes, phase)
