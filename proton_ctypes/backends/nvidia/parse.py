"""Vectorised parsing of whole CUPTI activity buffers with numpy.

A completed buffer is a packed sequence of 8-byte aligned records, each starting with
its ``kind`` (u32).  Three strategies, cheapest first, each linear in the buffer size:

1. **single kind** — record 0's kind ``k`` with size ``s``: if ``valid % s == 0`` and every
   ``s``-th u32 equals ``k``, every field is one strided column copy;
2. **candidate chain** — one pass over the buffer finds the 8-byte slots holding a
   plausible CUPTI timestamp; the slot one (API record) or two (kernel record) before
   such a slot is a candidate record start if it holds the matching kind (external-
   correlation records, which carry no timestamp, are found by their kind); if the candidates form
   one unbroken chain ``0 -> 0+size -> ... -> valid`` they are exactly the records, so each
   field is one fancy-index gather.  A false candidate (say a stream id equal to a kind
   value inside a record) breaks that chain; then the records are the path from slot 0
   through the candidates' "next record" links, found by pointer doubling
   (``O(m log m)`` numpy work for ``m`` candidates, still no Python loop per record);
3. **walk** — otherwise a Python loop reads 4 bytes per record (``memoryview.cast('I')``)
   and steps by the record size; used for odd buffers only (e.g. records without
   timestamps after a forced flush).

Never scan "runs" with whole-buffer compares: that is quadratic on interleaved kinds.
The output of :meth:`BufferParser.parse` is ``{kind: {field: column}}`` with copied columns,
so the buffer can be recycled at once; kernel records of either kernel kind
(``layout.KERNEL_KINDS``) are reported together as ``KIND_CONCURRENT_KERNEL``.
"""
from __future__ import annotations

import numpy as np

from . import layout as L

#: Bytes per slot: records start on (and are a whole number of) 8-byte slots.
SLOT = L.RECORD_ALIGNMENT
_MAX_KIND = 64


def _start_slot(fields) -> int:
    """The slot of the ``start`` timestamp within a record of ``fields``."""
    return next(off for name, _fmt, off in fields if name == "start") // SLOT


#: Slot of the ``start`` timestamp in a kernel record (2) and in an API record (1).
KERNEL_START_SLOT = _start_slot(L.KERNEL_FIELDS)
API_START_SLOT = _start_slot(L.API_FIELDS)


def _subset(fields, names):
    return tuple(f for f in fields if f[0] in names)


#: The fields the backend reads, per kind (a subset of the layout tables).
PARSED_FIELDS = {
    L.KIND_CONCURRENT_KERNEL: _subset(L.KERNEL_FIELDS, {"start", "end", "deviceId", "streamId", "correlationId",
                                                         "name", "graphNodeId", "queued"}),
    L.KIND_DRIVER: _subset(L.API_FIELDS, {"cbid", "start", "end", "threadId", "correlationId", "returnValue"}),
    L.KIND_RUNTIME: _subset(L.API_FIELDS, {"cbid", "start", "end", "threadId", "correlationId", "returnValue"}),
    L.KIND_EXTERNAL_CORRELATION: _subset(L.EXTCORR_FIELDS, {"externalKind", "externalId", "correlationId"}),
}
#: ``graphId`` (the executable graph of a replayed kernel) is read only for kernels with a graph
#: node, so that ordinary kernels cost no extra gather; 0 elsewhere.
GRAPH_ID_FIELD = next(f for f in L.KERNEL_FIELDS if f[0] == "graphId")


def _add_graph_ids(cols: dict, read) -> None:
    """Add the ``graphId`` column to kernel columns ``cols``: ``read(rows)`` for the rows that
    have a graph node, zero for the rest."""
    node = cols.get("graphNodeId")
    if node is None:
        return
    rows = np.flatnonzero(node)
    graph_ids = np.zeros(node.size, GRAPH_ID_FIELD[1])
    if rows.size:
        graph_ids[rows] = read(rows)
    cols["graphId"] = graph_ids


class BufferParser:
    """Splits CUPTI buffers into per-kind columns; knows the record sizes and a timestamp window."""

    def __init__(self, kernel_stride: int, ts_lo: int = 10**18, ts_hi: int = 4 * 10**18):
        self.ts_lo = int(ts_lo)
        self.ts_hi = int(ts_hi)
        #: Whether external-correlation records (no timestamp) may appear (extcorr attribution).
        self.expect_extcorr = False
        #: Whether kernel columns carry ``offset``: each record's byte offset in its buffer
        #: (launch positions, :mod:`.positions`).
        self.want_offsets = False
        self.set_kernel_stride(kernel_stride)
        #: How many buffers took each path, and bytes we could not parse (unknown kinds).
        self.stats = {"single": 0, "chain": 0, "walk": 0, "unparsed_bytes": 0}

    def set_kernel_stride(self, stride: int) -> None:
        """Use ``stride`` as the kernel record size from now on."""
        L.kernel_dtype(stride)  # validates
        self.kernel_stride = int(stride)
        self.sizes = L.record_sizes(self.kernel_stride)
        step = np.zeros(_MAX_KIND, np.int64)
        for kind, size in self.sizes.items():
            step[kind] = size
        self._step = step
        self._slot_step = step // SLOT
        self._step_list = step.tolist()

    # ------------------------------------------------------------------ public
    def parse(self, buf: np.ndarray, valid: int, copy: bool = True) -> dict:
        """Return ``{kind: {field: column}}`` for the first ``valid`` bytes of ``buf`` (uint8, 8-aligned).

        ``copy=False``: columns of a single-kind buffer are strided views into ``buf``, valid while
        it is: one pass over the records (when the join copies them out) instead of a copy and
        then another."""
        valid = int(valid)
        if valid < SLOT:
            return {}
        buf = buf[:valid]
        first = int(buf[:4].view("<u4")[0])
        size = self.sizes.get(first)
        if size and valid % size == 0:
            n = valid // size
            kinds = np.ndarray((n,), "<u4", buf, 0, (size,))
            if n == 1 or bool((kinds == first).all()):
                self.stats["single"] += 1
                kind = _reported(first)
                return {kind: self._strided(buf, kind, n, size, copy)}
        slots = self._chain(buf, valid)
        if slots is not None:
            self.stats["chain"] += 1
        else:
            self.stats["walk"] += 1
            slots = self._walk(buf, valid)
        return self._gather(buf, valid, slots)

    # ------------------------------------------------------------------ strategies
    def _strided(self, buf, kind, n, size, copy) -> dict:
        """The needed fields of a single-kind buffer as strided columns (copied, if ``copy``)."""
        cols = {name: np.ndarray((n,), fmt, buf, off, (size,)) for name, fmt, off in PARSED_FIELDS[kind]}
        if copy:
            cols = {name: col.copy() for name, col in cols.items()}
        if kind == L.KIND_CONCURRENT_KERNEL:
            _, fmt, off = GRAPH_ID_FIELD
            _add_graph_ids(cols, lambda rows: np.ndarray((n,), fmt, buf, off, (size,))[rows])
            if self.want_offsets:
                cols["offset"] = np.arange(n, dtype=np.int64) * size
        return cols

    def _chain(self, buf, valid):
        """``{kind: slot indices}`` of the records found by the candidate chain, or None if it breaks.

        Candidates come from the timestamps, not from the kind of every slot: one pass finds
        the 8-byte slots holding a plausible CUPTI timestamp; each run of such slots starts
        at a record's ``start``, two slots after a kernel record's start and one after an
        API record's.  External-correlation records carry no timestamp and are found by kind.
        """
        if valid % SLOT:
            return None
        n_slots = valid // SLOT
        words = buf.view("<u4")
        high = words[1::2]                                        # high halves: enough for a window test
        lo = np.uint32(self.ts_lo >> 32)
        inside = (high - lo) <= np.uint32((self.ts_hi >> 32) - (self.ts_lo >> 32))
        first = np.flatnonzero(inside[1:] & ~inside[:-1]) + 1    # the first timestamp of each record
        if first.size == 0:
            return None
        k_slots = first[np.searchsorted(first, KERNEL_START_SLOT):] - KERNEL_START_SLOT
        k_kinds = words[2 * k_slots]
        is_kernel = (k_kinds == L.KIND_CONCURRENT_KERNEL) | (k_kinds == L.KIND_KERNEL)
        a_slots = first[np.searchsorted(first, API_START_SLOT):] - API_START_SLOT
        a_kinds = words[2 * a_slots]
        is_api = (a_kinds == L.KIND_DRIVER) | (a_kinds == L.KIND_RUNTIME)
        slot_parts = [k_slots[is_kernel], a_slots[is_api]]
        kind_parts = [k_kinds[is_kernel].astype(np.int64), a_kinds[is_api].astype(np.int64)]
        if self.expect_extcorr:
            e_slots = np.flatnonzero(words[0::2] == L.KIND_EXTERNAL_CORRELATION)
            slot_parts.append(e_slots)
            kind_parts.append(np.full(e_slots.size, L.KIND_EXTERNAL_CORRELATION, np.int64))
        cand = np.concatenate(slot_parts)
        kinds = np.concatenate(kind_parts)
        order = np.argsort(cand, kind="stable")
        cand, kinds = cand[order], kinds[order]
        if cand.size == 0 or cand[0] != 0:
            return None
        nxt = cand + self._slot_step[kinds]
        if not (nxt[-1] == n_slots and np.array_equal(cand[1:], nxt[:-1])):
            path = _path_from_first(cand, nxt)
            if nxt[path[-1]] != n_slots:
                return None
            cand, kinds = cand[path], kinds[path]
        return _by_kind(cand, kinds)

    def _walk(self, buf, valid):
        """``{kind: slot indices}`` by a Python walk (4 bytes read per record); stops at an unknown kind."""
        words = memoryview(buf).cast("I")
        step = self._step_list
        offsets = []
        append = offsets.append
        p = 0
        while p < valid:
            kind = words[p >> 2]
            size = step[kind] if kind < _MAX_KIND else 0
            if not size or p + size > valid:
                self.stats["unparsed_bytes"] += valid - p
                break
            append(p)
            p += size
        slots = np.asarray(offsets, np.int64) // SLOT
        return _by_kind(slots, buf.view("<u4")[2 * slots] if slots.size else slots)

    def _gather(self, buf, valid, slots_by_kind: dict) -> dict:
        """Gather the needed fields of each kind's records: one fancy index per field."""
        words = buf[: valid - valid % 4].view("<u4")
        quads = buf[: valid - valid % SLOT].view("<u8")
        out = {}
        for kind, q in slots_by_kind.items():
            w = q * 2
            cols = {}
            for name, fmt, off in PARSED_FIELDS[kind]:
                col = quads[q + off // SLOT] if fmt[-1] == "8" else words[w + off // 4]
                cols[name] = col if col.dtype == np.dtype(fmt) else col.view(fmt)
            if kind == L.KIND_CONCURRENT_KERNEL:
                _add_graph_ids(cols, lambda rows, w=w: words[w[rows] + GRAPH_ID_FIELD[2] // 4])
                if self.want_offsets:
                    cols["offset"] = q.astype(np.int64) * SLOT
            out[kind] = cols
        return out


def _reported(kind: int) -> int:
    """The kind a record is reported under (kernel records of either kind as one)."""
    return L.KIND_CONCURRENT_KERNEL if kind == L.KIND_KERNEL else kind


def _by_kind(slots: np.ndarray, kinds: np.ndarray) -> dict:
    """Split record slots by reported kind (kinds we do not parse are left out)."""
    out = {}
    for kind in PARSED_FIELDS:
        sel = (kinds == kind) | (kinds == L.KIND_KERNEL) if kind == L.KIND_CONCURRENT_KERNEL else kinds == kind
        if sel.any():
            out[kind] = slots[sel]
    return out


def _path_from_first(cand: np.ndarray, nxt: np.ndarray):
    """Indices (into ``cand``) of the path 0 -> next -> ... following ``nxt``, by pointer doubling.

    ``cand`` is sorted; candidate ``i``'s successor is the candidate starting at ``nxt[i]``
    (or none).  Returns None if slot 0 is not a candidate.  The path ends at the first
    candidate without a successor; the caller checks that it ends at the buffer's end.
    """
    m = cand.size
    pos = np.searchsorted(cand, nxt)
    pos_ok = pos < m
    succ = np.full(m + 1, m, np.int64)
    hit = np.zeros(m, bool)
    hit[pos_ok] = cand[pos[pos_ok]] == nxt[pos_ok]
    succ[:m][hit] = pos[hit]
    reach = np.zeros(1, np.int64)
    jump = succ
    while True:
        new = jump[reach]
        new = new[new < m]
        if new.size == 0:
            return reach
        reach = np.concatenate([reach, new])
        jump = jump[jump]


def record_count(parts: dict, kind=None) -> int:
    """The number of records (of ``kind`` only, when given) in a :meth:`BufferParser.parse`
    result; kinds it does not parse are not counted."""
    return sum(len(next(iter(cols.values()))) for k, cols in parts.items() if kind is None or k == kind)


def concat_columns(parts: list) -> dict:
    """Concatenate a list of ``{field: column}`` dicts field by field (empty dict for no parts).
    One part is returned as it is: its columns may be views into a buffer (``parse(copy=False)``),
    which the caller keeps until it has copied out what it keeps."""
    if not parts:
        return {}
    if len(parts) == 1:
        return parts[0]
    return {name: np.concatenate([p[name] for p in parts]) for name in parts[0]}
