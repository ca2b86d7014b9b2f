"""Turn parsed kernel records into kernel batches: the correlation-id join, vectorised.

A kernel's launch (thread id and host time) comes from the kernel record itself where CUPTI
stamps it (``queued``, and the ``owner`` column the collector adds: the thread whose buffer
held it), else -- replayed graph kernels, or the API launch source -- from a *launch entry*
with its ``correlationId``: a launch-API record or a graph-launch callback entry.  A kernel
is also tied by ``correlationId`` to an external-correlation record (fallback attribution)
and, with ``context="python"``, to the call-path node captured by the launch callback.
Records of one launch can arrive in different buffers (the API record at launch, the kernel
record when it completes), so the lookups keep *pending* tables across flushes, and a kernel
whose launch is not known yet is held back for one round.

Everything here is numpy over whole columns; Python loops run per distinct thread,
name pointer or graph node, never per kernel.
"""
from __future__ import annotations

import ctypes
from typing import Callable, Optional

import numpy as np

from ...tree import strings
from ..base import empty_batch

#: Pending API/ext-corr/python entries not matched after this long (ns, CUPTI clock) are dropped.
UNMATCHED_TTL_NS = 120 * 10**9
#: Matched graph-launch API records are kept this long for the rest of the graph's kernels.
GRAPH_TTL_NS = 10 * 10**9
#: External-correlation records kept at most while waiting for their kernels (the newest win).
MAX_PENDING_EXTERNAL = 1_000_000
#: A correlation-id lookup uses a dense table when the id range is at most this many slots per
#: id plus this many slots, else a sorted search.
DENSE_TABLE_SLOTS_PER_ID, DENSE_TABLE_EXTRA_SLOTS = 16, 4096
#: A python-context entry matched by time must lie in [api start - slack, api end] on the same thread.
PY_TIME_SLACK_NS = 2_000
#: ... or, for a kernel stamped with its ``queued`` time, in [queued - window, queued]: the
#: driver callback runs at the start of the launch call, the command is queued inside it.
PY_QUEUED_WINDOW_NS = 10**9


class CorrTable:
    """Columns keyed by correlation id, appended in chunks, looked up in bulk."""

    def __init__(self, columns: dict):
        self.dtypes = dict(columns)
        self.cols = {name: np.zeros(0, dt) for name, dt in columns.items()}

    def __len__(self):
        return len(self.cols["corr"])

    def add(self, **cols) -> None:
        """Append rows (every column given, same length)."""
        if len(cols["corr"]) == 0:
            return
        for name in self.cols:
            self.cols[name] = np.concatenate([self.cols[name], np.asarray(cols[name], self.dtypes[name])])

    def lookup(self, corr: np.ndarray):
        """Return ``(found, row)``: for each id in ``corr`` whether a row has it and which one.

        Correlation ids are a dense process-wide counter, so a direct table over their
        range is used when it is small (O(n)); otherwise a sort and a binary search.
        """
        keys = self.cols["corr"]
        if keys.size == 0 or corr.size == 0:
            return np.zeros(corr.size, bool), np.zeros(corr.size, np.int64)
        lo, hi = int(keys.min()), int(keys.max())
        if hi - lo < DENSE_TABLE_SLOTS_PER_ID * (keys.size + corr.size) + DENSE_TABLE_EXTRA_SLOTS:
            table = np.full(hi - lo + 1, -1, np.int64)
            table[keys.astype(np.int64) - lo] = np.arange(keys.size)
            idx = corr.astype(np.int64) - lo
            inside = (idx >= 0) & (idx <= hi - lo)
            row = np.where(inside, table[np.where(inside, idx, 0)], -1)
            found = row >= 0
            return found, np.where(found, row, 0)
        order = np.argsort(keys, kind="stable")
        pos = np.searchsorted(keys, corr, sorter=order)
        pos = np.minimum(pos, keys.size - 1)
        row = order[pos]
        return keys[row] == corr, row

    def keep(self, mask: np.ndarray) -> None:
        """Keep only the rows where ``mask`` is True."""
        for name in self.cols:
            self.cols[name] = self.cols[name][mask]


class Joiner:
    """Builds :data:`~proton_ctypes.backends.base.KERNEL_DTYPE` batches from parsed columns."""

    def __init__(self, clock_offset_ns: int = 0, graph_resolver: Optional[Callable] = None,
                 name_reader: Callable[[int], str] = None, graph_launch_cbids=(),
                 graph_exec_check: Optional[Callable] = None):
        #: CUPTI time minus ``time.time_ns()``; subtracted from every CUPTI timestamp.
        self.clock_offset_ns = int(clock_offset_ns)
        self.graph_resolver = graph_resolver
        #: called with the executable-graph ids (``graphId``) of each batch's replayed kernels
        self.graph_exec_check = graph_exec_check
        self.name_reader = name_reader or _read_c_string
        self.graph_launch_cbids = np.asarray(sorted(graph_launch_cbids), np.uint32)
        self.api = CorrTable({"corr": np.uint32, "tid": np.int64, "start": np.int64, "end": np.int64,
                              "graph": bool})
        self.ext = CorrTable({"corr": np.uint32, "ext": np.int64})
        self.py = CorrTable({"corr": np.uint32, "node": np.int64, "tid": np.int64, "t": np.int64})
        self._held = None
        #: every kernel-name pointer seen, sorted, and its interned name id (:meth:`_name_ids`)
        self._known_ptrs = np.zeros(0, np.uint64)
        self._known_ids = np.zeros(0, np.int32)
        self._newest_ns = 0
        #: lazy latency timestamps (:meth:`~proton_ctypes.backends.cupti.CuptiBackend.context_in_use`):
        #: kernels of known owner left unstamped get a launch time from their record
        self.lazy = False
        #: ... no later than just before the first context change (``time_ns``), once there was one
        self.lazy_bound_ns = None
        #: ``context="python"`` without latency timestamps: a kernel matched by correlation id to a
        #: launch-callback entry takes its launching thread and time from the entry
        self.launch_from_python = False
        #: set when such a kernel (launched, not replayed) matched no entry by id: its launch is
        #: unknown, and CUPTI's latency timestamps must be switched on (the collector does)
        self.needs_stamps = False
        #: Counters for diagnostics and the finalize report.
        self.stats = {"kernels": 0, "api_matched": 0, "owner_matched": 0, "lazy_matched": 0, "api_missing": 0,
                      "invalid_time": 0,
                      "py_by_corr": 0, "py_by_time": 0, "py_launched": 0, "ext_matched": 0, "api_records": 0,
                      "graph_launches": 0}

    # ------------------------------------------------------------------ inputs
    def add_api(self, cols: dict) -> None:
        """Remember launch-API records (``CUpti_ActivityAPI`` columns); failed launches are skipped."""
        if not cols:
            return
        ok = cols["returnValue"] == 0
        self.stats["api_records"] += int(ok.sum())
        self.api.add(corr=cols["correlationId"][ok], tid=cols["threadId"][ok].astype(np.int64),
                     start=cols["start"][ok].astype(np.int64), end=cols["end"][ok].astype(np.int64),
                     graph=np.isin(cols["cbid"][ok], self.graph_launch_cbids))

    def add_graph_launches(self, entries: np.ndarray) -> None:
        """Remember graph-launch callback entries, an ``(n, 3)`` int64 array: corr, tid, time_ns."""
        if len(entries):
            self.stats["graph_launches"] += len(entries)
            t = entries[:, 2] + self.clock_offset_ns          # the CUPTI clock, as API records
            self.api.add(corr=entries[:, 0].astype(np.uint32), tid=entries[:, 1], start=t, end=t,
                         graph=np.ones(len(entries), bool))

    def add_external(self, cols: dict) -> None:
        """Remember external-correlation records (``correlationId`` -> ``externalId``)."""
        if cols:
            self.ext.add(corr=cols["correlationId"], ext=cols["externalId"].astype(np.int64))

    def add_python(self, entries: np.ndarray) -> None:
        """Remember python-context launch entries, an ``(n, 4)`` int64 array: corr, node, tid, time_ns."""
        if len(entries):
            self.py.add(corr=entries[:, 0].astype(np.uint32), node=entries[:, 1], tid=entries[:, 2],
                        t=entries[:, 3])

    # ------------------------------------------------------------------ output
    def join(self, kernels: dict, hold: bool = False) -> np.ndarray:
        """Return the batch for ``kernels`` (kernel columns) plus any held back from the last round.

        With ``hold``, kernels whose launch-API record has not arrived yet are kept for one
        more round; held kernels are delivered next time whether matched or not.
        """
        fresh = _valid_rows(kernels, self.stats)
        held, self._held = self._held, None
        if fresh is not None and fresh["start"].size:
            self._newest_ns = max(self._newest_ns, int(fresh["start"].max()))
        looked_up = None          # the API lookup of ``fresh``, reused by _build when nothing was held
        if fresh is not None and hold and len(self.api):
            found, row = self.api.lookup(fresh["correlationId"])
            ready = found | _stamped(fresh)
            if not ready.all():
                self._held = _take(fresh, ~ready)
                fresh = _take(fresh, ready)
                found, row = found[ready], row[ready]
            looked_up = (found, row)
        cols = _concat([c for c in (held, fresh) if c is not None])
        batch = self._build(cols, looked_up if held is None else None) if cols is not None else empty_batch(0)
        self._prune()
        return batch

    def held_start_ns(self):
        """The earliest start (``time_ns``) of the kernels held back for the next round, or None."""
        held = self._held
        if held is None or held["start"].size == 0:
            return None
        return int(held["start"].min()) - self.clock_offset_ns

    # ------------------------------------------------------------------ internals
    def _build(self, k: dict, looked_up=None) -> np.ndarray:
        """The batch of kernel columns ``k``; ``looked_up``: their ``(found, row)`` in the API
        table when :meth:`join` has it already."""
        n = k["start"].size
        batch = empty_batch(n)
        off = self.clock_offset_ns
        corr = k["correlationId"]
        batch["start_ns"] = k["start"].astype(np.int64) - off
        batch["end_ns"] = k["end"].astype(np.int64) - off
        batch["device"] = k["deviceId"]
        batch["stream"] = k["streamId"]
        batch["corr"] = corr
        batch["name_id"] = self._name_ids(k["name"])
        found, row = looked_up if looked_up is not None else self.api.lookup(corr)
        stamped = _stamped(k) & ~found
        lazy = _unstamped(k) & ~found if self.lazy else np.zeros(n, bool)
        self.stats["kernels"] += n
        self.stats["api_matched"] += int(found.sum())
        self.stats["owner_matched"] += int(stamped.sum())
        self.stats["lazy_matched"] += int(lazy.sum())
        missing = int(n - found.sum() - stamped.sum() - lazy.sum())
        tid = batch["tid"]
        launch = batch["start_ns"].copy()
        if found.any():
            _assign(tid, found, self.api.cols["tid"][row])
            _assign(launch, found, self.api.cols["start"][row] - off)
        if stamped.any():
            _assign(tid, stamped, k["owner"])
            _assign(launch, stamped, k["queued"].astype(np.int64) - off)
        if lazy.any():
            # launched before the first context change (no thread had a scope, no session had
            # changed), at or before the kernel's start: any time in [launch, change) has the
            # same context, and no view covers a time before the change
            batch["tid"][lazy] = k["owner"][lazy]
            bound = self.lazy_bound_ns
            if bound is not None:
                launch[lazy] = np.minimum(launch[lazy], bound - 1)
        batch["launch_ns"] = launch
        single = k["graphNodeId"] == 0          # one kernel per launch: its entries can go now
        if len(self.ext):
            efound, erow = self.ext.lookup(corr)
            batch["py_node"][efound] = self.ext.cols["ext"][erow[efound]]
            self.stats["ext_matched"] += int(efound.sum())
            self.ext.keep(_unused(len(self.ext), erow[efound & single]))
        if len(self.py):
            missing -= self._python_nodes(batch, k, found, row, stamped, single)
        self.stats["api_missing"] += missing
        node = k["graphNodeId"]
        graph = node != 0
        if graph.any():
            if self.graph_resolver is not None:
                cap_tid, cap_ns = self.graph_resolver(node[graph])
                batch["cap_tid"][graph] = cap_tid
                batch["cap_ns"][graph] = cap_ns
            if self.graph_exec_check is not None and "graphId" in k:
                self.graph_exec_check(k["graphId"][graph])
        if found.any():
            used = row[found]
            self.api.keep(_unused(len(self.api), used[~self.api.cols["graph"][used]]))
        return batch

    def _python_nodes(self, batch, k, api_found, api_row, stamped, single) -> int:
        """Fill ``py_node``: by correlation id first, then by (thread, time inside the launch call:
        the API record's span, or the window before the kernel's ``queued`` time).

        With :attr:`launch_from_python` (never with lazy timestamps), the rows matched by id whose
        launch neither an API entry (``api_found``) nor their record (``stamped``) gives take the
        entry's thread and time.  Returns how many did."""
        pfound, prow = self.py.lookup(k["correlationId"])
        batch["py_node"][pfound] = self.py.cols["node"][prow[pfound]]
        self.stats["py_by_corr"] += int(pfound.sum())
        taken = 0
        if self.launch_from_python:
            take = np.flatnonzero(pfound & ~api_found & ~stamped)
            if take.size:
                batch["tid"][take] = self.py.cols["tid"][prow[take]]
                batch["launch_ns"][take] = self.py.cols["t"][prow[take]]
                taken = int(take.size)
                self.stats["py_launched"] += taken
            if not self.needs_stamps and (~pfound & ~api_found & ~stamped & single).any():
                self.needs_stamps = True
        used = [prow[pfound & single]]
        off = self.clock_offset_ns
        by_api = np.flatnonzero(~pfound & api_found)
        by_queued = np.flatnonzero(~pfound & stamped)
        todo = np.concatenate([by_api, by_queued])
        q_row = api_row[by_api]
        queued = k["queued"][by_queued].astype(np.int64) - off if by_queued.size else np.zeros(0, np.int64)
        q_tid = np.concatenate([self.api.cols["tid"][q_row], k["owner"][by_queued] if by_queued.size
                                else np.zeros(0, np.int64)])
        q_lo = np.concatenate([self.api.cols["start"][q_row] - off - PY_TIME_SLACK_NS, queued - PY_QUEUED_WINDOW_NS])
        q_hi = np.concatenate([self.api.cols["end"][q_row] - off, queued])
        p_tid, p_t, p_node = self.py.cols["tid"], self.py.cols["t"], self.py.cols["node"]
        for tid in np.unique(q_tid).tolist():
            mine = np.flatnonzero(p_tid == tid)
            if mine.size == 0:
                continue
            mine = mine[np.argsort(p_t[mine], kind="stable")]
            sel = np.flatnonzero(q_tid == tid)
            pos = np.searchsorted(p_t[mine], q_hi[sel], side="right") - 1
            ok = pos >= 0
            ok[ok] = p_t[mine[pos[ok]]] >= q_lo[sel][ok]
            hit = mine[pos[ok]]
            batch["py_node"][todo[sel[ok]]] = p_node[hit]
            used.append(hit[single[todo[sel[ok]]]])
            self.stats["py_by_time"] += int(ok.sum())
        self.py.keep(_unused(len(self.py), np.concatenate(used)))
        return taken

    def _prune(self) -> None:
        """Age out entries that no kernel claimed (failed or foreign launches) and old graph launches."""
        horizon = self._newest_ns
        if not horizon:
            return
        api = self.api.cols
        keep = np.where(api["graph"], api["start"] > horizon - GRAPH_TTL_NS, api["start"] > horizon - UNMATCHED_TTL_NS)
        self.api.keep(keep)
        if len(self.py):
            self.py.keep(self.py.cols["t"] + self.clock_offset_ns > horizon - UNMATCHED_TTL_NS)
        if len(self.ext) > MAX_PENDING_EXTERNAL:
            self.ext.keep(np.arange(len(self.ext)) >= len(self.ext) - MAX_PENDING_EXTERNAL)

    def _name_ids(self, pointers: np.ndarray) -> np.ndarray:
        """Interned name ids for kernel-name pointers; each distinct pointer is read once.

        The pointers seen so far are kept sorted (:attr:`_known_ptrs`), so a batch of known
        names is one binary search per kernel over a handful of entries and a gather, not a
        sort of the batch; only a batch with new pointers sorts its misses."""
        if pointers.size == 0:
            return np.zeros(0, np.int32)
        pointers = pointers.astype(np.uint64, copy=False)    # an int64 search key would compare as float
        known, ids = self._known_ptrs, self._known_ids
        if known.size:
            pos = np.minimum(np.searchsorted(known, pointers), known.size - 1)
            if bool((known[pos] == pointers).all()):
                return ids[pos]
        fresh = np.unique(pointers)
        fresh = fresh[~np.isin(fresh, known)]
        new_ids = np.array([strings.intern(self.name_reader(ptr) if ptr else "<unknown kernel>")
                            for ptr in fresh.tolist()], np.int32)
        merged = np.concatenate([known, fresh])
        order = np.argsort(merged, kind="stable")
        self._known_ptrs, self._known_ids = merged[order], np.concatenate([ids, new_ids])[order]
        return self._known_ids[np.searchsorted(self._known_ptrs, pointers)]


def _read_c_string(pointer: int) -> str:
    """Read a NUL-terminated kernel name owned by CUPTI."""
    return ctypes.string_at(pointer).decode("utf-8", errors="replace")


def _valid_rows(k: dict, stats: dict):
    """Kernel columns without records that carry no timing (start 0 or end < start)."""
    if not k:
        return None
    ok = (k["start"] != 0) & (k["end"] >= k["start"])
    bad = int(ok.size - ok.sum())
    if bad:
        stats["invalid_time"] += bad
        return _take(k, ok)
    return k


def _unstamped(k: dict) -> np.ndarray:
    """Kernel rows of a known owner thread without a ``queued`` time, not replayed from a graph:
    launched while latency timestamps were off (lazy timestamps)."""
    if "queued" not in k or "owner" not in k:
        return np.zeros(k["start"].size, bool)
    return (k["queued"] == 0) & (k["owner"] >= 0) & (k["graphNodeId"] == 0)


def _stamped(k: dict) -> np.ndarray:
    """Kernel rows whose record gives their launch: a ``queued`` time and a known owner thread."""
    if "queued" not in k or "owner" not in k:
        return np.zeros(k["start"].size, bool)
    return (k["queued"] != 0) & (k["owner"] >= 0)


def _assign(out: np.ndarray, mask: np.ndarray, values: np.ndarray) -> None:
    """``out[mask] = values[mask]``, as one whole-column copy when ``mask`` is all True (the
    common batch: every kernel stamped, or every one matched); a boolean index writes row by row."""
    if mask.all():
        out[...] = values
    else:
        out[mask] = values[mask]


def _unused(n: int, used_rows: np.ndarray) -> np.ndarray:
    """Mask of the ``n`` rows not listed in ``used_rows``."""
    keep = np.ones(n, bool)
    keep[used_rows] = False
    return keep


def _take(cols: dict, mask: np.ndarray) -> dict:
    return {name: col[mask] for name, col in cols.items()}


def _concat(parts: list):
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    return {name: np.concatenate([p[name] for p in parts]) for name in parts[0]}
