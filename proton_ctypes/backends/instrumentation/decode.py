"""Decoder of the profile buffer an instrumented kernel writes (Proton's circular layout).

The layout (a header per CTA, then one segment of entries per recorded warp) is described,
with its named offsets, in :mod:`.layout`.  Parsing follows libproton 3.9
(``CircularLayoutParser``): blocks whose preamble is wrong are skipped; per segment,
``min(count * 4, segment bytes) / 8`` entries are read in memory order; they are paired into
events by :mod:`.match`.  :func:`decode` runs those steps: the headers of every CTA
(:func:`_read_headers`), the buffer-size warnings (:func:`_overflow_warnings`), where each
entry lies (:func:`_entry_positions`), the entries' fields (:func:`_read_entries`), then the
pairing.  The common case is decoded with numpy only.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import List, NamedTuple, Optional, Sequence

import numpy as np

from .layout import (ASYNC_BIT, BLOCK_ID_OFFSET, BUFFER_SIZE_OFFSET, CLOCK_HI_MASK, COUNT_BYTES, END_BIT,
                     ENTRY_BYTES, HEADER_BYTES, INIT_TIME_OFFSET, POST_FINAL_TIME_OFFSET, PRE_FINAL_TIME_OFFSET,
                     PREAMBLE, PREAMBLE_OFFSET, PROC_ID_OFFSET, SCOPE_MASK, SCOPE_SHIFT, U32_BYTES)
from .match import match_async, match_sync

#: time-shift cost of one probe in cycles (libproton's ``getTimeShiftCost``)
TIME_SHIFT_COST = {"CUDA": 7, "HIP": 36}
#: libproton computes ``count * 4`` in 32-bit signed arithmetic
_I32_WRAP = 2 ** 32
_I32_MIN = 2 ** 31


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


def _u64(buf: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """Little-endian u64 at byte offsets ``pos`` (two u32 reads)."""
    return _u32(buf, pos).astype(np.uint64) | (_u32(buf, pos + U32_BYTES).astype(np.uint64) << np.uint64(32))


def _empty(num_blocks, total_units, uids, warnings=None) -> Decoded:
    z64 = np.zeros(0, np.int64)
    zu = np.zeros(0, np.uint64)
    return Decoded(num_blocks, total_units, list(uids), z64, z64, zu, zu, zu, z64, z64, z64, zu, zu,
                   warnings=list(warnings or []))


class _Headers(NamedTuple):
    """The headers of the CTAs whose preamble is right, one array element per CTA."""

    #: byte offset of each CTA's record
    base: np.ndarray
    blk_id: np.ndarray
    blk_proc: np.ndarray
    #: bytes of the event area
    size: np.ndarray
    init: np.ndarray
    prefinal: np.ndarray
    postfinal: np.ndarray
    #: (CTAs, recorded warps): words each recorded warp wrote
    counts: np.ndarray


def _read_headers(buf: np.ndarray, scratch: int, num_blocks: int, uid_arr: np.ndarray) -> Optional[_Headers]:
    """The headers of every CTA with the right preamble (None: there is none)."""
    base = np.arange(num_blocks, dtype=np.int64) * scratch
    base = base[_u32(buf, base + PREAMBLE_OFFSET) == PREAMBLE]
    if len(base) == 0:
        return None
    counts = _u32(buf, base[:, None] + HEADER_BYTES + COUNT_BYTES * uid_arr[None, :]).astype(np.int64)
    return _Headers(base, _u32(buf, base + BLOCK_ID_OFFSET).astype(np.int64),
                    _u32(buf, base + PROC_ID_OFFSET).astype(np.int64),
                    _u32(buf, base + BUFFER_SIZE_OFFSET).view(np.int32).astype(np.int64),
                    _u64(buf, base + INIT_TIME_OFFSET), _u64(buf, base + PRE_FINAL_TIME_OFFSET),
                    _u64(buf, base + POST_FINAL_TIME_OFFSET), counts)


def _overflow_warnings(hdr: _Headers, uids: List[int]) -> list:
    """``(CTA offset, line)`` of libproton's warning for every warp that wrote more events than
    its segment holds (printed as each CTA's header is parsed, so not past a parse error)."""
    pending = []
    max_per_unit = hdr.size // len(uids) // ENTRY_BYTES
    ev_count = hdr.counts // 2
    over = ev_count > max_per_unit[:, None]
    if over.any():
        for bi, si in zip(*np.nonzero(over)):
            m, c = int(max_per_unit[bi]), int(ev_count[bi, si])
            pending.append((int(hdr.base[bi]), f"Warning (cta{int(hdr.blk_id[bi])}, warp{uids[si]}): first {c - m} "
                                               f"events are dropped due to insufficient buffer size ({m}/{c})"))
    return pending


def _entry_positions(hdr: _Headers, nseg: int, total_units: int, buf_len: int):
    """``(byte offset, CTA index, segment index)`` of every entry to read, in memory order
    (None: no segment holds an entry)."""
    seg_bytes = hdr.size // nseg  # per CTA
    # bytes written = words * 4, in the int32 arithmetic of libproton
    ideal = ((hdr.counts * U32_BYTES + _I32_MIN) % _I32_WRAP) - _I32_MIN
    n_ent = np.maximum(np.minimum(ideal, seg_bytes[:, None]) // ENTRY_BYTES, 0)
    max_ent = int(n_ent.max()) if n_ent.size else 0
    if max_ent == 0:
        return None
    if (n_ent == max_ent).all():
        flat = np.arange(len(hdr.base) * nseg * max_ent, dtype=np.int64)
        e_k = flat % max_ent
        e_s = (flat // max_ent) % nseg
        e_b = flat // (max_ent * nseg)
    else:
        k = np.arange(max_ent, dtype=np.int32)
        mask = k[None, None, :] < n_ent[:, :, None].astype(np.int32)         # (CTAs, segments, max_ent)
        e_b, e_s, e_k = np.nonzero(mask)
    payload = hdr.base + HEADER_BYTES + COUNT_BYTES * total_units
    e_pos = payload[e_b] + e_s * seg_bytes[e_b] + e_k.astype(np.int64) * ENTRY_BYTES
    # entries beyond the buffer cannot be read (libproton's ByteSpan would throw)
    inside = e_pos + ENTRY_BYTES <= buf_len
    if not inside.all():
        e_pos, e_b, e_s = e_pos[inside], e_b[inside], e_s[inside]
    return e_pos, e_b, e_s


def _read_entries(buf: np.ndarray, e_pos: np.ndarray):
    """``(is_end, scope, is_async, cycle)`` of the entries at byte offsets ``e_pos``."""
    if len(e_pos) and not (e_pos % U32_BYTES).any():
        words = buf[:len(buf) // U32_BYTES * U32_BYTES].view("<u4")
        wi = e_pos // U32_BYTES
        tag, lo = words[wi], words[wi + 1]
    else:
        tag, lo = _u32(buf, e_pos), _u32(buf, e_pos + U32_BYTES)
    is_end = (tag & np.uint32(END_BIT)) != 0
    scope = ((tag >> np.uint32(SCOPE_SHIFT)) & np.uint32(SCOPE_MASK)).astype(np.int64)
    is_async = (tag & np.uint32(ASYNC_BIT)) != 0
    cycle = ((tag & np.uint32(CLOCK_HI_MASK)).astype(np.uint64) << np.uint64(32)) | lo.astype(np.uint64)
    return is_end, scope, is_async, cycle


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
    uid_arr = np.array(uids, dtype=np.int64)
    hdr = _read_headers(buf, scratch, nb, uid_arr)
    if hdr is None:
        return _empty(nb, total_units, uids)
    pending = _overflow_warnings(hdr, uids)
    warnings = []
    warn = warn or _stderr

    def flush_warnings(limit=None):
        for at, msg in pending:
            if limit is None or at < limit:
                warnings.append(msg)
                warn(msg)

    entries = _entry_positions(hdr, nseg, total_units, len(buf))
    if entries is None:
        flush_warnings()
        d = _empty(nb, total_units, uids, warnings)
        d.blk_id, d.blk_proc, d.blk_init, d.blk_prefinal, d.blk_postfinal = \
            hdr.blk_id, hdr.blk_proc, hdr.init, hdr.prefinal, hdr.postfinal
        return d
    e_pos, e_b, e_s = entries
    is_end, scope, is_async, cycle = _read_entries(buf, e_pos)
    seg_id = e_b * nseg + e_s
    sync = ~is_async
    s_seg, s_scope, s_start, s_end, _end_pos, err = match_sync(seg_id[sync], scope[sync], is_end[sync],
                                                               cycle[sync], e_pos[sync])
    flush_warnings(err)
    if err is not None:
        raise DecodeError("[PROTON] Clock overflow", err)
    out = Decoded(nb, total_units, uids, hdr.blk_id, hdr.blk_proc, hdr.init, hdr.prefinal, hdr.postfinal,
                  s_seg // nseg, uid_arr[s_seg % nseg], s_scope, s_start, s_end, warnings=warnings)
    if is_async.any():
        match_async(out, e_b[is_async], uid_arr[e_s[is_async]], scope[is_async], is_end[is_async],
                    cycle[is_async])
    return out


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr)
