"""Pairing the start and end entries of a decoded profile buffer into events (libproton 3.9).

Synchronous entries are paired per segment (one warp of one CTA) and scope id by
libproton's state machine (``CircularLayoutParser::parseSegment``): a start while started,
or an end while not started, is skipped silently; an end whose clock is before its start's is
``Clock overflow``.  Groups whose entries alternate start, end, start, ... are paired with
numpy; any other group is replayed entry by entry.  Async entries are paired per CTA after
sorting by clock: an end closes the open start of the same warp, else the oldest open start
of another warp.
"""
from __future__ import annotations

import numpy as np

from .layout import ENTRY_BYTES


def match_sync(seg, scope, is_end, cycle, pos):
    """Pair start/end entries per (segment, scope) as libproton's state machine does.

    Groups (one scope in one segment) are independent.  A group whose entries alternate
    start, end, start, ... is paired by position with numpy; any other group is replayed
    entry by entry.  Returns ``(seg, scope, start, end, end_pos, error_offset)`` of the
    events, ordered by the position of their end entry.
    """
    n = len(seg)
    if n == 0:
        z = np.zeros(0, np.int64)
        return z, z, np.zeros(0, np.uint64), np.zeros(0, np.uint64), z, None
    start_of = np.full(n, -1, dtype=np.int64)
    bad_groups = []
    present = np.nonzero(np.bincount(scope, minlength=1))[0]
    for sc in present.tolist():
        idx = np.nonzero(scope == sc)[0] if len(present) > 1 else np.arange(n)
        sg = seg[idx]
        m = len(idx)
        first = np.ones(m, dtype=bool)
        first[1:] = sg[1:] != sg[:-1]
        ar = np.arange(m)
        rank = ar - np.maximum.accumulate(np.where(first, ar, 0))
        e = is_end[idx]
        good = e == ((rank & 1) == 1)
        if not good.all():
            bad = np.unique(sg[~good])
            bad_groups.append((sc, bad))
            ok = ~np.isin(sg, bad)
        else:
            ok = None
        ends = np.nonzero(e & ok)[0] if ok is not None else np.nonzero(e)[0]
        start_of[idx[ends]] = idx[ends - 1]
    err = None
    matched = start_of >= 0
    if bad_groups:
        sel = np.zeros(n, dtype=bool)
        for sc, bad in bad_groups:
            sel |= (scope == sc) & np.isin(seg, bad)
        r_err = replay_into(np.nonzero(sel)[0], seg, scope, is_end, cycle, pos, start_of)
        matched = start_of >= 0
        err = r_err
    ei = np.nonzero(matched)[0]
    si = start_of[ei]
    s_cyc, e_cyc = cycle[si], cycle[ei]
    overflow = s_cyc > e_cyc
    if overflow.any():
        o = int(pos[ei][overflow].min()) + ENTRY_BYTES
        err = o if err is None else min(err, o)
    return seg[ei], scope[ei], s_cyc, e_cyc, pos[ei], err


def replay_into(sel, seg, scope, is_end, cycle, pos, start_of):
    """Entry-by-entry matching (libproton's parseSegment) of entries ``sel`` (in buffer order).

    Sets ``start_of[end] = start`` for each matched pair; returns the offset of the first
    end entry before its start (``Clock overflow``), or None.  Such a pair is left out.
    """
    err = None
    state = {}
    open_start = {}
    for i, sg, sc, e, c in zip(sel.tolist(), seg[sel].tolist(), scope[sel].tolist(), is_end[sel].tolist(),
                               cycle[sel].tolist()):
        key = (sg, sc)
        prev = state.get(key, 0)  # 0 init, 1 started, 2 ended
        if not e:
            if prev != 1:
                open_start[key] = (i, c)
                state[key] = 1
            continue
        if prev != 1:
            continue  # end after end (or before any start): skipped
        state[key] = 2
        si, s = open_start[key]
        if s > c:
            if err is None:
                err = int(pos[i]) + ENTRY_BYTES
            continue
        start_of[i] = si
    return err


def match_async(out, blk_idx, uid, scope, is_end, cycle) -> None:
    """Pair async entries per CTA and scope (libproton 3.9) and store them in ``out`` (a
    :class:`~.decode.Decoded`)."""
    a_blk, a_scope, a_start, a_end, a_us, a_ue = [], [], [], [], [], []
    order = np.lexsort((cycle, blk_idx))  # stable: buffer order breaks clock ties
    blk_l = blk_idx[order].tolist()
    uid_l = uid[order].tolist()
    sc_l = scope[order].tolist()
    end_l = is_end[order].tolist()
    cyc_l = cycle[order].tolist()
    cur = None
    open_by = {}
    for b, u, sc, e, c in zip(blk_l, uid_l, sc_l, end_l, cyc_l):
        if b != cur:
            cur = b
            open_by = {}
        starts = open_by.setdefault(sc, {})
        if not e:
            if u not in starts:
                starts[u] = c
            continue
        if u in starts:
            su = u
        elif starts:
            su = min(starts, key=lambda w: (starts[w], w))
        else:
            continue  # end with no open start: skipped
        s = starts.pop(su)
        a_blk.append(b)
        a_scope.append(sc)
        a_start.append(s)
        a_end.append(c)
        a_us.append(su)
        a_ue.append(u)
    out.as_blk = np.array(a_blk, np.int64)
    out.as_scope = np.array(a_scope, np.int64)
    out.as_start = np.array(a_start, np.uint64)
    out.as_end = np.array(a_end, np.uint64)
    out.as_uid_start = np.array(a_us, np.int64)
    out.as_uid_end = np.array(a_ue, np.int64)
