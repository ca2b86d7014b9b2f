"""A test double of a GPU backend: kernels you "launch" from Python, delivered in batches.

It feeds :data:`~proton_ctypes.backends.base.KERNEL_DTYPE` batches through the same sink
a real backend uses, stamped like real launch-API records (launching thread's native id
and ``time.time_ns()`` at launch), so scope -> kernel batch -> tree -> file runs on a CPU.
Register it in tests with ``select.register("mock", MockBackend)`` and start sessions
with ``backend="mock"``.
"""
from __future__ import annotations

import threading
import time

import numpy as np

from ..tree import strings
from .base import KERNEL_DTYPE, Backend
from .modes import NO_MODE

#: the device block of one H200 as Proton writes it
H200 = {"arch": "90", "bus_width": 6016, "clock_rate": 1980000, "memory_clock_rate": 3201000, "num_sms": 132}


class MockBackend(Backend):
    """Kernels are recorded by :meth:`launch` and handed to the sink at :meth:`flush` (every row)
    or :meth:`timed_flush` (what a collector's timer hands on: the rows of threads :meth:`hold`
    holds back stay).  :meth:`delivered` is the watermark of what was handed on."""

    name = "mock"
    device_type = "CUDA"
    watermarks = True
    graph_metric_pool = True     # stands in for the CUPTI backend

    def __init__(self):
        self.sink = None
        self.python_context = None
        self.mode = NO_MODE
        self._rows = []
        self._lock = threading.Lock()
        #: deliveries handed to the sink and not returned yet: the watermark of the latest one
        #: is published when none is in flight (it covers only batches the sink returned from)
        self._in_flight = 0
        self._next_mark = (0, {})
        self._clock = 0
        #: native tid -> timed flushes its rows still stay back for
        self._held = {}
        #: the watermark (Backend.delivered) and the capture points (Backend.captures)
        self._mark = (0, {})
        self._captures = {}

    def start(self, sink, mode, python_context=None) -> None:
        """Remember the sink (and the python-context resolver)."""
        self.sink = sink
        self.mode = mode
        self.python_context = python_context

    def launch(self, name: str, dur_ns: int = 1000, device: int = 0, stream: int = 7,
               cap=None) -> None:
        """Record one kernel launched now on the calling thread.

        ``cap`` = ``(capture_tid, capture_ns)`` marks a kernel replayed from a graph node
        captured at that time on that thread (see :meth:`capture`; a point not captured so is
        listed from now on).
        """
        py = self.python_context() if self.python_context is not None else -1
        tid = threading.get_native_id()
        with self._lock:
            # stamped under the lock: a row is never older than a watermark published before it
            now = time.time_ns()
            start = max(now + 5000, self._clock)
            self._clock = start + dur_ns
            self._rows.append((tid, now, start, start + dur_ns, device, stream,
                               strings.intern(name), len(self._rows) + 1,
                               cap[0] if cap else -1, cap[1] if cap else -1, py))
            if cap:
                self._add_capture(cap[0], cap[1])

    def capture(self):
        """A graph node captured now on the calling thread: its ``(tid, ns)``, for ``launch(cap=...)``
        (kept by :meth:`captures` as CUPTI's graph-node callback keeps it)."""
        tid = threading.get_native_id()
        with self._lock:
            now = time.time_ns()
            self._add_capture(tid, now)
        return tid, now

    def _add_capture(self, tid: int, ns: int) -> None:
        points = self._captures.setdefault(tid, [])
        if ns not in points:
            points.append(ns)
            points.sort()

    def hold(self, tid=None, flushes: int = 1) -> None:
        """Hold back the rows of thread ``tid`` (default: the calling thread) for the next
        ``flushes`` :meth:`timed_flush` calls, as the half-full buffer of an idle thread stays
        with CUPTI; its watermark stays at the launch of its oldest held row."""
        with self._lock:
            self._held[threading.get_native_id() if tid is None else tid] = flushes

    def timed_flush(self) -> None:
        """Deliver every recorded kernel but those of held threads (see :meth:`hold`); the sink
        is called even with nothing to hand on (an empty batch), as a collector's timer may."""
        self._deliver(force=False)

    def capture_edge(self, begin: bool) -> None:
        """A stream capture begins (``begin``) or ends on the calling thread, as CUPTI's
        ``cuStreamBeginCapture`` / ``cuStreamEndCapture`` callbacks tell the engine."""
        if self.graph_hooks is not None:
            self.graph_hooks[0](begin)

    def instantiate(self, exec_handle, graph) -> None:
        """An executable graph ``exec_handle`` is made from captured graph ``graph`` (CUPTI's
        ``GRAPHEXEC_CREATED``)."""
        if self.graph_hooks is not None:
            self.graph_hooks[2](exec_handle, graph)

    def graph_launch(self, graph, exec_handle=None, stream=None) -> None:
        """Launch a replay of the executable graph (``exec_handle``, if one was instantiated) made
        from captured graph ``graph`` now, on the calling thread and ``stream``: what the CUPTI
        graph-launch callback tells the engine (its kernels are then :meth:`launch` ed with ``cap``)."""
        if self.graph_hooks is not None:
            self.graph_hooks[1](graph, threading.get_native_id(), time.time_ns(), exec_handle, stream)

    def flush(self) -> None:
        """Deliver every recorded kernel as one batch (held ones too: a forced flush)."""
        self._deliver(force=True)

    def _deliver(self, force: bool) -> None:
        with self._lock:
            now = time.time_ns()
            rows, held = self._rows, self._held
            if force:
                held.clear()
            kept = [r for r in rows if held.get(r[0], 0) > 0] if held else []
            if kept:
                rows = [r for r in rows if held.get(r[0], 0) <= 0]
            self._rows = kept
            for tid in list(held):
                held[tid] -= 1
                if held[tid] <= 0:
                    del held[tid]
            per_thread = {}
            for r in kept:
                per_thread[r[0]] = min(r[1], per_thread.get(r[0], r[1]))
            self._next_mark = (now, per_thread)
            self._in_flight += 1
        try:
            if (rows or not force) and self.sink is not None:
                self.sink(np.array(rows, dtype=KERNEL_DTYPE))
        finally:
            with self._lock:
                self._in_flight -= 1
                if self._in_flight == 0:
                    self._mark = self._next_mark

    def delivered(self):
        """``(time of the latest delivery, {held thread: launch of its oldest held row})``."""
        with self._lock:
            default, per_thread = self._mark
            return default, dict(per_thread)

    def captures(self):
        """Every capture point of :meth:`capture` and ``launch(cap=...)``."""
        with self._lock:
            return {tid: list(points) for tid, points in self._captures.items()}

    def stop(self) -> None:
        """Flush what is left."""
        self.flush()

    def device_info(self, devices) -> dict:
        """An H200 for every device index used."""
        return {"CUDA": {str(d): dict(H200) for d in sorted(devices)}}
