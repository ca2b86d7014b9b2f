"""Launch positions: each kernel placed among its thread's scope edges by where CUPTI wrote its record.

Measured on an H100 (CUPTI 13; ``tests/gpu/probe_buffer_fill.py``, ``probe_buffer_position.py``):
CUPTI writes a kernel's record into the launching thread's activity buffer *during the launch
call* (marked incomplete, completed in place later), one record slot per launch, in launch
order.  So a thread that counts the records in its current buffer at a scope edge knows which
of its kernels were launched before the edge, with no clock in the record: CUPTI's latency
timestamps (about 2 us of CPU per launch and ~100 bytes of CUPTI memory per kernel that no flush
gives back, ``docs/collection.md``) can stay off.

**Positions.**  Every buffer handed to CUPTI is all zeros (the pool zeroes it when it is
freed, :mod:`.buffers`) and is numbered; its *base* is its number
times :attr:`LaunchPositions.words_per_buffer`, and the record at byte offset ``o`` has the
position ``base + o // 4``.  A thread's position now is the base of its current buffer plus the
first empty record slot (a scan from the slot found last time, one record at a time).

**Marks** ``(time_ns, position)``, per thread: at every scope edge (:meth:`LaunchPositions.clock`,
which the engine uses as its log clock while such a session runs), at every buffer request (on
the launching thread, inside the launch: its time and the new buffer's base) and, for every
thread, at every context change (:meth:`LaunchPositions.snapshot`: a session activated, a view
made).  A kernel at position ``p`` was launched after every mark of its thread with a position
<= ``p`` and before every later one, so its launch time is the latest such mark's time plus
1 ns (and 1 ns per record since that mark): the rest of the join (:mod:`.join`,
:mod:`proton_ctypes.core.attribution`) is unchanged.

**The edge cursor.**  A thread's per-thread clock (:meth:`LaunchPositions.thread_clock`) carries its
:class:`ThreadPositions` as ``cursor``: a scope edge that finds no record written since its
view's last entry (``words[i]`` still 0) and nothing that may time a kernel since rewrites that
entry's code instead of reading the clock (:mod:`proton_ctypes.core.views`).  ``last`` says the
latter: a clock read sets it to the positions themselves (before it reads the time), and the
edge that appended claims it for its log (``last = log``) only if it is still that; graph
callbacks on the thread (:meth:`LaunchPositions.touch`) and any thread's buffer request or
context change (every thread: a thread with no view of its own takes the starter's context at
its first launch) set it to None.  A request reads its time before it ends the rewrites: a
rewrite in between is concurrent with the launch, and none after it can reach an entry older
than the request.  Once the positions cannot be trusted (:meth:`LaunchPositions.distrust`, or a
scan that found no empty slot), ``words`` reads every slot as written.

**Buffers.**  A thread's edges read its current buffer after CUPTI handed it back, so a buffer
still current for its thread is not recycled when parsed; it is at the thread's next request
(:meth:`LaunchPositions.release`), or when the thread has ended (:meth:`ended_threads`).
"""
from __future__ import annotations

import os
import threading
import time
from typing import Dict, List, Optional

import numpy as np

from ..._tasks import ended

#: bytes of every buffer never handed to CUPTI: a zero word always ends a thread's scan
SENTINEL_BYTES = 8
WORD_BYTES = 4
#: how long after the mark before it a kernel is placed (plus 1 ns per record in between): a
#: launch takes microseconds, so the kernel stays before the thread's next mark
MARK_AFTER_NS = 1

#: ``0``: the per-thread clocks carry no edge cursor, so every scope edge appends its entry (a
#: diagnostic: the rewrite's A/B on one host, ``proton_ctypes:env:PROTON_CTYPES_LOG_REWRITE=0`` in
#: ``bench/split.py``, ``longrun.py`` or ``threads.py``)
LOG_REWRITE_ENV = "PROTON_CTYPES_LOG_REWRITE"

_ZERO_VIEW = memoryview(bytearray(SENTINEL_BYTES)).cast("I")


class _Busy:
    """:attr:`ThreadPositions.words` once the positions cannot be trusted: every slot reads
    written, so no scope edge rewrites an entry (:mod:`proton_ctypes.core.views`)."""

    __slots__ = ()

    def __getitem__(self, i):
        return 1


BUSY = _Busy()


class ThreadPositions:
    """One launching thread's current buffer, scan hint and marks: its own marks in
    :attr:`marks` (written by that thread only), other threads' snapshots of it in :attr:`snaps`,
    and what the collector took of both in :attr:`kept`."""

    __slots__ = ("tid", "buf", "i", "t", "q", "marks", "snaps", "kept", "address", "words", "last")

    def __init__(self, tid: int):
        self.tid = tid
        #: ``(uint32 view of the current buffer, its base)``: one attribute, read atomically
        self.buf = (_ZERO_VIEW, 0)
        #: word index of the first record slot not known to be written
        self.i = 0
        #: the last edge's mark, not yet in :attr:`marks` (it is, once a later edge moved on); a
        #: trace scope edge with ``words[i]`` 0 moves ``t`` itself, as the clock would (core/views.py)
        self.t = 0
        self.q = 0
        #: flat ``[t0, q0, t1, q1, ...]`` (two appends per mark: cheapest for the thread)
        self.marks: List[int] = []
        #: ``(t, q)`` marks written by other threads (:meth:`LaunchPositions.snapshot`)
        self.snaps: List[tuple] = []
        #: ``(n, 2)`` int64 rows ``(t, q)`` taken by the collector (:meth:`LaunchPositions.settle` bounds them)
        self.kept = np.zeros((0, 2), np.int64)
        #: the address of the current buffer (0: none yet)
        self.address = 0
        #: the edge cursor (:mod:`proton_ctypes.core.views`, "Rewriting the last entry"), read by
        #: the thread's scope edges: ``words[i]`` is 0 while no record was written since the
        #: thread's last mark (the uint32 view of ``buf``, or :data:`BUSY`), and ``last`` is the
        #: view log whose last entry that mark was taken for (``self``: a clock read no entry
        #: claimed yet; None: anything else since, module docstring)
        self.words = _ZERO_VIEW
        self.last = None


class _Local(threading.local):
    state: Optional[ThreadPositions] = None


class LaunchPositions:
    """The marks of every launching thread and the clock that writes them (module docstring)."""

    def __init__(self, buffer_bytes: int, kernel_stride: int):
        self.words_per_buffer = int(buffer_bytes) // WORD_BYTES
        self.step = int(kernel_stride) // WORD_BYTES
        #: native thread id -> its positions (a thread's own Python thread states may differ:
        #: a vendor thread's callbacks and its hooks, so the thread-local is only a cache)
        self.threads: Dict[int, ThreadPositions] = {}
        self._local = _Local()
        #: buffers numbered so far (the next one's number is one more)
        self._numbered = 0
        #: address -> (native id, base) of every buffer requested and not yet released
        self.buffers: Dict[int, tuple] = {}
        #: addresses parsed while still their thread's current buffer (recycled at its next request)
        self.retired = set()
        #: native ids of threads that ended (the buffer pool's :attr:`~.buffers.BufferPool.gone`,
        #: shared): a thread that is given such an id again takes it out (:meth:`_own`)
        self.gone = set()
        self._lock = threading.Lock()
        #: False once the positions cannot be trusted (:meth:`distrust`)
        self.trusted = True
        #: whether the per-thread clocks carry their edge cursor (:data:`LOG_REWRITE_ENV`)
        self.rewrites = os.environ.get(LOG_REWRITE_ENV, "1").strip() != "0"
        self.clock = self._make_clock()

    # ------------------------------------------------------------------ the launching thread
    def _own(self, tid: int) -> ThreadPositions:
        """The positions of thread ``tid``, called from that thread, alive: made if need be, and
        no longer among the ended ones (the id may have been a thread's that ended)."""
        with self._lock:
            st = self.threads.get(tid)
            if st is None:
                st = self.threads[tid] = ThreadPositions(tid)
                if not self.trusted:
                    st.words = BUSY
            self.gone.discard(tid)
        return st

    def _state(self) -> ThreadPositions:
        st = self._own(threading.get_native_id())
        self._local.state = st
        return st

    def on_request(self, address: int, array: np.ndarray) -> int:
        """CUPTI asked the calling (launching) thread for a buffer: number ``array`` (at
        ``address``, all zeros), make it the thread's current one and mark its base at this
        time.  Returns the address of the thread's previous buffer if it was parsed already (to
        be recycled now), else 0."""
        st = self._local.state or self._state()
        with self._lock:              # against release(): a parsed buffer is retired or recycled, once
            self._numbered += 1
            base = self._numbered * self.words_per_buffer
            st.i = 0                  # before the view: a reader takes the view, then the index
            words = memoryview(array).cast("I")
            st.buf = (words, base)
            st.words = words if self.trusted else BUSY
            self.buffers[address] = (st.tid, base)
            previous, st.address = st.address, address
            recycle = previous in self.retired
            self.retired.discard(previous)
        now = time.time_ns()          # before the rewrites end: a rewrite in between is concurrent
        self._end_rewrites()          # with this launch, one after it would not be
        marks = st.marks
        marks.append(now)
        marks.append(base)
        return previous if recycle else 0

    def thread_clock(self, tid: int):
        """:attr:`clock` bound to thread ``tid``'s positions (no thread-local lookup per call);
        only that thread may call it.  Its ``cursor`` is those positions: the edge cursor of the
        views made with it (:mod:`proton_ctypes.core.views`)."""
        st = self._own(tid)
        clock = self._make_clock(st)
        if self.rewrites:
            clock.cursor = st
        return clock

    def _end_rewrites(self) -> None:
        """A mark is being written that may time another thread's kernels (a buffer request, a
        context change): a thread with no view of its own takes the starter thread's context at
        its first launch (:mod:`proton_ctypes.core.attribution`), so from now on no thread's edge
        may rewrite the entry in force."""
        for st in list(self.threads.values()):
            st.last = None

    def touch(self) -> None:
        """Something of the calling thread was placed by its time, not by its record (a graph
        node captured, a graph launched): its next scope edge writes an entry of its own."""
        st = self._local.state or self.threads.get(threading.get_native_id())
        if st is not None:
            st.last = None

    def distrust(self) -> None:
        """The positions cannot be trusted (kernels are placed by timestamps from now on): no
        scope edge rewrites an entry any more, whatever its thread's buffer reads."""
        self.trusted = False
        for st in list(self.threads.values()):
            st.words = BUSY

    def _make_clock(self, bound: Optional[ThreadPositions] = None):
        local, step, state = self._local, self.step, self._state

        def clock(_now=time.time_ns):
            """``time.time_ns()``, marking the calling thread's launch position at that time."""
            st = bound
            if st is None:
                st = local.state
                if st is None:
                    st = state()
            # read, no entry claimed yet: a scope edge's entry claims it (``last = log``) only if no
            # other thread ended the rewrites since this store.  The store comes before the time
            # read: a request or context change that ends them after it unclaims the entry, and
            # one that ended them before it had read its time before this entry's
            st.last = st
            t = _now()
            v, base = st.buf
            i = st.i
            if v[i]:                    # launches since the last edge: the last edge's mark is final
                try:
                    i += step
                    while v[i]:
                        i += step
                except IndexError:      # records of another size than ``step`` (the collector
                    i = len(v) - 1      # then switches the timestamps on): never raise here
                    st.words = BUSY
                st.i = i
                marks = st.marks
                marks.append(st.t)
                marks.append(st.q)
                st.q = base + i
            st.t = t
            return t
        return clock

    # ------------------------------------------------------------------ other threads
    def snapshot(self, now_ns: int) -> None:
        """Mark every thread's position at ``now_ns`` (taken before this call): a context change."""
        self._end_rewrites()
        step = self.step
        for st in list(self.threads.values()):
            v, base = st.buf
            i = st.i
            try:
                while v[i]:
                    i += step
            except IndexError:          # records of another size than ``step`` (see clock)
                i = len(v) - 1
            st.snaps.append((int(now_ns), base + i))

    def base_of(self, address: int) -> int:
        """The base of buffer ``address`` (-1: not requested through this object)."""
        entry = self.buffers.get(address)
        return -1 if entry is None else entry[1]

    def marks_of(self, tid: int) -> Optional[tuple]:
        """``(positions, latest time at or before each)``: thread ``tid``'s marks sorted by
        position, times as a running maximum (None: no such thread).  The marks written since
        the last call move to ``kept`` (the collector's thread only)."""
        st = self.threads.get(tid)
        if st is None:
            return None
        last = (st.t, st.q)        # before the list: a later edge moves it there first
        rows = np.concatenate([self._take(st), np.array([last], np.int64)])
        q, t = rows[:, 1], rows[:, 0]
        if not bool((q[1:] >= q[:-1]).all()):  # in order unless another thread's snapshot came between
            order = np.argsort(q, kind="stable")
            q, t = q[order], t[order]
        return q, np.maximum.accumulate(t)

    def launch_times(self, marks: tuple, positions: np.ndarray) -> np.ndarray:
        """The launch time (``time_ns``) of each kernel at ``positions`` of the thread whose
        :meth:`marks_of` are ``marks``: the latest mark at or before its position, plus
        :data:`MARK_AFTER_NS`, plus one ns per record between that mark's position and its own
        (launch order kept among the kernels of one interval; launches take far longer than a
        ns each); 0 where no mark is at or before it (the caller leaves that launch unknown)."""
        q, t = marks
        at = np.searchsorted(q, positions, side="right") - 1
        ok = at >= 0
        at = np.where(ok, at, 0)
        return np.where(ok, t[at] + MARK_AFTER_NS + (positions - q[at]) // self.step, 0)

    @staticmethod
    def _take(st: ThreadPositions) -> np.ndarray:
        """Move the thread's new marks and snapshots into ``kept`` (the collector's thread only)."""
        marks, snaps = st.marks, st.snaps
        n = len(marks) & ~1        # whole marks: the thread may be between its two appends
        s = len(snaps)
        if not n and not s:
            return st.kept
        parts = [st.kept]
        if n:
            # straight from the list, no slice copy (whose increfs touch every int once more):
            # only its first n items are read, and the owner thread only appends
            parts.append(np.fromiter(marks, np.int64, n).reshape(-1, 2))
            del marks[:n]
        if s:
            parts.append(np.array(snaps[:s], np.int64).reshape(-1, 2))
            del snaps[:s]
        st.kept = np.concatenate(parts)
        return st.kept

    def settle(self) -> None:
        """Forget the marks no kernel still to come can need: for each thread, those at or below
        the base of its oldest buffer not yet parsed (or of any buffer still to be requested)
        collapse into one."""
        lowest = {}
        for tid, base in list(self.buffers.values()):
            if base < lowest.get(tid, base + 1):
                lowest[tid] = base
        upcoming = (self._numbered + 1) * self.words_per_buffer
        for st in list(self.threads.values()):
            kept = self._take(st)
            old = kept[:, 1] <= lowest.get(st.tid, upcoming)
            if int(old.sum()) > 1:
                merged = np.array([[kept[old, 0].max(), kept[old, 1].max()]], np.int64)
                st.kept = np.concatenate([merged, kept[~old]])

    # ------------------------------------------------------------------ buffers
    def release(self, address: int) -> bool:
        """Buffer ``address`` was parsed: whether it can be recycled now (False: it is still its
        thread's current buffer, and is kept in :attr:`retired` until that thread moves on)."""
        with self._lock:
            entry = self.buffers.pop(address, None)
            if entry is None:
                return True
            st = self.threads.get(entry[0])
            if st is not None and st.address == address:
                self.retired.add(address)
                return False
            return True

    def ended_threads(self, look: bool = True) -> list:
        """Forget the threads that ended and whose buffers were all parsed; return their retired
        buffers' addresses (to recycle).  A thread has ended when it is in :attr:`gone`, or, with
        ``look`` (a syscall per thread: not at every parse), when Linux no longer lists it
        (a thread whose Python state was never torn down)."""
        out = []
        gone = self.gone
        with self._lock:
            pending = {tid for tid, _base in self.buffers.values()}
            for tid, st in list(self.threads.items()):
                if tid in pending or not (tid in gone or (look and ended(tid))):
                    continue
                del self.threads[tid]
                # the thread's clock may live on in its views until they go: not its buffer
                st.buf = (_ZERO_VIEW, 0)
                st.words, st.i, st.last = BUSY, 0, None
                if st.address in self.retired:
                    self.retired.discard(st.address)
                    out.append(st.address)
        return out
