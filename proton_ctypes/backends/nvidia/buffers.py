"""Activity buffers owned by us: a bounded, recycled pool of 8-byte aligned numpy arrays.

CUPTI asks for an empty buffer through the *request* callback and hands it back full
through the *complete* callback, on a CUPTI-owned thread.  The complete callback only
appends ``(address, valid_bytes)`` to a deque (atomic under the GIL) and pokes an event;
parsing happens later on a Python thread, which then calls :meth:`BufferPool.release`.

Memory is bounded: at most ``max_buffers`` buffers exist at once.  When all are out
(the parser has fallen behind), the request callback declines (``*buffer = NULL``) and
CUPTI drops records, which CUPTI counts and :class:`~proton_ctypes.backends.cupti.CuptiBackend` reports; we
count the refusals too.

CUPTI before API version 27 can crash when a request is declined, so there
(``can_decline=False``) the pool hands out a *spare* buffer instead: allocated beyond
``max_buffers`` only while every pool buffer is out, never parsed, its records counted as
dropped by the consumer (:meth:`is_spare`) and the buffer recycled as a spare.  Either way
the records beyond the bound are lost and counted; only the older CUPTI costs a few
spare buffers more.
"""
from __future__ import annotations

import collections
import threading

import numpy as np

from .layout import RECORD_ALIGNMENT
from .lib import BUFFER_COMPLETE_FUNC, BUFFER_REQUEST_FUNC

DEFAULT_BUFFER_BYTES = 4 << 20
DEFAULT_MAX_BUFFERS = 12          # 48 MiB at most
MIN_BUFFERS = 2                   # one with CUPTI while the other waits to be parsed
ALIGNMENT = RECORD_ALIGNMENT      # CUPTI's ACTIVITY_RECORD_ALIGNMENT


class BufferPool:
    """A pool of activity buffers plus the two ctypes callbacks CUPTI calls."""

    def __init__(self, buffer_bytes: int = DEFAULT_BUFFER_BYTES, max_buffers: int = DEFAULT_MAX_BUFFERS,
                 can_decline: bool = True):
        """``can_decline``: whether a request may be declined (CUPTI >= 27); else spares are handed out."""
        if buffer_bytes % ALIGNMENT or buffer_bytes <= 0 or max_buffers < MIN_BUFFERS:
            raise ValueError("buffer_bytes must be a positive multiple of 8 and max_buffers >= 2")
        self.buffer_bytes = int(buffer_bytes)
        self.max_buffers = int(max_buffers)
        self.can_decline = bool(can_decline)
        self._free = []                    # aligned uint8 views ready to hand out
        self._out = {}                     # address -> aligned view, handed to CUPTI or awaiting parse
        self._allocated = 0
        self._spare_free = []              # spare buffers (beyond max_buffers) ready to hand out
        self._spares = set()               # addresses of every spare buffer
        self._lock = threading.Lock()
        #: ``(address, valid_bytes)`` of completed buffers, in completion order.
        self.completed = collections.deque()
        #: Set by the complete callback; a consumer thread may wait on it.
        self.wake = threading.Event()
        #: Requests declined because every buffer was out.
        self.refused = 0
        #: Requests answered with a spare buffer (CUPTI < 27) because every buffer was out.
        self.spared = 0
        self.requests = 0
        self.completions = 0
        # The ctypes callbacks: keep references for the life of the process (CUPTI keeps the pointers).
        self.request_callback = BUFFER_REQUEST_FUNC(self._on_request)
        self.complete_callback = BUFFER_COMPLETE_FUNC(self._on_complete)

    # ------------------------------------------------------------------ called by CUPTI
    def _on_request(self, p_buffer, p_size, p_max_records):
        """CUPTI wants an empty buffer: hand out a free one, allocate one, decline, or hand out a spare."""
        self.requests += 1
        view = self._take()
        if view is None and not self.can_decline:
            self.spared += 1
            view = self._take_spare()
        if view is None:
            self.refused += 1
            p_buffer[0] = None
            p_size[0] = 0
        else:
            p_buffer[0] = view.ctypes.data
            p_size[0] = self.buffer_bytes
        p_max_records[0] = 0

    def _on_complete(self, context, stream, address, size, valid):
        """CUPTI returns a buffer: enqueue it and wake the consumer.  Nothing else happens here."""
        self.completed.append((address, valid))
        self.completions += 1
        self.wake.set()

    # ------------------------------------------------------------------ used by the parser
    def _new_view(self) -> np.ndarray:
        raw = np.empty(self.buffer_bytes + ALIGNMENT, np.uint8)
        pad = (-raw.ctypes.data) % ALIGNMENT
        return raw[pad:pad + self.buffer_bytes]

    def _take(self):
        with self._lock:
            if self._free:
                view = self._free.pop()
            elif self._allocated < self.max_buffers:
                view = self._new_view()
                self._allocated += 1
            else:
                return None
            self._out[view.ctypes.data] = view
            return view

    def _take_spare(self):
        with self._lock:
            if self._spare_free:
                view = self._spare_free.pop()
            else:
                view = self._new_view()
                self._spares.add(view.ctypes.data)
            self._out[view.ctypes.data] = view
            return view

    def is_spare(self, address: int) -> bool:
        """Whether ``address`` is a spare buffer: its records are to be counted as dropped, not parsed."""
        return address in self._spares

    def array(self, address: int) -> np.ndarray:
        """The numpy array behind a buffer address handed out by this pool."""
        return self._out[address]

    def owns(self, address) -> bool:
        """Whether ``address`` is a buffer of this pool currently out."""
        return address in self._out

    def release(self, address: int) -> None:
        """Return a parsed (or, for a spare, counted) buffer to its free list."""
        with self._lock:
            view = self._out.pop(address, None)
            if view is not None:
                (self._spare_free if address in self._spares else self._free).append(view)

    def take_completed(self) -> list:
        """Remove and return every completed ``(address, valid)`` pair queued so far."""
        out = []
        completed = self.completed
        while completed:
            out.append(completed.popleft())
        return out

    @property
    def allocated_bytes(self) -> int:
        """Bytes of buffer memory allocated so far (``max_buffers`` buffers at most, plus any spares)."""
        return (self._allocated + len(self._spares)) * (self.buffer_bytes + ALIGNMENT)

    @property
    def allocated(self) -> int:
        """Pool buffers allocated so far (never more than ``max_buffers``; spares not counted)."""
        return self._allocated

    @property
    def spares(self) -> int:
        """Spare buffers allocated so far (CUPTI < 27 only)."""
        return len(self._spares)

    @property
    def outstanding(self) -> int:
        """Buffers handed out and not yet released (with CUPTI or awaiting parse)."""
        return len(self._out)
