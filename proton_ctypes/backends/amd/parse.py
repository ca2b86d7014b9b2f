"""Bulk work shared by the AMD backends: copying a vendor buffer out inside its callback,
gathering records into numpy structured arrays, mapping ids, and the launch join.

No function here loops in Python over records on the normal path: a buffer callback does
one ``memmove`` of the header-pointer array, one of the headers and one of the payload
span; parsing gathers whole columns with fancy indexing; the join is a sort plus
``np.searchsorted``.
"""
from __future__ import annotations

import ctypes
from typing import Dict, Iterable, Optional, Tuple

import numpy as np

from ..base import empty_batch
from .layout import RECORD_HEADER

#: largest payload span copied with one memmove, relative to the bytes the records need
_SPAN_SLACK = 2
_SPAN_EXTRA = 64 * 1024
#: no record we read is larger; a bigger ``size`` field is treated as corrupt and clamped
_MAX_RECORD = 4096
#: A launch-log entry the backends keep per launch: (correlation id, launch ns, thread id, python node).
LAUNCH_LOG_FIELDS = 4
#: Launches kept for kernels still to come, by age.
LAUNCH_KEEP_NS = 30 * 10**9


def drain(dq) -> list:
    """Pop everything from a ``collections.deque`` filled by other threads (no entry is lost:
    an append racing with the drain lands in this drain or the next)."""
    out = []
    try:
        while True:
            out.append(dq.popleft())
    except IndexError:
        return out


def _copy(addr: int, nbytes: int) -> bytes:
    return ctypes.string_at(addr, nbytes) if nbytes else b""


def _record_size(addr: int, min_size: int) -> int:
    size = int(ctypes.c_uint64.from_address(addr).value)
    return min(max(size, min_size), _MAX_RECORD)


def copy_sdk_buffer(headers: int, n: int, category: int, kinds: Iterable[int],
                    min_size: int = 56) -> Optional[Tuple[np.ndarray, np.ndarray, bytes]]:
    """Copy the records of a rocprofiler-sdk buffer callback out of the SDK's memory.

    ``headers`` is the ``rocprofiler_record_header_t**`` argument, ``n`` its length.
    Returns ``(kind, offset, blob)`` for the headers of ``category`` whose kind is in
    ``kinds``: ``blob[offset[i]:]`` holds record *i* (whose first u64 is its size), or
    None when there is none. Records are not valid after the callback returns (the SDK
    recycles its ring buffer), hence the copy; the common case (headers contiguous in the
    SDK's header vector, payloads in one ring buffer) costs three memmoves.
    """
    if n == 0 or not headers:
        return None
    ptrs = np.frombuffer(_copy(headers, 8 * n), dtype="<u8")
    if n == 1 or bool(np.all(np.diff(ptrs.astype(np.int64)) == RECORD_HEADER.itemsize)):
        hdr = np.frombuffer(_copy(int(ptrs[0]), RECORD_HEADER.itemsize * n), dtype=RECORD_HEADER)
    else:  # scattered headers: one small copy each
        hdr = np.frombuffer(b"".join(_copy(int(p), RECORD_HEADER.itemsize) for p in ptrs), dtype=RECORD_HEADER)
    keep = (hdr["category"] == category) & np.isin(hdr["kind"], np.fromiter(kinds, dtype=np.uint32))
    if not keep.any():
        return None
    kind = hdr["kind"][keep].copy()
    pay = hdr["payload"][keep].astype(np.uint64)
    lo, hi = int(pay.min()), int(pay.max())
    last = _record_size(hi, min_size)
    span = hi + last - lo
    if span <= _SPAN_SLACK * len(pay) * max(last, 256) + _SPAN_EXTRA:
        return kind, (pay - np.uint64(lo)).astype(np.int64), _copy(lo, span)
    # payloads far apart (not one ring buffer): copy each by its own size field
    parts, offs, pos = [], np.empty(len(pay), dtype=np.int64), 0
    for i, p in enumerate(pay.tolist()):
        size = _record_size(p, min_size)
        pad = (-pos) % 8
        parts.append(b"\0" * pad + _copy(p, size))
        pos += pad
        offs[i] = pos
        pos += size
    return kind, offs, b"".join(parts)


def gather(blob: bytes, offsets: np.ndarray, dtype: np.dtype, fields: Optional[Iterable[str]] = None) -> np.ndarray:
    """Records of ``dtype`` starting at ``offsets`` in ``blob``, as a contiguous structured array.

    Equal spacing (a single-kind run) is a zero-copy strided view copied once; otherwise
    each field (only ``fields`` when given; the others stay zero) is gathered with one
    fancy index over an aligned view of the blob.
    """
    n = len(offsets)
    out = np.zeros(n, dtype=dtype)
    if n == 0:
        return out
    raw = np.frombuffer(blob, dtype=np.uint8)
    o0 = int(offsets[0])
    if n > 1:
        d = np.diff(offsets)
        stride = int(d[0])
    else:
        stride = dtype.itemsize
    if (n == 1 or bool(np.all(d == stride))) and stride >= dtype.itemsize \
            and o0 + stride * (n - 1) + dtype.itemsize <= len(raw):
        view = np.ndarray((n,), dtype=dtype, buffer=raw, offset=o0, strides=(stride,))
        out[...] = view
        return out
    need = int(offsets.max()) + dtype.itemsize
    if need > len(raw):  # a record shorter than the dtype at the end: pad with zeros
        raw = np.concatenate([raw, np.zeros(need - len(raw), dtype=np.uint8)])
    wanted = set(dtype.names if fields is None else fields)
    for name, (fdt, foff) in dtype.fields.items():
        if name not in wanted:
            continue
        size = fdt.itemsize
        pos = offsets + foff
        if bool(np.all(pos % size == 0)):
            usable = len(raw) - len(raw) % size
            out[name] = raw[:usable].view(fdt)[pos // size]
        else:
            idx = pos[:, None] + np.arange(size)
            out[name] = raw[idx].copy().view(fdt).reshape(n)
    return out


class IdMap:
    """Maps vendor ids (u64) to small values through a dict, in bulk (``np.unique`` + take)."""

    def __init__(self, default=0):
        self.table: Dict[int, int] = {}
        self.default = default

    def lookup(self, keys: np.ndarray, assign_new: bool = False) -> np.ndarray:
        """Values of ``keys``; unknown keys get ``default``, or the next free index when ``assign_new``."""
        if len(keys) == 0:
            return np.zeros(0, dtype=np.int64)
        uniq, inv = np.unique(keys, return_inverse=True)
        vals = np.empty(len(uniq), dtype=np.int64)
        for i, k in enumerate(uniq.tolist()):
            v = self.table.get(k)
            if v is None:
                if assign_new:
                    v = self.table[k] = len(self.table)
                else:
                    v = self.default
            vals[i] = v
        return vals[inv.reshape(-1)]


class LaunchTable:
    """Launch-API facts keyed by correlation id, kept across parses for a few rounds.

    A kernel's record may come one flush before or after its launch-API record (the API
    record is written at API exit, the kernel record at completion, which for a long
    kernel is many flushes later), and a graph launch serves several kernels, so an entry
    is kept while it is younger than ``keep_rounds`` parses or than ``keep_ns`` behind
    the newest launch.
    """

    COLS = ("corr", "launch", "tid", "py")

    def __init__(self, keep_rounds: int = 3, keep_ns: int = LAUNCH_KEEP_NS):
        self.keep = keep_rounds
        self.keep_ns = keep_ns
        self.cols = {c: np.zeros(0, dtype=np.int64) for c in self.COLS}
        self.age = np.zeros(0, dtype=np.int64)

    def add(self, corr, launch, tid, py=None) -> None:
        """Add rows (later rows win over earlier ones for the same correlation id)."""
        corr = np.asarray(corr, dtype=np.int64)
        if len(corr) == 0:
            return
        py = np.full(len(corr), -1, dtype=np.int64) if py is None else np.asarray(py, dtype=np.int64)
        new = {"corr": corr, "launch": np.asarray(launch, dtype=np.int64),
               "tid": np.asarray(tid, dtype=np.int64), "py": py}
        for c in self.COLS:
            self.cols[c] = np.concatenate([self.cols[c], new[c]])
        self.age = np.concatenate([self.age, np.zeros(len(corr), dtype=np.int64)])

    def lookup(self, corr: np.ndarray):
        """``(found, launch, tid, py)`` for each correlation id (first added entry wins)."""
        n = len(corr)
        found = np.zeros(n, dtype=bool)
        launch = np.full(n, -1, dtype=np.int64)
        tid = np.full(n, -1, dtype=np.int64)
        py = np.full(n, -1, dtype=np.int64)
        keys = self.cols["corr"]
        if n == 0 or len(keys) == 0:
            return found, launch, tid, py
        order = np.argsort(keys, kind="stable")
        sk = keys[order]
        i = np.searchsorted(sk, corr.astype(np.int64), side="left")
        ok = i < len(sk)
        ok[ok] = sk[i[ok]] == corr.astype(np.int64)[ok]
        j = order[i[ok]]
        found[ok] = True
        launch[ok] = self.cols["launch"][j]
        tid[ok] = self.cols["tid"][j]
        py[ok] = self.cols["py"][j]
        return found, launch, tid, py

    def tick(self) -> None:
        """One parse round passed: forget entries older than ``keep_rounds``."""
        self.age += 1
        keep = self.age <= self.keep
        if len(keep) and not keep.all():
            keep |= self.cols["launch"] >= self.cols["launch"].max() - self.keep_ns
        if not keep.all():
            for c in self.COLS:
                self.cols[c] = self.cols[c][keep]
            self.age = self.age[keep]

    def __len__(self) -> int:
        return len(self.age)


def strip_kd(name: str) -> str:
    """Drop the ``.kd`` (kernel descriptor) suffix AMDGPU symbols carry, as Proton does."""
    return name[:-3] if name.endswith(".kd") and len(name) > 3 else name


KCOLS = ("corr", "tid", "start", "end", "device", "stream", "name_id")


def _no_rows() -> dict:
    return {k: np.zeros(0, dtype=np.int64) for k in KCOLS}


class KernelJoiner:
    """Joins kernel rows to launch rows by correlation id and builds kernel batches.

    Kernel rows (``KCOLS``, times already in ``time.time_ns()``; ``tid`` -1 when the
    kernel record has none: the launch row's thread is used) without a launch row
    wait one parse round (their launch record may be in the next buffer); after that, or
    at the final flush, they get ``launch_ns = start_ns`` (counted in ``unmatched``).
    Rows with ``start >= end`` are skipped as Proton skips them (counted in ``invalid``).
    """

    def __init__(self, keep_rounds: int = 3):
        self.keep_rounds = keep_rounds
        self.reset()
        self.invalid = 0
        self.unmatched = 0

    def reset(self) -> None:
        """Forget pending launches and carried kernels (a new session starts)."""
        self.launches = LaunchTable(self.keep_rounds)
        self.carry = _no_rows()

    def add_launches(self, corr, launch, tid, py=None) -> None:
        """Launch-API facts (``launch`` in ``time.time_ns()``); earlier additions win on ties."""
        self.launches.add(corr, launch, tid, py)

    def join(self, rows: dict, final: bool = False) -> np.ndarray:
        """A kernel batch (:data:`~..base.KERNEL_DTYPE`) of ``rows`` plus the carried ones."""
        n_carry = len(self.carry["corr"])
        cols = {k: np.concatenate([self.carry[k], np.asarray(rows[k]).astype(np.int64)]) for k in KCOLS}
        carried = np.arange(len(cols["corr"])) < n_carry
        self.launches.tick()
        found, launch, ltid, py = self.launches.lookup(cols["corr"])
        if final:
            self.carry = _no_rows()
        else:
            wait = ~found & ~carried
            self.carry = {k: v[wait] for k, v in cols.items()}
            keep = ~wait
            cols = {k: v[keep] for k, v in cols.items()}
            found, launch, ltid, py = found[keep], launch[keep], ltid[keep], py[keep]
        valid = cols["start"] < cols["end"]
        self.invalid += int((~valid).sum())
        self.unmatched += int((~found & valid).sum())
        launch = np.where(found, launch, cols["start"])
        tid = np.where(cols["tid"] >= 0, cols["tid"], ltid)
        batch = empty_batch(int(valid.sum()))
        for field, col in (("tid", tid), ("launch_ns", launch), ("start_ns", cols["start"]),
                           ("end_ns", cols["end"]), ("device", cols["device"]), ("stream", cols["stream"]),
                           ("name_id", cols["name_id"]), ("corr", cols["corr"]), ("py_node", py)):
            batch[field] = col[valid]
        return batch
