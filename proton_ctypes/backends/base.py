"""The one contract every backend keeps (:class:`Backend`), and the kernel batch it hands on.

Data flows one way: a backend collects device activity (in C, through the vendor's
activity API), parses whole buffers at once, and hands **kernel batches** to a sink
given to it by the engine.  A kernel batch is a numpy structured array of
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

import time
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from .modes import NO_MODE, Mode

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

#: A callable taking one kernel batch; it may be called from any thread (an empty batch too:
#: the engine then only does its periodic work, such as trimming the scope logs).
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


#: one kernel row with every optional field "absent" (-1) and the others 0
_EMPTY_ROW = np.zeros(1, dtype=KERNEL_DTYPE)
for _field in ("tid", "cap_tid", "cap_ns", "py_node"):
    _EMPTY_ROW[_field] = -1


def empty_batch(n: int = 0) -> np.ndarray:
    """Return a kernel batch of ``n`` rows with every optional field set to "absent" (-1).

    Copies of one template row (one pass): zeros and a strided fill per field took several
    times longer on batches of 10^5 rows."""
    return np.repeat(_EMPTY_ROW, n)


#: how a backend's kernel rows name their context (:attr:`Backend.attribution`): by launch time,
#: joined with the launching thread's scope log
ATTRIBUTION_TIMESTAMP = "timestamp"
#: ... or by the external correlation id pushed at each scope edge (:meth:`Backend.push_external`),
#: carried in ``py_node`` (the clock fallback)
ATTRIBUTION_EXTCORR = "extcorr"


class Backend:
    """The contract between the engine (:mod:`proton_ctypes.core`) and a backend: every member
    the engine uses, with the default of a backend that has nothing to offer there.

    A backend object is created once per process (:mod:`.select`) and shared by every session
    that names it: :meth:`connect` and :meth:`start` are called when the first such session
    starts, :meth:`stop` when the last one is finalized.  The engine never probes a backend
    for members and never writes its fields; a backend never imports the engine (what it
    must call back is handed to it by :meth:`connect` and :meth:`start`).
    """

    #: The name users pass as ``backend=`` (``"cupti"``, ``"host"``, ...).
    name: str = ""
    #: ``"CUDA"``, ``"HIP"`` or ``""``: the ``device_type`` metric of kernel nodes.  ``""``
    #: means the backend produces no kernel rows, so scopes need not be logged for it.
    device_type: str = ""
    #: :data:`ATTRIBUTION_TIMESTAMP` or :data:`ATTRIBUTION_EXTCORR` (then the engine calls
    #: :meth:`push_external`/:meth:`pop_external` at every scope edge); read after :meth:`start`.
    attribution: str = ATTRIBUTION_TIMESTAMP
    #: ``mode="pcsampling"``: ``(sessions_active(backend), attribute_samples(backend, groups))``
    #: of :mod:`proton_ctypes.core.pc_samples`, given by :meth:`connect`; None until then.
    pc_attribution = None
    #: ``(enter(name), exit() -> bool)``: open a scope for an NVTX range on the calling thread /
    #: close the innermost one it opened (:mod:`proton_ctypes.core.nvtx`), given by
    #: :meth:`connect`; None: NVTX ranges are not scopes.
    nvtx_scopes = None
    #: ``(capture(begin: bool), replayed(graph, thread id, time_ns, exec=None, stream=None),
    #: instantiated(exec, graph))`` of :mod:`proton_ctypes.core.graph_metrics`, given by
    #: :meth:`connect`: ``capture`` on the capturing thread when a stream capture begins / ends,
    #: ``replayed`` on the launching thread once per replay of an executable graph, before the
    #: replay is queued on ``stream`` (``graph``: the handle of the captured graph it was made
    #: from), ``instantiated`` when an executable graph
    #: is made (a backend that sees no instantiation passes no ``exec``); None: not called.
    graph_hooks = None
    #: whether :meth:`delivered` gives a watermark (then ``(0, {})`` means nothing delivered
    #: yet); a backend without one must hand kernels to the sink in launch order
    #: (``periodic_flushing`` writes a phase once a later phase's kernel came, as Proton does)
    watermarks = False
    #: the size in bytes the user asked for each activity buffer (Proton's
    #: ``TRITON_PROFILE_BUFFER_SIZE`` knob), given by :meth:`connect`; None: the backend's own
    #: default.  A backend that hands its vendor no buffers ignores it.
    activity_buffer_bytes = None
    #: whether Proton keeps a pool of pending graph-replay metrics for this backend (CUPTI,
    #: rocprofiler-sdk): ``PROTON_DATA_FLUSH_TIMING`` then prints that pool's peek line at each
    #: periodic flush, before the flush's own line (:mod:`proton_ctypes.core.flush_timing`)
    graph_metric_pool = False

    def connect(self, pc_attribution=None, nvtx_scopes=None, graph_hooks=None, activity_buffer_bytes=None) -> None:
        """Take the engine's functions a backend may call back and the user's activity-buffer
        size (see the fields of the same names); called before each :meth:`start` that follows
        a :meth:`stop` (and before the first)."""
        self.pc_attribution = pc_attribution
        self.nvtx_scopes = nvtx_scopes
        self.graph_hooks = graph_hooks
        self.activity_buffer_bytes = activity_buffer_bytes

    def start(self, sink: Sink, mode: Mode = NO_MODE, python_context: Optional[Callable[[], int]] = None) -> None:
        """Begin collecting; hand every parsed kernel batch to ``sink`` (from any thread).

        ``mode`` is the session's parsed mode (:class:`.modes.Mode`); ``python_context``, when
        given, is called on the launching thread at each launch and returns the call-path node
        to store in ``py_node``.
        """
        raise NotImplementedError(f"{type(self).__name__}.start")

    def context_in_use(self, now_ns: int) -> None:
        """The engine's notice that from ``now_ns`` (``time.time_ns()``) on, kernels may need their
        launch time: a thread made its views (its first event after the sessions changed), a
        session was activated, deactivated or advanced its phase, or another session started.
        Called at every such change, so it must be cheap when there is nothing to do; never from
        a path a kernel launch takes. Default: nothing (a backend that always has launch times)."""

    def edge_clock(self) -> Optional[Callable[[], int]]:
        """The clock the engine's log entries must use while this backend runs (it returns
        ``time.time_ns()`` and may note more, :mod:`proton_ctypes.core.clock`); None: any
        ``time.time_ns()`` will do.  Asked after :meth:`start`."""
        return None

    def thread_edge_clock(self, tid: int) -> Callable[[], int]:
        """:meth:`edge_clock` bound to thread ``tid`` (native id), for the views made on that
        thread (:func:`proton_ctypes.core.clock.for_thread`); only that thread calls it."""
        return self.edge_clock() or time.time_ns

    def flush(self) -> None:
        """Deliver every record completed so far to the sink (synchronising the device first)."""

    def stop(self) -> None:
        """Flush, then stop collecting; the backend may be started again later."""

    def delivered(self) -> Tuple[int, Dict[int, int]]:
        """The delivery watermark ``(default_ns, per_thread)``: every kernel launched by native
        thread ``tid`` before ``per_thread.get(tid, default_ns)`` (``launch_ns``, the clock of
        :data:`KERNEL_DTYPE`) has already been handed to the sink, and the sink has returned.
        ``(0, {})``, the default: unknown (the engine then keeps every scope-log entry).

        The engine trims each thread's scope log to the entry in force at that thread's
        watermark, so a kernel row arriving later must never be launched before it: the
        watermark of a thread may only move forward, and only past rows already delivered.

        Why per thread: CUPTI keeps one activity buffer per launching thread and returns a
        thread's buffers in order, so the oldest undelivered launch of one thread says nothing
        about another's: one idle thread's half-full buffer must hold back the trimming of its
        own log only, never that of the others.  ``default_ns`` is the watermark of every thread
        not in ``per_thread`` (threads with nothing pending, threads never seen): say, the
        start of the latest flush that left no buffer behind.  The engine reads it in the sink
        (on the thread calling it) and after :meth:`flush`; a sink call with an empty batch is
        how a backend's timer lets the engine trim when no kernel ran.  The engine holds its own
        lock while it calls this and :meth:`captures` (the sink takes the same lock): neither may
        wait for a lock the backend holds while it calls the sink.
        """
        return 0, {}

    def captures(self) -> Dict[int, Sequence[int]]:
        """The capture points later kernel rows may still name: ``{native tid: capture times (ns)}``,
        every ``(cap_tid, cap_ns)`` a graph replay can carry (a CUDA-graph node captured on that
        thread at that time).  The engine keeps the log entry in force at each of them while it
        trims (a graph captured once is replayed for the rest of the run).

        The engine calls it right after :meth:`delivered`; every capture point of a thread older
        than the watermark that call returned must be listed.  A point left out later is
        forgotten (its graph was destroyed).  ``{}``, the default: no graph replays."""
        return {}

    def device_info(self, devices: Iterable[int]) -> dict:
        """The device block of the hatchet file for ``devices``: ``{"CUDA": {"0": {...}}}``;
        ``{}`` when the backend knows no devices."""
        return {}

    def lost(self) -> List[Tuple[int, str]]:
        """Records lost so far, as ``(count, reason)`` pairs (reported at finalize)."""
        return []

    @property
    def dropped(self) -> int:
        """How many records were lost so far (the sum of :meth:`lost`)."""
        return sum(count for count, _reason in self.lost())

    def push_external(self, external_id: int) -> None:
        """:data:`ATTRIBUTION_EXTCORR`: push ``external_id`` on the calling thread's stack, so
        the kernels it launches carry it."""
        raise NotImplementedError(f"{type(self).__name__} attributes kernels by timestamp")

    def pop_external(self) -> int:
        """:data:`ATTRIBUTION_EXTCORR`: pop the calling thread's innermost external id."""
        raise NotImplementedError(f"{type(self).__name__} attributes kernels by timestamp")
