"""Decoder of the profile buffer an instrumented kernel writes (Proton's circular layout).

Layout (written by Triton's proton lowering; identical in triton 3.6 and 3.9), one
record of ``profile_scratch_size`` bytes per CTA, CTAs in launch order::

    +0   u32  preamble 0xdeadbeef
    +4   u32  block id (linear CTA index)
    +8   u32  processor (SM) id
    +12  u32  buffer size in bytes (the per-CTA event area)
    +16  u64  init time      (globaltimer at kernel start, ns)
    +24  u64  pre-final time (globaltimer before the copy-out)
    +32  u64  post-final time
    +40  u32 x num_warps   words written by each warp (its circular index)
    +40+4*num_warps        event area: one segment of size/len(uids) bytes per recorded
                           warp, each a sequence of 8-byte entries

An entry is ``tag, clock_lo``: bit 31 of the tag is *end*, bits 23..30 the scope id,
bit 22 *async* (``proton.language`` events, triton >= 3.7), bits 0..10 the upper
bits of a 43-bit clock (zero with ``clock32``).

Parsing follows libproton 3.9 (``CircularLayoutParser``): per segment,
``min(count * 4, segment bytes) / 8`` entries are read in memory order and matched per
scope id (a start while started, or an end while not started, is skipped silently);
an end before its start raises ``Clock overflow``.  Blocks whose preamble is wrong are
skipped.  Async entries are matched per CTA after sorting by clock: an end closes the
open start of the same warp, else the oldest open start of another warp.

The common case (every scope well nested in every segment) is decoded with numpy
only; segments where something does not match are replayed entry by entry.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import List, Optional, Sequence

import numpy as np

PREAMBLE = 0xDEADBEEF
HEADER_BYTES = 40
ENTRY_BYTES = 8
END_BIT = 0x80000000
ASYNC_BIT = 1 << 22
SCOPE_SHIFT = 23
SCOPE_MASK = 0xFF
CLOCK_HI_MASK = 0x7FF

#: time-shift cost of one probe in cycles (libproton's ``getTimeShiftCost``)
TIME_SHIFT_COST = {"CUDA": 7, "HIP": 36}


class DecodeError(Exception):
    """A buffer Proton refuses to decode; ``exc_type`` is the Python type Proton raises."""

    def __init__(self, message: str, offset: Optional[int] = None, exc_type=RuntimeError):
        super().__init__(message)
        self.offset = offset
        self.exc_type = exc_type

    def to_exception(self) -> Exception:
        """The exception Proton 3.9 raises for this (printing its parser line first)."""
        return self.exc_type(str(self))


@dataclass
class Decoded:
    """Everything parsed from one launch's buffer (arrays are numpy)."""

    num_blocks: int
    total_units: int
    uids: List[int]
    #: parsed CTAs, in buffer order
    blk_id: np.ndarray
    blk_proc: np.ndarray
    blk_init: np.ndarray
    blk_prefinal: np.ndarray
    blk_postfinal: np.ndarray
    #: synchronous scope events in libproton's order (by block, warp, end entry)
    ev_blk: np.ndarray
    ev_uid: np.ndarray
    ev_scope: np.ndarray
    ev_start: np.ndarray
    ev_end: np.ndarray
    #: async events (start/end may come from different warps), per block after its scopes
    as_blk: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    as_scope: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    as_start: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))
    as_end: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))
    as_uid_start: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    as_uid_end: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    warnings: List[str] = field(default_factory=list)

    @property
    def num_events(self) -> int:
        """Synchronous plus async events."""
        return len(self.ev_scope) + len(self.as_scope)

    def attribution_order(self):
        """``(scope, start, end, blk)`` arrays of all events in libproton's attribution order.

        libproton walks the CTAs in order and, for each, its warps' scope events and then
        its async events; the order decides which scope node is created first.
        """
        if not len(self.as_scope):
            return self.ev_scope, self.ev_start, self.ev_end, self.ev_blk
        blk = np.concatenate([self.ev_blk, self.as_blk])
        kind = np.concatenate([np.zeros(len(self.ev_blk), np.int8), np.ones(len(self.as_blk), np.int8)])
        seq = np.concatenate([np.arange(len(self.ev_blk)), np.arange(len(self.as_blk))])
        order = np.lexsort((seq, kind, blk))
        return (np.concatenate([self.ev_scope, self.as_scope])[order],
                np.concatenate([self.ev_start, self.as_start])[order],
                np.concatenate([self.ev_end, self.as_end])[order], blk[order])


def _u32(buf: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """Little-endian u32 at byte offsets ``pos`` (any alignment)."""
    b = buf
    return (b[pos].astype(np.uint32) | (b[pos + 1].astype(np.uint32) << 8)
            | (b[pos + 2].astype(np.uint32) << 16) | (b[pos + 3].astype(np.uint32) << 24))


def _empty(num_blocks, total_units, uids, warnings=None) -> Decoded:
    z64 = np.zeros(0, np.int64)
    zu = np.zeros(0, np.uint64)
    return Decoded(num_blocks, total_units, list(uids), z64, z64, zu, zu, zu, z64, z64, z64, zu, zu,
                   warnings=list(warnings or []))


def decode(buf, scratch: int, total_units: int, uids: Optional[Sequence[int]] = None,
           warn=None) -> Decoded:
    """Decode one launch's profile buffer (``bytes``/``bytearray``/``np.uint8`` array).

    Args:
        scratch: the kernel's ``profile_scratch_size`` (bytes per CTA).
        total_units: the kernel's ``num_warps``.
        uids: the recorded warps (``sampling_options``), all warps when None.
        warn: callable receiving each warning line (default: print to stderr, as Proton).

    Raises:
        DecodeError: ``Clock overflow`` (an end entry before its start), as Proton 3.9.
    """
    buf = np.frombuffer(buf, dtype=np.uint8) if not isinstance(buf, np.ndarray) else buf.reshape(-1).view(np.uint8)
    uids = list(range(total_units)) if uids is None else [int(u) for u in uids]
    if scratch <= 0:
        return _empty(0, total_units, uids)
    nb = len(buf) // scratch
    nseg = len(uids)
    if nb == 0 or nseg == 0:
        return _empty(nb, total_units, uids)
    warn = warn or _stderr
    base = np.arange(nb, dtype=np.int64) * scratch
    # the header fields, decoded for every CTA
    pre = _u32(buf, base)
    ok = pre == PREAMBLE
    base = base[ok]
    nbv = len(base)
    if nbv == 0:
        return _empty(nb, total_units, uids)
    blk_id = _u32(buf, base + 4).astype(np.int64)
    blk_proc = _u32(buf, base + 8).astype(np.int64)
    bufsize = _u32(buf, base + 12).view(np.int32).astype(np.int64)
    t = [(_u32(buf, base + off).astype(np.uint64) | (_u32(buf, base + off + 4).astype(np.uint64) << np.uint64(32)))
         for off in (16, 24, 32)]
    uid_arr = np.array(uids, dtype=np.int64)
    counts = _u32(buf, base[:, None] + HEADER_BYTES + 4 * uid_arr[None, :]).astype(np.int64)  # (nbv, nseg)
    # libproton warns when a warp wrote more events than its segment holds (printed as each
    # CTA's header is parsed, so not past a parse error)
    pending = []
    max_per_unit = bufsize // nseg // 8
    ev_count = counts // 2
    over = ev_count > max_per_unit[:, None]
    if over.any():
        for bi, si in zip(*np.nonzero(over)):
            m, c = int(max_per_unit[bi]), int(ev_count[bi, si])
            pending.append((int(base[bi]), f"Warning (cta{int(blk_id[bi])}, warp{uids[si]}): first {c - m} events "
                                           f"are dropped due to insufficient buffer size ({m}/{c})"))
    warnings = []

    def flush_warnings(limit=None):
        for at, msg in pending:
            if limit is None or at < limit:
                warnings.append(msg)
                warn(msg)
    seg_bytes = bufsize // nseg  # per CTA
    ideal = ((counts * 4 + 2 ** 31) % 2 ** 32) - 2 ** 31  # int32 arithmetic of libproton
    n_ent = np.minimum(ideal, seg_bytes[:, None]) // ENTRY_BYTES
    n_ent = np.maximum(n_ent, 0)
    max_ent = int(n_ent.max()) if n_ent.size else 0
    payload = base + HEADER_BYTES + 4 * total_units
    if max_ent == 0:
        flush_warnings()
        d = _empty(nb, total_units, uids, warnings)
        d.blk_id, d.blk_proc, d.blk_init, d.blk_prefinal, d.blk_postfinal = blk_id, blk_proc, t[0], t[1], t[2]
        return d
    k = np.arange(max_ent, dtype=np.int32)
    if (n_ent == max_ent).all():
        total = nbv * nseg * max_ent
        flat = np.arange(total, dtype=np.int64)
        e_k = flat % max_ent
        e_s = (flat // max_ent) % nseg
        e_b = flat // (max_ent * nseg)
    else:
        mask = k[None, None, :] < n_ent[:, :, None].astype(np.int32)         # (nbv, nseg, max_ent)
        e_b, e_s, e_k = np.nonzero(mask)
    e_pos = payload[e_b] + e_s * seg_bytes[e_b] + e_k.astype(np.int64) * ENTRY_BYTES
    # entries beyond the buffer cannot be read (libproton's ByteSpan would throw)
    inside = e_pos + ENTRY_BYTES <= len(buf)
    if not inside.all():
        e_pos, e_b, e_s = e_pos[inside], e_b[inside], e_s[inside]
    if len(e_pos) and not (e_pos % 4).any():
        words = buf[:len(buf) // 4 * 4].view("<u4")
        wi = e_pos // 4
        tag = words[wi]
        lo = words[wi + 1]
    else:
        tag = _u32(buf, e_pos)
        lo = _u32(buf, e_pos + 4)
    is_end = (tag & np.uint32(END_BIT)) != 0
    scope = ((tag >> np.uint32(SCOPE_SHIFT)) & np.uint32(SCOPE_MASK)).astype(np.int64)
    is_async = (tag & np.uint32(ASYNC_BIT)) != 0
    cycle = ((tag & np.uint32(CLOCK_HI_MASK)).astype(np.uint64) << np.uint64(32)) | lo.astype(np.uint64)
    seg_id = e_b * nseg + e_s
    sync = ~is_async
    ev = _match_sync(seg_id[sync], scope[sync], is_end[sync], cycle[sync], e_pos[sync])
    err = ev[-1]
    flush_warnings(err)
    if err is not None:
        raise DecodeError("[PROTON] Clock overflow", err)
    s_seg, s_scope, s_start, s_end = ev[:4]
    out = Decoded(nb, total_units, uids, blk_id, blk_proc, t[0], t[1], t[2],
                  s_seg // nseg, uid_arr[s_seg % nseg], s_scope, s_start, s_end, warnings=warnings)
    if is_async.any():
        _match_async(out, e_b[is_async], uid_arr[e_s[is_async]], scope[is_async], is_end[is_async],
                     cycle[is_async])
    return out


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr)


def _match_sync(seg, scope, is_end, cycle, pos):
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
        r_err = _replay_into(np.nonzero(sel)[0], seg, scope, is_end, cycle, pos, start_of)
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


def _replay_into(sel, seg, scope, is_end, cycle, pos, start_of):
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


def _match_async(out: Decoded, blk_idx, uid, scope, is_end, cycle) -> None:
    """Pair async entries per CTA and scope (libproton 3.9) and store them in ``out``."""
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
