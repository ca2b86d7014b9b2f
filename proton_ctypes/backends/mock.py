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
    """Kernels are recorded by :meth:`launch` and handed to the sink at :meth:`flush`."""

    name = "mock"
    device_type = "CUDA"

    def __init__(self):
        self.sink = None
        self.python_context = None
        self.mode = NO_MODE
        self._rows = []
        self._lock = threading.Lock()
        self._clock = 0

    def start(self, sink, mode, python_context=None) -> None:
        """Remember the sink (and the python-context resolver)."""
        self.sink = sink
        self.mode = mode
        self.python_context = python_context

    def launch(self, name: str, dur_ns: int = 1000, device: int = 0, stream: int = 7,
               cap=None) -> None:
        """Record one kernel launched now on the calling thread.

        ``cap`` = ``(capture_tid, capture_ns)`` marks a kernel replayed from a graph node
        captured at that time on that thread.
        """
        now = time.time_ns()
        py = self.python_context() if self.python_context is not None else -1
        with self._lock:
            start = max(now + 5000, self._clock)
            self._clock = start + dur_ns
            self._rows.append((threading.get_native_id(), now, start, start + dur_ns, device, stream,
                               strings.intern(name), len(self._rows) + 1,
                               cap[0] if cap else -1, cap[1] if cap else -1, py))

    def flush(self) -> None:
        """Deliver every recorded kernel as one batch."""
        with self._lock:
            rows, self._rows = self._rows, []
            self.delivered_before = time.time_ns()
        if not rows or self.sink is None:
            return
        self.sink(np.array(rows, dtype=KERNEL_DTYPE))

    def stop(self) -> None:
        """Flush what is left."""
        self.flush()

    def device_info(self, devices) -> dict:
        """An H200 for every device index used."""
        return {"CUDA": {str(d): dict(H200) for d in sorted(devices)}}
