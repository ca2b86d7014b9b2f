"""The CUPTI backend: kernel activity from CUPTI, driven from Python through ctypes.

No Python runs per kernel launch in the default context: CUPTI writes kernel records and
one launch-API record per launch (the deny-list recipe, gpu-backends.md §3) into buffers
we own (:mod:`.cupti_buffers`); a collector thread parses whole buffers with numpy
(:mod:`.cupti_parse`), joins kernels to their launching thread and launch time
(:mod:`.cupti_join`) and hands :data:`~.base.KERNEL_DTYPE` batches to the sink.

Attribution modes (:attr:`CuptiBackend.attribution`):

* ``"timestamp"`` (default): rows carry ``tid`` and ``launch_ns``; the tree joins them to
  each thread's scope log.  CUPTI's clock is checked against ``time.time_ns()`` at start.
* ``"extcorr"``: chosen when the clocks disagree by more than 50 µs, or forced with
  ``PROTON_CTYPES_ATTRIBUTION=extcorr``.  The profiler must then call
  :meth:`CuptiBackend.push_external` / :meth:`CuptiBackend.pop_external` at scope edges;
  rows carry the innermost pushed id in ``py_node``.
"""
from __future__ import annotations

import atexit
import ctypes
import os
import threading
import time
import warnings
from typing import Callable, Iterable, Optional

import numpy as np

from .nvidia import layout as L
from .nvidia.buffers import DEFAULT_BUFFER_BYTES, DEFAULT_MAX_BUFFERS, BufferPool
from .modes import parse_mode
from .nvidia.callbacks import OTHER_SUBSCRIBER_MESSAGE, CallbackHub, torch_profiler_active
from .nvidia.join import Joiner
from .nvidia.lib import (DRIVER_LAUNCH_CBIDS, EXTERNAL_CORRELATION_KIND_CUSTOM0, FLUSH_FORCED,
                         GRAPH_LAUNCH_CBIDS, MAX_CBID, RUNTIME_LAUNCH_CBIDS, THREAD_ID_TYPE_SYSTEM, CuptiLib,
                         load_cupti)
from .nvidia.parse import BufferParser, concat_columns

#: Largest |CUPTI clock - time.time_ns()| accepted for the timestamp join.
MAX_CLOCK_OFFSET_NS = 50_000
CLOCK_PAIRS = 64
DEFAULT_FLUSH_INTERVAL_S = 0.1
DEFAULT_PARSE_BATCH = 4
_ACTIVE = []  # the CuptiBackend currently started in this process (CUPTI allows one subscriber)


class CuptiBackend:
    """:class:`~.base.Backend` for NVIDIA GPUs through CUPTI's activity API."""

    name = "cupti"
    device_type = "CUDA"

    def __init__(self, lib=None, driver=None, buffer_bytes: int = DEFAULT_BUFFER_BYTES,
                 max_buffers: int = DEFAULT_MAX_BUFFERS, flush_interval_s: float = DEFAULT_FLUSH_INTERVAL_S,
                 parse_batch_buffers: Optional[int] = None):
        """``lib``: a fake libcupti for tests (default: load the real one at first start);
        ``driver``: an object with ``synchronize()`` and ``device_attributes(i)`` (default cuda-python);
        ``parse_batch_buffers``: the collector parses once this many buffers are waiting (or the
        pool runs low); default ``PROTON_CTYPES_PARSE_BATCH`` or 4.  Parsing holds the GIL, so
        fewer, larger rounds disturb the launching threads less."""
        self._lib_override = lib
        self._driver = driver
        self._buffer_bytes = buffer_bytes
        self._max_buffers = max_buffers
        self.flush_interval_s = flush_interval_s
        if parse_batch_buffers is None:
            parse_batch_buffers = int(os.environ.get("PROTON_CTYPES_PARSE_BATCH", DEFAULT_PARSE_BATCH))
        self.parse_batch_buffers = max(1, parse_batch_buffers)
        self.lib: Optional[CuptiLib] = None
        self.pool: Optional[BufferPool] = None
        self.running = False
        self.mode = ("", {})
        #: ``"timestamp"`` or ``"extcorr"`` (see the module docstring).
        self.attribution = "timestamp"
        #: CUPTI clock minus ``time.time_ns()`` measured at start, and the read window it came from.
        self.clock_offset_ns = 0
        self.clock_window_ns = 0
        self.kernel_stride = None
        self.stride_source = None
        self.cupti_dropped = 0
        self._sink = None
        self._hub = None
        self._pc = None
        #: ``(sessions_active(backend), attribute_samples(backend, groups))`` for pcsampling,
        #: given by the profiler before start (:mod:`proton_ctypes.core.pc_samples`)
        self.pc_attribution = None
        self._joiner = None
        self._parser = None
        self._enabled_kinds = []
        self._parse_lock = threading.RLock()
        self._stop_event = threading.Event()
        self._collector = None
        self._warned = set()
        self._atexit = False
        #: Cumulative seconds spent in flush phases and in the collector (diagnostics).
        self._timings = {}

    # ------------------------------------------------------------------ Backend protocol
    @property
    def dropped(self) -> int:
        """Records CUPTI dropped, plus records we could not use (no timestamps, unknown kinds)."""
        extra = 0
        if self._joiner is not None:
            extra += self._joiner.stats["invalid_time"]
        if self._parser is not None:
            extra += int(self._parser.stats["unparsed_bytes"] > 0)
        return self.cupti_dropped + extra

    def start(self, sink: Callable[[np.ndarray], None], mode: str = "",
              python_context: Optional[Callable[[], int]] = None) -> None:
        """Begin collecting kernels; hand each parsed batch to ``sink`` (from any thread)."""
        parsed_mode = parse_mode(self.name, mode)
        if self.running:
            raise RuntimeError("[PROTON] CuptiProfiler: already started")
        if _ACTIVE and _ACTIVE[0] is not self:
            raise RuntimeError("[PROTON] another proton_ctypes CUPTI backend is already profiling this process")
        if torch_profiler_active():
            raise RuntimeError(OTHER_SUBSCRIBER_MESSAGE)
        lib = self._load()
        self.mode = parsed_mode
        self._sink = sink
        self._hub = CallbackHub(lib)
        self._pc = self._hub.pc = self._make_pc_sampler(lib) if parsed_mode[0] == "pcsampling" else None
        self._hub.subscribe(python_context)  # first: detects another CUPTI user before touching anything
        _ACTIVE.append(self)
        try:
            self._start_collection(lib, python_context)
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
        self.lib.call("cuptiActivityFlushAll", 0)
        self._time("sync_s", t1 - t0)
        self._time("cupti_flush_s", time.perf_counter() - t1)
        self._drain(hold=False)

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
        code = self._push(EXTERNAL_CORRELATION_KIND_CUSTOM0, external_id)
        if code:
            self.lib.check("cuptiActivityPushExternalCorrelationId", code)

    def pop_external(self) -> int:
        """Pop this thread's innermost external-correlation id and return it."""
        out = ctypes.c_uint64()
        code = self._pop(EXTERNAL_CORRELATION_KIND_CUSTOM0, ctypes.byref(out))
        if code:
            self.lib.check("cuptiActivityPopExternalCorrelationId", code)
        return int(out.value)

    @property
    def stats(self) -> dict:
        """Diagnostics: buffer, parse and join counters, clock and stride, where libcupti came from."""
        out = {"attribution": self.attribution, "clock_offset_ns": self.clock_offset_ns,
               "clock_window_ns": self.clock_window_ns, "kernel_stride": self.kernel_stride,
               "stride_source": self.stride_source, "cupti_dropped": self.cupti_dropped}
        if self.lib is not None:
            out.update(cupti_source=self.lib.source, cupti_path=self.lib.path, cupti_version=self.lib.version)
        if self.pool is not None:
            out.update(buffers_allocated=self.pool._allocated, buffer_bytes=self.pool.allocated_bytes,
                       buffer_requests=self.pool.requests, buffer_refusals=self.pool.refused)
        if self._parser is not None:
            out.update({"parse_" + k: v for k, v in self._parser.stats.items()})
        if self._joiner is not None:
            out.update({"join_" + k: v for k, v in self._joiner.stats.items()})
        out.update({"time_" + k: round(v, 6) for k, v in self._timings.items()})
        return out

    # ------------------------------------------------------------------ start
    def _load(self) -> CuptiLib:
        if self.lib is None:
            self.lib = load_cupti(lib=self._lib_override)
            self._push = self.lib.fn("cuptiActivityPushExternalCorrelationId")
            self._pop = self.lib.fn("cuptiActivityPopExternalCorrelationId")
        if self.pool is None:
            self.pool = BufferPool(self._buffer_bytes, self._max_buffers)
        return self.lib

    def _start_collection(self, lib: CuptiLib, python_context) -> None:
        lib.call("cuptiActivityRegisterCallbacks", self.pool.request_callback, self.pool.complete_callback)
        lib.call("cuptiSetThreadIdType", THREAD_ID_TYPE_SYSTEM)
        self._calibrate_clock()
        forced = os.environ.get("PROTON_CTYPES_ATTRIBUTION", "").strip().lower() == "extcorr"
        self.attribution = "timestamp"
        if forced or abs(self.clock_offset_ns) > MAX_CLOCK_OFFSET_NS:
            self.attribution = "extcorr"
            if not forced:
                warnings.warn(f"proton_ctypes: CUPTI's clock differs from time.time_ns() by {self.clock_offset_ns} ns; "
                              "attributing kernels through external correlation ids instead of timestamps",
                              RuntimeWarning, stacklevel=3)
        if self.kernel_stride is None:
            self.kernel_stride = L.expected_kernel_stride(lib.version)
            self.stride_source = "version table"
        start_ts = time.time_ns() + self.clock_offset_ns
        self._parser = BufferParser(self.kernel_stride, ts_lo=start_ts - 3600 * 10**9,
                                    ts_hi=start_ts + 365 * 86400 * 10**9)
        self._joiner = Joiner(self.clock_offset_ns, self._hub.resolve_graph_nodes,
                              graph_launch_cbids=GRAPH_LAUNCH_CBIDS)
        self._hub.enable_graph_callbacks()
        if self._pc is not None:
            self._pc.enable_callbacks(self._hub)
        if python_context is not None:
            self._hub.enable_launch_callbacks()
        self._enable_activity(lib)
        self._stop_event.clear()
        self._collector = threading.Thread(target=self._collect, name="proton_ctypes-cupti", daemon=True)
        self._collector.start()

    def _calibrate_clock(self) -> None:
        """Offset of CUPTI's clock from ``time.time_ns()``: the pair with the tightest read window wins."""
        stamp = ctypes.c_uint64()
        ref = ctypes.byref(stamp)
        get = self.lib.fn("cuptiGetTimestamp")
        now = time.time_ns
        best = None
        for _ in range(CLOCK_PAIRS):
            before = now()
            code = get(ref)
            after = now()
            if code:
                self.lib.check("cuptiGetTimestamp", code)
            window = after - before
            if best is None or window < best[0]:
                best = (window, stamp.value - (before + after) // 2)
        self.clock_window_ns, self.clock_offset_ns = best

    def _enable_activity(self, lib: CuptiLib) -> None:
        """Kernel records plus launch-API records only: enable the API kinds, then deny every other cbid."""
        kinds = [L.KIND_CONCURRENT_KERNEL, L.KIND_DRIVER, L.KIND_RUNTIME]
        if self.attribution == "extcorr":
            kinds.append(L.KIND_EXTERNAL_CORRELATION)
        for kind in kinds:
            lib.call("cuptiActivityEnable", kind)
            self._enabled_kinds.append(kind)
        # After the kinds: enabling a kind resets its per-cbid filter (gpu-backends.md §9.1).
        keep_driver, keep_runtime = set(DRIVER_LAUNCH_CBIDS.values()), set(RUNTIME_LAUNCH_CBIDS.values())
        driver_api, runtime_api = lib.fn("cuptiActivityEnableDriverApi"), lib.fn("cuptiActivityEnableRuntimeApi")
        for cbid in range(1, MAX_CBID):
            if cbid not in keep_driver:
                driver_api(cbid, 0)  # ids that do not exist fail harmlessly
            if cbid not in keep_runtime:
                runtime_api(cbid, 0)

    # ------------------------------------------------------------------ collection
    def _collect(self) -> None:
        """Collector thread: parse completed buffers as they arrive; in periodic mode also flush on a timer."""
        try:
            # numpy >= 2 imports numpy.ma on the first np.unique (~15-50 ms): pay it here, off
            # the launching thread, rather than in the first finalize
            import numpy.ma  # noqa: F401
        except Exception:
            pass
        periodic = self.mode[0] == "periodic_flushing"
        interval = self.flush_interval_s
        next_flush = time.monotonic() + interval
        wake, stop = self.pool.wake, self._stop_event
        while not stop.is_set():
            timeout = max(0.0, next_flush - time.monotonic()) if periodic else 0.5
            wake.wait(timeout)
            wake.clear()
            if stop.is_set():
                break
            try:
                if periodic and time.monotonic() >= next_flush:
                    next_flush = time.monotonic() + interval
                    self.lib.call("cuptiActivityFlushAll", 0)
                if periodic or self._parse_due():
                    self._drain(hold=True)
            except Exception as e:  # never let the collector die silently
                self._warn_once("collector", f"proton_ctypes: CUPTI collector error: {e!r}")

    def _parse_due(self) -> bool:
        """Parse now: enough buffers wait, or so many are out that CUPTI could run short."""
        pool = self.pool
        waiting = len(pool.completed)
        if not waiting:
            return False
        spare = pool.max_buffers - pool.outstanding
        return waiting >= self.parse_batch_buffers or spare <= 2

    def _drain(self, hold: bool) -> None:
        """Parse every completed buffer, recycle it, join and deliver one batch to the sink."""
        with self._parse_lock:
            t0 = time.perf_counter()
            kernels, api, ext = [], [], []
            for address, valid in self.pool.take_completed():
                if not self.pool.owns(address):
                    continue
                buf = self.pool.array(address)
                try:
                    if self.stride_source != "walk" and valid:
                        self._detect_stride(address, buf, valid)
                    parts = self._parser.parse(buf, valid)
                finally:
                    self.pool.release(address)
                for kind, cols in parts.items():
                    if kind == L.KIND_CONCURRENT_KERNEL:
                        kernels.append(cols)
                    elif kind in (L.KIND_DRIVER, L.KIND_RUNTIME):
                        api.append(cols)
                    elif kind == L.KIND_EXTERNAL_CORRELATION:
                        ext.append(cols)
            t1 = time.perf_counter()
            joiner = self._joiner
            joiner.add_api(concat_columns(api))
            joiner.add_external(concat_columns(ext))
            joiner.add_python(self._hub.take_python_entries())
            batch = joiner.join(concat_columns(kernels), hold=hold)
            self._count_dropped()
            self._check_api_records()
            t2 = time.perf_counter()
            if len(batch) and self._sink is not None:
                self._sink(batch)
            self._time("parse_s", t1 - t0)
            self._time("join_s", t2 - t1)
            self._time("sink_s", time.perf_counter() - t2)

    def _time(self, key: str, seconds: float) -> None:
        self._timings[key] = self._timings.get(key, 0.0) + seconds

    def _detect_stride(self, address: int, buf: np.ndarray, valid: int) -> None:
        """Measure the kernel record size with ``cuptiActivityGetNextRecord`` on the first kernel seen."""
        if not (buf[: valid - valid % 8].view("<u4")[0::2] == L.KIND_CONCURRENT_KERNEL).any():
            return
        get_next = self.lib.fn("cuptiActivityGetNextRecord")
        record = ctypes.c_void_p(None)
        ref = ctypes.byref(record)
        kernel_at = None
        stride = None
        for _ in range(1 << 16):
            if get_next(address, valid, ref) != 0:
                if kernel_at is not None:
                    stride = address + valid - kernel_at
                break
            if kernel_at is not None:
                stride = record.value - kernel_at
                break
            if ctypes.c_uint32.from_address(record.value).value == L.KIND_CONCURRENT_KERNEL:
                kernel_at = record.value
        if stride is None:
            return
        expected = L.expected_kernel_stride(self.lib.version)
        if stride != expected:
            self._warn_once("stride", f"proton_ctypes: CUPTI {self.lib.version} writes {stride}-byte kernel records, "
                                      f"the version table says {expected}; using {stride}")
        self.kernel_stride, self.stride_source = stride, "walk"
        self._parser.set_kernel_stride(stride)

    def _count_dropped(self) -> None:
        dropped = ctypes.c_size_t()
        if self.lib.try_call("cuptiActivityGetNumDroppedRecords", None, 0, ctypes.byref(dropped)) == 0:
            self.cupti_dropped += int(dropped.value)

    def _check_api_records(self) -> None:
        stats = self._joiner.stats
        if stats["kernels"] >= 16 and stats["api_records"] == 0:
            self._warn_once("api", "proton_ctypes: CUPTI delivered kernel records but no launch-API records; "
                                   "kernels are attributed to the root of their thread's tree")

    # ------------------------------------------------------------------ stop
    def _teardown(self, deliver: bool) -> None:
        """Stop the collector, switch CUPTI off, flush everything out and (if ``deliver``) hand it over."""
        clock = time.perf_counter
        try:
            t0 = clock()
            self._stop_event.set()
            if self.pool is not None:
                self.pool.wake.set()
            collector, self._collector = self._collector, None
            if collector is not None and collector is not threading.current_thread():
                collector.join(timeout=10)
            t1 = clock()
            if deliver:
                try:
                    self._synchronize()
                except Exception as e:
                    self._warn_once("sync", f"proton_ctypes: device synchronisation failed at stop: {e!r}")
            t2 = clock()
            for kind in self._enabled_kinds:
                self.lib.try_call("cuptiActivityDisable", kind)
            self._enabled_kinds = []
            if self._pc is not None:
                self._pc.finalize()
                if self._hub is not None:
                    self._pc.disable_callbacks(self._hub)
            if self._hub is not None:
                self._hub.unsubscribe()
            t3 = clock()
            if self.lib is not None:
                self.lib.try_call("cuptiActivityFlushAll", FLUSH_FORCED)
            t4 = clock()
            for key, dt in (("stop_collector_s", t1 - t0), ("stop_sync_s", t2 - t1),
                            ("stop_disable_s", t3 - t2), ("stop_flush_s", t4 - t3)):
                self._time(key, dt)
            if deliver and self._joiner is not None:
                self._drain(hold=False)
            elif self.pool is not None:
                for address, _ in self.pool.take_completed():
                    self.pool.release(address)
        finally:
            self.running = False
            self._sink = None
            if self in _ACTIVE:
                _ACTIVE.remove(self)

    def _stop_at_exit(self) -> None:
        try:
            self.stop()
        except Exception:
            pass

    # ------------------------------------------------------------------ helpers
    def _make_pc_sampler(self, lib: CuptiLib):
        """``mode="pcsampling"``: the PC sampler, feeding each launch's samples to the tree."""
        from .nvidia.pcsampling import PCSampler, pc_sampling_period
        if self.pc_attribution is None:
            raise RuntimeError("[PROTON] CuptiProfiler: pcsampling needs the profiler's sample attribution")
        sessions_active, attribute_samples = self.pc_attribution
        pc = PCSampler(lib, pc_sampling_period(self.mode[1]["interval"]), self._synchronize,
                       lambda groups: attribute_samples(self, groups))
        pc.active = lambda: sessions_active(self)
        return pc

    def _get_driver(self):
        if self._driver is None:
            from .nvidia.device import CudaDriver
            self._driver = CudaDriver()
        return self._driver

    def _synchronize(self) -> None:
        self._get_driver().synchronize()

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            warnings.warn(message, RuntimeWarning, stacklevel=2)
