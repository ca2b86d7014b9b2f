"""Activity buffers owned by us: a pool of 8-byte aligned numpy arrays that grows with the threads.

CUPTI asks for an empty buffer through the *request* callback and hands it back full
through the *complete* callback, on a CUPTI-owned thread.  The complete callback only
appends ``(address, valid_bytes)`` to a deque (atomic under the GIL) and pokes an event;
parsing happens later on a Python thread, which then calls :meth:`BufferPool.release`.

**CUPTI keeps one buffer per launching thread** (its per-thread activity buffers, on by
default): every thread that launches holds a buffer of its own, and its records go
nowhere else.  So the pool never caps the number of buffers by a small constant -- a
request declined there loses that thread's kernels.  It grows as threads need buffers,
and only a ceiling that protects the machine (:func:`buffer_limit_bytes`: an eighth of the
physical memory by default, ``PROTON_CTYPES_BUFFER_LIMIT_MB`` to set it) stops it.  After
each parse the free list is trimmed to what the threads hold (:meth:`BufferPool.trim`),
so the memory follows the threads.

At the ceiling, a request gets a *spare* buffer: allocated beyond the ceiling only while
every pool buffer is out, never attributed, its records counted as lost by the consumer
(:meth:`BufferPool.is_spare`) and the buffer recycled as a spare -- so a loss is always
counted, never silent.  Only when even a spare cannot be had (more than
:data:`MAX_SPARES` out, or no memory) is a request declined, and then CUPTI drops the
records (we count the declined requests).  CUPTI before API version 27 can crash on a
declined request, so there (``can_decline=False``) spares are never refused.

CUPTI asks for a thread's buffer on that thread, so the request callback notes the calling
thread as the buffer's **owner** (:meth:`BufferPool.owner`; measured on the H200: every
kernel record lies in a buffer requested by its launching thread, graph replays and
autograd's thread included) and the time of the request (:meth:`BufferPool.held_since`:
a thread's records older than its oldest buffer still out have all been handed back).

A thread that ends may leave its last buffer with CUPTI until a flush: the pool learns of the
end from the thread's own thread-local storage (:attr:`BufferPool.gone`) and wakes the consumer,
which then has CUPTI hand the buffer back.  Buffers are mappings of their own, not malloc's, which
would keep a buffer freed by a thread in that thread's arena.

With launch positions (:attr:`BufferPool.positions`, :mod:`.positions`), every buffer CUPTI
gets is all zeros (CUPTI gets all of it but a zero sentinel) and is numbered on its thread at
the request; a parsed buffer that is still its thread's current one waits for that thread's
next request before it is recycled.  Every free buffer is all zeros: new ones come zeroed from
the allocator, and a buffer is zeroed when it goes back to the free list (on the collector's
thread, after its parse), not at the request, which the launching thread pays inside its launch.
Only the bytes CUPTI wrote are zeroed (its valid size, :data:`ZERO_MARGIN_BYTES` more): the rest
was never touched, so a large buffer costs its whole size neither in time nor in memory.
"""
from __future__ import annotations

import collections
import mmap
import os
import threading
import time
from typing import Dict, Optional

import numpy as np

from ..threadstate import keep_thread_state
from .layout import RECORD_ALIGNMENT
from .lib import BUFFER_COMPLETE_FUNC, BUFFER_REQUEST_FUNC
from .positions import SENTINEL_BYTES

MIB = 1 << 20
#: the size of each buffer unless the user asks for another (``TRITON_PROFILE_BUFFER_SIZE``):
#: smaller than Proton's 64 MiB, because CUPTI keeps one buffer per launching thread here
DEFAULT_BUFFER_BYTES = 4 * MIB
#: the least size a user's request gets: a few hundred kernel records, so that CUPTI does not
#: ask for a buffer (a call into Python) every few launches
MIN_REQUESTED_BUFFER_BYTES = 64 << 10
#: the ceiling on buffer memory, in MiB (environment), else physical memory / LIMIT_FRACTION
LIMIT_ENV = "PROTON_CTYPES_BUFFER_LIMIT_MB"
LIMIT_FRACTION = 8
#: the ceiling where the physical memory cannot be read
FALLBACK_LIMIT_BYTES = 4096 * MIB
MIN_BUFFERS = 2                   # one with CUPTI while the other waits to be parsed
#: free buffers kept for reuse beyond those out (CUPTI asks for the next one before it returns the last)
MIN_FREE_KEPT = 2
#: spare buffers out at once at most where a request may be declined
MAX_SPARES = 64
ALIGNMENT = RECORD_ALIGNMENT      # CUPTI's ACTIVITY_RECORD_ALIGNMENT
#: zeroed past the valid bytes CUPTI reported for a buffer: CUPTI writes a kernel's record in place
#: during its launch, so a record begun as the buffer was completed would lie just past them (one
#: page costs ~0.1 us to zero)
ZERO_MARGIN_BYTES = 4096


def pool_buffer_bytes(explicit=None, requested=None) -> int:
    """The size of each buffer: ``explicit`` (a backend's constructor argument) as it is; else
    the user's ``requested`` size (``TRITON_PROFILE_BUFFER_SIZE``) rounded up to CUPTI's record
    alignment and to at least :data:`MIN_REQUESTED_BUFFER_BYTES`; else :data:`DEFAULT_BUFFER_BYTES`."""
    if explicit is not None:
        return int(explicit)
    if requested is None:
        return DEFAULT_BUFFER_BYTES
    size = max(int(requested), MIN_REQUESTED_BUFFER_BYTES)
    return -(-size // ALIGNMENT) * ALIGNMENT


def buffer_limit_bytes(environ=None) -> int:
    """The ceiling on activity-buffer memory: ``PROTON_CTYPES_BUFFER_LIMIT_MB`` if set, else an
    eighth of the physical memory (:data:`FALLBACK_LIMIT_BYTES` where that cannot be read)."""
    env = os.environ if environ is None else environ
    value = env.get(LIMIT_ENV, "").strip()
    if value:
        try:
            mb = float(value)
        except ValueError:
            raise ValueError(f"{LIMIT_ENV}={value!r}: expected a number of MiB") from None
        if mb <= 0:
            raise ValueError(f"{LIMIT_ENV}={value!r}: expected a positive number of MiB")
        return int(mb * MIB)
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // LIMIT_FRACTION
    except (ValueError, OSError, AttributeError):
        return FALLBACK_LIMIT_BYTES


class _Gone:
    """Held only by a requesting thread's thread-local storage (:attr:`BufferPool._local`):
    dropped when the thread ends, it notes the thread in :attr:`BufferPool.gone` and wakes the
    consumer, which can then have CUPTI hand back the buffer the thread still holds (a program
    making threads all day would otherwise hold one per thread until the next reclaim)."""

    __slots__ = ("pool", "tid")

    def __init__(self, pool: "BufferPool", tid: int):
        self.pool, self.tid = pool, tid

    def __del__(self):
        try:
            self.pool.gone.add(self.tid)
            self.pool.wake.set()
        except Exception:  # interpreter teardown
            pass


class BufferPool:
    """A pool of activity buffers plus the two ctypes callbacks CUPTI calls."""

    def __init__(self, buffer_bytes: int = DEFAULT_BUFFER_BYTES, max_buffers: Optional[int] = None,
                 can_decline: bool = True):
        """``max_buffers``: the ceiling in buffers (default: :func:`buffer_limit_bytes` worth);
        ``can_decline``: whether a request may be declined (CUPTI >= 27)."""
        self._ceiling_asked = max_buffers           # for resized(): None recomputes the default
        if max_buffers is None:
            max_buffers = max(MIN_BUFFERS, buffer_limit_bytes() // max(1, int(buffer_bytes)))
        if buffer_bytes % ALIGNMENT or buffer_bytes <= 0 or max_buffers < MIN_BUFFERS:
            raise ValueError("buffer_bytes must be a positive multiple of 8 and max_buffers >= 2")
        self.buffer_bytes = int(buffer_bytes)
        self.max_buffers = int(max_buffers)
        self.can_decline = bool(can_decline)
        self._free = []                    # aligned uint8 views ready to hand out
        self._out = {}                     # address -> aligned view, handed to CUPTI or awaiting parse
        self._owners = {}                  # address -> (native id of the requesting thread, time_ns of the request)
        self._allocated = 0
        self._spare_free = []              # spare buffers (beyond max_buffers) ready to hand out
        self._spares = set()               # addresses of every spare buffer
        self._lock = threading.Lock()
        #: ``(address, valid_bytes)`` of completed buffers, in completion order.
        self.completed = collections.deque()
        #: Set by the complete callback; a consumer thread may wait on it.
        self.wake = threading.Event()
        #: Requests declined (no spare could be had).
        self.refused = 0
        #: Requests answered with a spare buffer because the pool was at its ceiling.
        self.spared = 0
        self.requests = 0
        self.completions = 0
        #: The most buffers out at once (with CUPTI or awaiting parse).
        self.peak_outstanding = 0
        #: launch positions (:class:`.positions.LaunchPositions`) while a session places kernels
        #: by them, else None
        self.positions = None
        self._retired = {}                 # address -> (view, used): parsed, still a thread's current buffer
        self._dirty = []                   # (address, view, used) recycled on a launching thread, to zero
        #: native ids of the requesting threads that ended (:class:`_Gone`), until none of their
        #: buffers is out any more (:meth:`forget_gone`)
        self.gone = set()
        self._local = threading.local()
        # The ctypes callbacks: keep references for the life of the process (CUPTI keeps the pointers).
        self.request_callback = BUFFER_REQUEST_FUNC(self._on_request)
        self.complete_callback = BUFFER_COMPLETE_FUNC(self._on_complete)
        #: the pool this one replaced (:meth:`resized`), kept alive: CUPTI may still hold its callbacks
        self._previous = None

    # ------------------------------------------------------------------ called by CUPTI
    def _on_request(self, p_buffer, p_size, p_max_records):
        """CUPTI wants an empty buffer: a free one, a new one, a spare at the ceiling, else decline."""
        keep_thread_state()
        self.requests += 1
        try:
            view = self._take()
            if view is None:
                view = self._take_spare()
                if view is not None:
                    self.spared += 1
        except MemoryError:
            view = None
        if view is None:
            self.refused += 1
            p_buffer[0] = None
            p_size[0] = 0
        else:
            address = view.ctypes.data
            tid = threading.get_native_id()
            self._owners[address] = (tid, time.time_ns())
            if getattr(self._local, "gone", None) is None:    # the thread's first request
                self.gone.discard(tid)     # a thread that ended had this native id before
                self._local.gone = _Gone(self, tid)
            size = self.buffer_bytes
            positions = self.positions
            if positions is not None:
                self._recycle(positions.on_request(address, view))
                size -= SENTINEL_BYTES
            p_buffer[0] = address
            p_size[0] = size
        p_max_records[0] = 0

    def _on_complete(self, context, stream, address, size, valid):
        """CUPTI returns a buffer: enqueue it and wake the consumer.  Nothing else happens here."""
        keep_thread_state()
        self.completed.append((address, valid))
        self.completions += 1
        self.wake.set()

    # ------------------------------------------------------------------ used by the parser
    def _new_view(self) -> np.ndarray:
        """A new buffer: a private anonymous mapping of its own (page-aligned, zeroed by the kernel,
        given back to the system when the last view of it goes).  Not malloc's: buffers are asked
        for on the launching threads, and malloc keeps what a thread freed in that thread's
        arena, so threads made and ended all day would leave memory behind them."""
        return np.frombuffer(mmap.mmap(-1, self.buffer_bytes, mmap.MAP_PRIVATE), np.uint8)

    def _free_view(self, address: int, view: np.ndarray, used: Optional[int]) -> None:
        """Put ``view`` on its free list, its first ``used`` bytes (None: all) zeroed first, with
        :data:`ZERO_MARGIN_BYTES` more (up to milliseconds: not under the lock)."""
        if used is None:
            view[:] = 0
        else:
            view[:used + ZERO_MARGIN_BYTES] = 0
        with self._lock:
            (self._spare_free if address in self._spares else self._free).append(view)

    def _hand_out(self, view: np.ndarray) -> np.ndarray:
        self._out[view.ctypes.data] = view
        if len(self._out) > self.peak_outstanding:
            self.peak_outstanding = len(self._out)
        return view

    def _take(self):
        with self._lock:
            if self._free:
                return self._hand_out(self._free.pop())
            if self._allocated >= self.max_buffers:
                return None
            view = self._new_view()
            self._allocated += 1
            return self._hand_out(view)

    def _take_spare(self):
        with self._lock:
            if self._spare_free:
                return self._hand_out(self._spare_free.pop())
            if self.can_decline and len(self._spares) >= MAX_SPARES:
                return None
            view = self._new_view()
            self._spares.add(view.ctypes.data)
            return self._hand_out(view)

    def is_spare(self, address: int) -> bool:
        """Whether ``address`` is a spare buffer: its records are to be counted as lost, not parsed."""
        return address in self._spares

    def array(self, address: int) -> np.ndarray:
        """The numpy array behind a buffer address handed out by this pool."""
        return self._out[address]

    def owns(self, address) -> bool:
        """Whether ``address`` is a buffer of this pool currently out."""
        return address in self._out

    def owner(self, address: int) -> int:
        """The native id of the thread that asked for buffer ``address`` (-1: unknown)."""
        entry = self._owners.get(address)
        return -1 if entry is None else entry[0]

    def held_since(self, parsing=()) -> Dict[int, int]:
        """Per owner thread, the request time (``time_ns``) of its oldest buffer still out, not
        counting the buffers at the addresses ``parsing`` (taken from :attr:`completed`)."""
        out = {}
        for address, (tid, t) in list(self._owners.items()):
            if t < out.get(tid, t + 1) and address not in parsing:
                out[tid] = t
        return out

    def release(self, address: int, used: Optional[int] = None) -> None:
        """Return a parsed (or, for a spare, counted) buffer to its free list -- with launch
        positions, once it is no longer its thread's current buffer.  ``used``: the valid bytes
        CUPTI reported for it (None: unknown, the whole buffer is zeroed)."""
        positions = self.positions
        keep = positions is not None and not positions.release(address)
        with self._lock:
            self._owners.pop(address, None)
            view = self._out.pop(address, None)
            if view is None:
                return
            if keep:
                self._retired[address] = (view, used)
        if not keep:
            self._free_view(address, view, used)   # zeroing takes up to milliseconds: outside the lock

    def _recycle(self, address: int) -> None:
        """A retired buffer (0: none) to its free list."""
        with self._lock:
            entry = self._retired.pop(address, None)
            if entry is not None:
                # asked for on a launching thread: zeroed later, by the collector (:meth:`trim`)
                self._dirty.append((address,) + entry)

    def recycle_ended(self, look: bool = True) -> None:
        """The retired buffers of threads that ended go back to the free lists (``look``: also of
        the threads ``/proc`` no longer lists, :meth:`.positions.LaunchPositions.ended_threads`)."""
        if self.positions is not None:
            for address in self.positions.ended_threads(look):
                self._recycle(address)

    def _holders(self) -> set:
        """The native ids of the threads with a buffer out."""
        return {tid for tid, _t in list(self._owners.values())}

    def gone_holding(self) -> set:
        """The threads that ended and still hold a buffer (with CUPTI: only a flush returns it)."""
        return self.gone & self._holders() if self.gone else set()

    def forget_gone(self) -> None:
        """Forget the ended threads none of whose buffers is out any more (and, with launch
        positions, whose positions are forgotten too)."""
        if self.gone:
            held = self._holders()
            if self.positions is not None:
                held |= set(self.positions.threads)
            self.gone &= held          # in place: the set is shared with the launch positions

    def use_positions(self, positions) -> None:
        """Place kernels by launch position from now on (``None``: no longer; every retired buffer
        goes back to the free lists then)."""
        self.positions = positions
        if positions is None:
            for address in list(self._retired):
                self._recycle(address)
        else:
            positions.gone = self.gone

    def trim(self) -> None:
        """Zero the buffers recycled on launching threads and free them; then free the buffers
        nobody needs: keep as many free buffers as are out (at least :data:`MIN_FREE_KEPT`), and
        no free spare at all."""
        with self._lock:
            dirty, self._dirty = self._dirty, []
        for address, view, used in dirty:
            self._free_view(address, view, used)
        with self._lock:
            keep = max(MIN_FREE_KEPT, len(self._out))
            while len(self._free) > keep:
                self._free.pop()
                self._allocated -= 1
            while self._spare_free:
                self._spares.discard(self._spare_free.pop().ctypes.data)

    def take_completed(self) -> list:
        """Remove and return every completed ``(address, valid)`` pair queued so far."""
        out = []
        completed = self.completed
        while completed:
            out.append(completed.popleft())
        return out

    def low(self, margin: int) -> bool:
        """Whether no more than ``margin`` buffers can still be handed out below the ceiling."""
        return self.max_buffers - len(self._out) <= margin

    @property
    def allocated_bytes(self) -> int:
        """Bytes of buffer memory held now (pool buffers, free or out, plus spares)."""
        return (self._allocated + len(self._spares)) * self.buffer_bytes

    @property
    def limit_bytes(self) -> int:
        """The ceiling on pool buffer memory."""
        return self.max_buffers * self.buffer_bytes

    @property
    def allocated(self) -> int:
        """Pool buffers held now (never more than ``max_buffers``; spares not counted)."""
        return self._allocated

    @property
    def spares(self) -> int:
        """Spare buffers held now."""
        return len(self._spares)

    @property
    def outstanding(self) -> int:
        """Buffers handed out and not yet released (with CUPTI or awaiting parse)."""
        return len(self._out)

    def resized(self, buffer_bytes: int) -> "BufferPool":
        """A pool like this one with buffers of ``buffer_bytes``; this one itself while CUPTI or
        the parser still holds any of its buffers (the size changes at a later start).  The new
        pool keeps this one referenced: CUPTI may still know its callbacks."""
        if self._out or self.completed or buffer_bytes == self.buffer_bytes:
            return self
        pool = BufferPool(buffer_bytes, self._ceiling_asked, self.can_decline)
        pool._previous = self
        with self._lock:                            # its free buffers go back to the system
            self._free.clear()
            self._spare_free.clear()
        return pool
