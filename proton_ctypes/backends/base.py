"""The one protocol every backend speaks, and the kernel batch it hands to the tree.

Data flows one way: a backend collects device activity (in C, through the vendor's
activity API), parses whole buffers at once, and hands **kernel batches** to a sink
given to it by the profiler.  A kernel batch is a numpy structured array of
:data:`KERNEL_DTYPE`; the tree attributes every row to call paths in bulk.  A backend
never imports the API layer (``proton_ctypes.profile`` & co.) and never sees sessions.

Fields of :data:`KERNEL_DTYPE` (all times in the ``time.time_ns()`` clock, i.e.
CLOCK_REALTIME nanoseconds, already corrected by the backend's clock calibration):

``tid``        native id (``threading.get_native_id()``) of the thread that launched
               the kernel; ``-1`` when unknown.
``launch_ns``  start of the launch API call on that thread (used for the join with the
               thread's scope log); for graph replays the graph launch.
``start_ns``   kernel start on the device.
``end_ns``     kernel end on the device.
``device``     device index (the ``device_id`` metric, written as a string).
``stream``     stream id (the trace lane).
``name_id``    kernel name, interned with :func:`proton_ctypes.tree.strings.intern`.
``corr``       the vendor's correlation id (diagnostics only).
``cap_tid``    for kernels replayed from a captured graph: the thread that captured
               the node, else ``-1``.
``cap_ns``     the capture time on that thread (the path open at that instant is
               grafted below the replay-time path).
``py_node``    for ``context="python"``: the call-path node of the launching Python
               stack, resolved at launch, else ``-1``.
"""
from __future__ import annotations

from typing import Callable, Iterable, Optional, Protocol

import numpy as np

KERNEL_DTYPE = np.dtype([
    ("tid", "<i8"),
    ("launch_ns", "<i8"),
    ("start_ns", "<i8"),
    ("end_ns", "<i8"),
    ("device", "<u4"),
    ("stream", "<u4"),
    ("name_id", "<i4"),
    ("corr", "<u8"),
    ("cap_tid", "<i8"),
    ("cap_ns", "<i8"),
    ("py_node", "<i8"),
])

#: A callable taking one kernel batch; it may be called from any thread.
Sink = Callable[[np.ndarray], None]

#: ``periodic_flushing``: seconds between the timed flushes of the GPU backends.
DEFAULT_FLUSH_INTERVAL_S = 0.1


def tightest_offset(read_vendor: Callable[[], int], read_host: Callable[[], int], pairs: int) -> tuple:
    """``(window_ns, vendor - host)`` from the tightest of ``pairs`` host/vendor/host reads:
    the vendor stamp is compared with the middle of the host reads around it, and the
    pair whose host reads are closest together wins (the vendor clock's offset to that
    host clock, at the best precision this process can see)."""
    best = None
    for _ in range(pairs):
        before = read_host()
        stamp = read_vendor()
        after = read_host()
        window = after - before
        if best is None or window < best[0]:
            best = (window, stamp - (before + after) // 2)
    return best


def empty_batch(n: int = 0) -> np.ndarray:
    """Return a kernel batch of ``n`` rows with every optional field set to "absent" (-1)."""
    batch = np.zeros(n, dtype=KERNEL_DTYPE)
    for field in ("tid", "cap_tid", "cap_ns", "py_node"):
        batch[field] = -1
    return batch


class Backend(Protocol):
    """What the profiler core expects from a backend.

    A backend object is created once per process by :mod:`proton_ctypes.backends.select`
    and shared by every session that names it; ``start`` is called when the first such
    session starts and ``stop`` when the last one is finalized.
    """

    #: The name users pass as ``backend=`` (``"cupti"``, ``"host"``, ...).
    name: str
    #: ``"CUDA"``, ``"HIP"`` or ``""`` (host only): the ``device_type`` metric.
    device_type: str
    #: Records the vendor library dropped or we could not parse, reported at finalize.
    dropped: int

    def start(self, sink: Sink, mode: str, python_context: Optional[Callable[[], int]] = None) -> None:
        """Begin collecting; hand every parsed kernel batch to ``sink``.

        ``mode`` is the mode string (``""``, ``"periodic_flushing:format=..."``, ...);
        ``python_context``, when given, is called on the launching thread at each launch
        and returns the call-path node to store in ``py_node``.
        """

    def flush(self) -> None:
        """Deliver every record completed so far to the sink (synchronising the device first)."""

    def stop(self) -> None:
        """Flush, then stop collecting; the backend may be started again later."""

    def device_info(self, devices: Iterable[int]) -> dict:
        """The device block of the hatchet file for ``devices``: ``{"CUDA": {"0": {...}}}``."""
