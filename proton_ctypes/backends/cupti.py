"""The CUPTI backend: kernel activity from CUPTI, driven from Python through ctypes.

No Python runs per kernel launch in the default context: CUPTI writes kernel records into
per-thread buffers we own (:mod:`.nvidia.buffers`, which knows each buffer's thread), each
placed among its thread's scope edges by its slot in the buffer (:mod:`.nvidia.positions`);
on request stamped with the host time of its launch (``queued``) instead; only where CUPTI
cannot do either, one launch-API record per launch (docs/collection.md, :mod:`.nvidia.activity`).  A
collector thread (:mod:`.nvidia.collector`) parses whole buffers with numpy, joins kernels
to their launching thread and launch time and hands :data:`~.base.KERNEL_DTYPE` batches to
the sink.  A CUDA graph's replayed kernels carry no ``queued`` time: a callback on the graph
launch calls (one per replay, never per kernel) gives theirs.  Every CUPTI call goes through
:class:`~.nvidia.lib.CuptiLib`, every CUDA driver call through :class:`~.nvidia.driver.CudaDriver`.

Attribution modes (:attr:`CuptiBackend.attribution`):

* ``"timestamp"`` (default): rows carry ``tid`` and ``launch_ns``; the tree joins them to
  each thread's scope log.  CUPTI's clock is checked against ``time.time_ns()`` at start.
* ``"extcorr"``: chosen when the clocks disagree by more than 50 µs, or forced with
  ``PROTON_CTYPES_ATTRIBUTION=extcorr``.  The profiler must then call
  :meth:`CuptiBackend.push_external` / :meth:`CuptiBackend.pop_external` at scope edges;
  rows carry the innermost pushed id in ``py_node``.

Also, as Proton: with ``TRITON_ENABLE_NVTX`` on, ``nvtxRangePushA`` / ``nvtxRangePop`` open and
close scopes (:mod:`.nvidia.nvtx`, through :attr:`CuptiBackend.nvtx_scopes`), and an executable
CUDA graph made before profiling started gets Proton's ``Cannot find graph for graphExecId``
line on stderr once, when its replayed kernels are first collected
(:meth:`~.nvidia.callbacks.CallbackHub.check_graph_execs`; no per-launch callback).
"""
from __future__ import annotations

import atexit
import contextlib
import os
import threading
import time
import warnings
from typing import Callable, Iterable, Optional

import numpy as np

from .base import DEFAULT_FLUSH_INTERVAL_S, Backend
from .modes import NO_MODE, Mode
from .nvidia import nvtx
from .nvidia.activity import (KERNEL_RECORD_SOURCES, LAUNCH_FROM_API, LAUNCH_FROM_KERNEL,
                              calibrate_clock, choose_attribution, choose_launch_source, enable_activity,
                              finalize_at_stop, lazy_timestamps)
from .nvidia.buffers import BufferPool, pool_buffer_bytes
from .nvidia.callbacks import OTHER_SUBSCRIBER_MESSAGE, CallbackHub, torch_profiler_active
from .nvidia.collector import Collector
from .nvidia.driver import required_driver
from .nvidia.lib import EXTERNAL_CORRELATION_KIND_CUSTOM0, THREAD_ID_TYPE_SYSTEM, CuptiError, CuptiLib, load_cupti
from .nvidia.pcsampling import PCSampler, pc_sampling_period

DEFAULT_PARSE_BATCH = 4
PARSE_BATCH_ENV = "PROTON_CTYPES_PARSE_BATCH"
_ACTIVE = []  # the CuptiBackend currently started in this process (CUPTI allows one subscriber)


def _forget_after_fork() -> None:
    """In a forked child, the backend its parent started is not running: CUPTI's state, its
    threads and the collector stayed with the parent, so the stop at the child's exit must make
    no call (it blocked there on a lock taken at the fork)."""
    for backend in _ACTIVE:
        backend.running = False
    _ACTIVE.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


class CuptiBackend(Backend):
    """:class:`~.base.Backend` for NVIDIA GPUs through CUPTI's activity API."""

    name = "cupti"
    device_type = "CUDA"
    watermarks = True
    graph_metric_pool = True

    def __init__(self, lib=None, driver=None, buffer_bytes: Optional[int] = None,
                 max_buffers: Optional[int] = None, flush_interval_s: float = DEFAULT_FLUSH_INTERVAL_S,
                 parse_batch_buffers: Optional[int] = None):
        """``lib``: a fake libcupti for tests (default: load the real one at first start);
        ``buffer_bytes``: the size of each activity buffer, exactly (default:
        :func:`~.nvidia.buffers.pool_buffer_bytes` of the user's ``TRITON_PROFILE_BUFFER_SIZE``);
        ``max_buffers``: the ceiling of the buffer pool (default: :func:`~.nvidia.buffers.buffer_limit_bytes`);
        ``driver``: an object with ``synchronize()`` and ``device_attributes(i)`` (default: libcuda,
        :class:`~.nvidia.driver.CudaDriver`);
        ``parse_batch_buffers``: the collector parses once this many buffers are waiting (or the
        pool runs low); default ``PROTON_CTYPES_PARSE_BATCH`` or 4.  Parsing holds the GIL, so
        fewer, larger rounds disturb the launching threads less."""
        self._lib_override = lib
        self._driver = driver
        self._buffer_bytes = buffer_bytes
        self._max_buffers = max_buffers
        self.flush_interval_s = flush_interval_s
        if parse_batch_buffers is None:
            parse_batch_buffers = int(os.environ.get(PARSE_BATCH_ENV, DEFAULT_PARSE_BATCH))
        self.parse_batch_buffers = max(1, parse_batch_buffers)
        self.lib: Optional[CuptiLib] = None
        self.pool: Optional[BufferPool] = None
        #: parses, joins and delivers (created with the pool, kept across sessions)
        self.collector: Optional[Collector] = None
        self.running = False
        self.mode = NO_MODE
        #: ``"timestamp"`` or ``"extcorr"`` (see the module docstring).
        self.attribution = "timestamp"
        #: where kernels' launch thread and time come from (:func:`.nvidia.activity.choose_launch_source`)
        self.launch_source = LAUNCH_FROM_API
        #: CUPTI clock minus ``time.time_ns()`` measured at start, and the read window it came from.
        self.clock_offset_ns = 0
        self.clock_window_ns = 0
        self._hub = None
        self._pc = None
        #: what this backend put into ``NVTX_INJECTION64_PATH`` (taken out again at stop)
        self._nvtx_injected = None
        #: executable-graph ids seen made, and those reported missing, across starts (as Proton)
        self._graph_execs = set()
        self._graph_warned = set()
        #: executable-graph handle -> captured graph handle, kept across starts (graph metrics)
        self._exec_graph = {}
        #: activity kinds switched on (each is switched off again at stop)
        self._enabled_kinds = []
        self._warned = set()
        self._atexit = False
        #: lazy latency timestamps still off, waiting for the first context change
        self._lazy_waiting = False
        self._lazy_lock = threading.Lock()

    # ------------------------------------------------------------------ Backend protocol
    def lost(self) -> list:
        """``[(count, what)]`` for every way records were lost so far (:meth:`.nvidia.collector.Collector.lost`)."""
        return self.collector.lost() if self.collector is not None else []

    def start(self, sink: Callable[[np.ndarray], None], mode: Mode = NO_MODE,
              python_context: Optional[Callable[[], int]] = None) -> None:
        """Begin collecting kernels; hand each parsed batch to ``sink`` (from any thread)."""
        if self.running:
            raise RuntimeError("[PROTON] CuptiProfiler: already started")
        if _ACTIVE and _ACTIVE[0] is not self:
            raise RuntimeError("[PROTON] another proton_ctypes CUPTI backend is already profiling this process")
        if torch_profiler_active():
            raise RuntimeError(OTHER_SUBSCRIBER_MESSAGE)
        lib = self._load()
        self.mode = mode
        self._hub = CallbackHub(lib)
        self._hub.graph_execs, self._hub.graph_warned = self._graph_execs, self._graph_warned
        self._hub.exec_graph, self._hub.graph_hooks = self._exec_graph, self.graph_hooks
        self._pc = self._hub.pc = self._make_pc_sampler(lib) if mode.pc_sampling else None
        self._hub.subscribe(python_context)  # first: detects another CUPTI user before touching anything
        _ACTIVE.append(self)
        try:
            self._start_collection(lib, sink, python_context)
        except BaseException:
            self._teardown(deliver=False)
            raise
        self.running = True
        if not self._atexit:
            atexit.register(self._stop_at_exit)
            self._atexit = True

    def flush(self) -> None:
        """Synchronise the devices, make CUPTI hand back every complete buffer, deliver them."""
        if not self.running:
            return
        t0 = time.perf_counter()
        self._synchronize()
        t1 = time.perf_counter()
        self.lib.flush_all()
        self.collector.add_time("sync_s", t1 - t0)
        self.collector.add_time("cupti_flush_s", time.perf_counter() - t1)
        self.collector.drain(hold=False)

    def stop(self) -> None:
        """Deliver everything, then stop collecting (safe to call twice, after errors, at exit)."""
        if not self.running:
            return
        self.running = False
        self._teardown(deliver=True)

    def device_info(self, devices: Iterable[int]) -> dict:
        """``{"CUDA": {"0": {"arch": "90", ...}}}`` for the devices that ran kernels; ``{}`` if none."""
        devices = sorted({int(d) for d in devices})
        if not devices:
            return {}
        driver = self._get_driver()
        return {"CUDA": {str(d): dict(driver.device_attributes(d)) for d in devices}}

    # ------------------------------------------------------------------ fallback attribution
    def push_external(self, external_id: int) -> None:
        """Push ``external_id`` on this thread's CUPTI external-correlation stack (extcorr mode)."""
        self.lib.push_external(EXTERNAL_CORRELATION_KIND_CUSTOM0, external_id)

    def pop_external(self) -> int:
        """Pop this thread's innermost external-correlation id and return it."""
        return self.lib.pop_external(EXTERNAL_CORRELATION_KIND_CUSTOM0)

    def delivered(self) -> tuple:
        """``(default_ns, per_thread)``: every kernel launched by thread ``tid`` before
        ``per_thread.get(tid, default_ns)`` has been handed to the sink (see
        :meth:`.nvidia.collector.Collector.watermark`); ``(0, {})`` when unknown."""
        return self.collector.delivered if self.collector is not None else (0, {})

    def captures(self) -> dict:
        """``{tid: [capture times]}`` of every CUDA-graph node captured while subscribed (the
        ``(cap_tid, cap_ns)`` its replays carry; :class:`~.nvidia.callbacks.CallbackHub`)."""
        return self._hub.capture_points() if self._hub is not None else {}

    # ------------------------------------------------------------------ diagnostics
    @property
    def kernel_stride(self) -> Optional[int]:
        """The kernel record size in use (None before the first start)."""
        return self.collector.kernel_stride if self.collector is not None else None

    @property
    def stride_source(self) -> Optional[str]:
        """``"version table"`` until CUPTI's record walk measured the stride, then ``"walk"``."""
        return self.collector.stride_source if self.collector is not None else None

    @property
    def cupti_dropped(self) -> int:
        """Records CUPTI reported dropped (``cuptiActivityGetNumDroppedRecords``)."""
        return self.collector.cupti_dropped if self.collector is not None else 0

    @property
    def stats(self) -> dict:
        """Diagnostics: buffer, parse and join counters, clock and stride, where libcupti came from."""
        out = {"attribution": self.attribution, "clock_offset_ns": self.clock_offset_ns,
               "clock_window_ns": self.clock_window_ns, "kernel_stride": None, "stride_source": None,
               "cupti_dropped": 0, "spare_dropped": 0}
        if self.lib is not None:
            out.update(cupti_source=self.lib.source, cupti_path=self.lib.path, cupti_version=self.lib.version)
        if self.pool is not None:
            out.update(buffers_allocated=self.pool.allocated, buffer_bytes=self.pool.allocated_bytes,
                       buffer_limit_bytes=self.pool.limit_bytes, buffers_peak_out=self.pool.peak_outstanding,
                       buffer_requests=self.pool.requests, buffer_refusals=self.pool.refused,
                       buffer_spares=self.pool.spares, buffer_spared=self.pool.spared)
        if self._hub is not None:
            hub = self._hub
            out.update(callback_errors=hub.callback_errors, nvtx_scopes=hub.nvtx_scopes is not None,
                       nvtx_errors=hub.nvtx_errors, nvtx_unmatched_pops=hub.nvtx_unmatched,
                       graph_check=hub.graph_check, graphs_missing=len(hub.graph_warned))
        if self.collector is not None:
            out.update(self.collector.stats)
            out.update({"time_" + k: round(v, 6) for k, v in self.collector.timings.items()})
        return out

    # ------------------------------------------------------------------ start
    def _load(self) -> CuptiLib:
        if self.lib is None:
            self.lib = load_cupti(lib=self._lib_override)
        size = pool_buffer_bytes(self._buffer_bytes, self.activity_buffer_bytes)
        if self.pool is None:
            self.pool = BufferPool(size, self._max_buffers, can_decline=self.lib.can_decline_buffers)
            self.collector = Collector(self.lib, self.pool, self.parse_batch_buffers, self._warn_once)
        elif size != self.pool.buffer_bytes:        # the user's size changed since the last start
            self.pool = self.collector.pool = self.pool.resized(size)
        return self.lib

    def _start_collection(self, lib: CuptiLib, sink, python_context) -> None:
        self.clock_window_ns, self.clock_offset_ns = calibrate_clock(lib)
        self.attribution, forced = choose_attribution(self.clock_offset_ns)
        if self.attribution == "extcorr" and not forced:
            warnings.warn(f"proton_ctypes: CUPTI's clock differs from time.time_ns() by {self.clock_offset_ns} ns; "
                          "attributing kernels through external correlation ids instead of timestamps",
                          RuntimeWarning, stacklevel=3)
        # before the buffer callbacks: the per-thread buffer attribute must be set first
        self.launch_source, per_thread = choose_launch_source(lib, self.attribution == "extcorr",
                                                              serialized=self.mode.pc_sampling,
                                                              launch_callbacks=python_context is not None)
        lib.register_buffer_callbacks(self.pool.request_callback, self.pool.complete_callback)
        lib.set_thread_id_type(THREAD_ID_TYPE_SYSTEM)
        self.collector.begin(self._hub, sink, self.clock_offset_ns, extcorr=self.attribution == "extcorr",
                             launch_source=self.launch_source, per_thread_buffers=per_thread)
        if self.launch_source == LAUNCH_FROM_KERNEL and python_context is not None:
            # every launch's callback entry carries the id its kernel does (and its thread and
            # time): no kernel needs its ``queued`` stamp, which costs every launch CPU time
            lib.enable_latency_timestamps(False)
            self.collector.joiner.launch_from_python = True
        elif self.launch_source == LAUNCH_FROM_KERNEL and lazy_timestamps():
            lib.enable_latency_timestamps(False)
            self.collector.joiner.lazy = self._lazy_waiting = True
        self._hub.enable_graph_callbacks()
        if self.launch_source in KERNEL_RECORD_SOURCES:
            self._hub.enable_graph_launch_callbacks()
        self._hub.enable_graph_check()
        if self.graph_hooks is not None:
            self._hub.enable_capture_callbacks()
        self._start_nvtx(lib)
        if self._pc is not None:
            self._pc.enable_callbacks(self._hub)
        if python_context is not None:
            self._hub.enable_launch_callbacks()
        self._enable_activity(lib)
        self.collector.start_thread(self.mode.periodic_flushing, self.flush_interval_s)

    def _start_nvtx(self, lib: CuptiLib) -> None:
        """NVTX ranges as scopes (``TRITON_ENABLE_NVTX``, :mod:`.nvidia.nvtx`): the push/pop
        callbacks, then CUPTI as NVTX's injection library.  A CUPTI that refuses the NVTX
        callbacks costs one warning, not the profile."""
        if self.nvtx_scopes is None or not nvtx.enabled():
            return
        try:
            self._hub.enable_nvtx_callbacks(self.nvtx_scopes)
        except CuptiError as e:
            self._warn_once("nvtx", f"proton_ctypes: NVTX ranges are not recorded as scopes: {e}")
            return
        self._nvtx_injected = nvtx.inject(lib.path)

    def context_in_use(self, now_ns: int) -> None:
        """Launch positions (:mod:`.nvidia.positions`): every thread's position is marked at
        ``now_ns``.  Lazy latency timestamps (:func:`.nvidia.activity.lazy_timestamps`): the first
        context change switches them on; the kernels left unstamped get launch times before ``now_ns``."""
        positions = self.collector.positions if self.collector is not None else None
        if positions is not None:
            positions.snapshot(now_ns)
        if not self._lazy_waiting:
            return
        with self._lazy_lock:
            if not self._lazy_waiting:
                return
            self._lazy_waiting = False
            self.collector.joiner.lazy_bound_ns = int(now_ns)
            self.lib.enable_latency_timestamps(True)

    def edge_clock(self):
        """With launch positions, the clock that marks each thread's position at its log entries."""
        positions = self.collector.positions if self.collector is not None and self.running else None
        return positions and positions.clock

    def thread_edge_clock(self, tid: int):
        """The edge clock bound to thread ``tid``'s launch positions (no thread-local lookup)."""
        clock = self.edge_clock()
        return self.collector.positions.thread_clock(tid) if clock else super().thread_edge_clock(tid)

    def _enable_activity(self, lib: CuptiLib) -> None:
        """The activity kinds of the launch source (:func:`.nvidia.activity.enable_activity`); a separate
        method so that a diagnostic can switch on less (bench/overhead.py)."""
        enable_activity(lib, self.attribution == "extcorr", self._enabled_kinds, self.launch_source,
                        serialized=self.mode.pc_sampling)

    # ------------------------------------------------------------------ stop
    def _teardown(self, deliver: bool) -> None:
        """Stop the collector, switch CUPTI off, flush everything out and (if ``deliver``) hand it over."""
        clock = time.perf_counter
        collector = self.collector
        try:
            t0 = clock()
            if collector is not None:
                collector.stop_thread()
            t1 = clock()
            if deliver:
                try:
                    self._synchronize()
                except Exception as e:
                    self._warn_once("sync", f"proton_ctypes: device synchronisation failed at stop: {e!r}")
            t2 = clock()
            with self._lazy_lock:
                self._lazy_waiting = False
            for kind in self._enabled_kinds:
                self.lib.disable_kind(kind)
            self._enabled_kinds = []
            if self.launch_source in KERNEL_RECORD_SOURCES:
                self.lib.enable_latency_timestamps(False)
            if self._pc is not None:
                self._pc.finalize()
                if self._hub is not None:
                    self._pc.disable_callbacks(self._hub)
            if self._hub is not None:
                self._hub.unsubscribe()
            nvtx.withdraw(self._nvtx_injected)
            self._nvtx_injected = None
            t3 = clock()
            if self.lib is not None:
                self.lib.flush_all_quietly()
                if finalize_at_stop():
                    self.lib.finalize_quietly()
            t4 = clock()
            if collector is not None:
                for key, dt in (("stop_collector_s", t1 - t0), ("stop_sync_s", t2 - t1),
                                ("stop_disable_s", t3 - t2), ("stop_flush_s", t4 - t3)):
                    collector.add_time(key, dt)
                if deliver and collector.joiner is not None:
                    collector.drain(hold=False)
                else:
                    collector.discard_completed()
        finally:
            self.running = False
            if collector is not None:
                collector.sink = None
            if self in _ACTIVE:
                _ACTIVE.remove(self)

    def _stop_at_exit(self) -> None:
        with contextlib.suppress(Exception):
            self.stop()

    # ------------------------------------------------------------------ helpers
    def _make_pc_sampler(self, lib: CuptiLib) -> PCSampler:
        """``mode="pcsampling"``: the PC sampler, feeding each launch's samples to the tree."""
        if self.pc_attribution is None:
            raise RuntimeError("[PROTON] CuptiProfiler: pcsampling needs the profiler's sample attribution")
        sessions_active, attribute_samples = self.pc_attribution
        pc = PCSampler(lib, pc_sampling_period(self.mode.interval), self._synchronize,
                       lambda groups, symbol: attribute_samples(self, groups, symbol))
        pc.active = lambda: sessions_active(self)
        return pc

    def _get_driver(self):
        if self._driver is None:
            self._driver = required_driver()
        return self._driver

    def _synchronize(self) -> None:
        self._get_driver().synchronize()

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            warnings.warn(message, RuntimeWarning, stacklevel=2)
