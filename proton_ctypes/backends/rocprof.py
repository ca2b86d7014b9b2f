"""The rocprofiler-sdk backend (``backend="rocprofiler"``, ``device_type`` ``"HIP"``).

Collection is set up once per process by :mod:`.amd.sdk_runtime` (force-configured
tool, buffer tracing of kernel dispatches and HIP launch APIs, code-object callbacks for
kernel names). This module turns what the buffer callbacks queued into kernel batches:

* kernel dispatch records (``rocprofiler_buffer_tracing_kernel_dispatch_record_t``) give
  start/end, agent (-> device index), queue (-> stream lane), kernel id (-> name id) and
  the launching thread;
* HIP API records joined by internal correlation id give ``launch_ns`` (the API start);
  in the external-correlation fallback the Python-clock stamp taken on the launching
  thread is used instead, and the python-context node with it;
* SDK timestamps (CLOCK_BOOTTIME) are moved to ``time.time_ns()`` by the calibrated offset.

The join itself (one round of waiting for a late launch record, ``invalid`` and
``unmatched`` counts) is :class:`~.amd.parse.KernelJoiner`, shared with roctracer.
"""
from __future__ import annotations

import ctypes
import os
import threading
from typing import Callable, Iterable, Optional

import numpy as np

from ..tree import strings
from .amd import devices as rocm_devices, lib as rocm_lib, parse as rocm_parse
from .amd import sdk_api as api
from .amd.sdk_runtime import SdkRuntime, runtime_for
from .amd.layout import HIP_API_V0, HIP_API_V1, KERNEL_DISPATCH
from .base import DEFAULT_FLUSH_INTERVAL_S
from .modes import PROFILER_NAMES, parse_mode

UNKNOWN_KERNEL = "<unknown>"
_KD_FIELDS = ("size", "corr_internal", "thread_id", "start", "end", "agent_id", "queue_id", "kernel_id")


REGISTER_SONAME = "librocprofiler-register.so"


def _open_sdk(path: str):
    """``dlopen(path, RTLD_GLOBAL)`` after making librocprofiler-register globally visible
    (mapped copy first, else the one beside the SDK): ROCm 7.2 needs it loaded globally
    before the SDK, and Proton promotes both libraries in that order."""
    here = os.path.dirname(path)
    for reg in rocm_lib.mapped_paths(REGISTER_SONAME) + ([os.path.join(here, REGISTER_SONAME)] if here else []) + \
            [REGISTER_SONAME]:
        try:
            ctypes.CDLL(reg, mode=ctypes.RTLD_GLOBAL)
            break
        except OSError:
            continue
    return ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)


def load_rocprofiler(lib=None, environ=None) -> api.SdkLib:
    """Load librocprofiler-sdk (knobs, mapped copy, ROCm install; or the object ``lib``) and
    declare it. Raises ``RuntimeError("[PROTON] Could not load `librocprofiler-sdk.so`")``."""
    return api.SdkLib.load(lib, environ, opener=_open_sdk)


def configure_early(lib=None) -> None:
    """Register the tool now (call before the first HIP call when the SDK predates late start)."""
    runtime_for(load_rocprofiler(lib))


class RocprofilerBackend:
    """Kernel activity from rocprofiler-sdk, delivered as :data:`~.base.KERNEL_DTYPE` batches."""

    name = "rocprofiler"
    device_type = "HIP"

    def __init__(self, lib=None, hip=None, environ=None, buffer_bytes: int = rocm_lib.DEFAULT_BUFFER_BYTES,
                 flush_interval_s: float = DEFAULT_FLUSH_INTERVAL_S,
                 synchronize: Optional[Callable[[], object]] = None):
        self._lib_arg, self._hip, self._environ = lib, hip, environ
        self._buffer_bytes = buffer_bytes
        self.flush_interval_s = flush_interval_s
        self._synchronize = synchronize
        self.sdk: Optional[api.SdkLib] = None
        self.rt: Optional[SdkRuntime] = None
        self.sink = None
        self.mode, self.mode_options = "", {}
        self.attribution = "timestamp"
        self._parse_dropped = 0
        self._joiner = rocm_parse.KernelJoiner()
        self._queues = rocm_parse.IdMap()
        self._flush_lock = threading.RLock()
        self._timer: Optional[threading.Thread] = None
        self._timer_stop = threading.Event()

    # ------------------------------------------------------------------ protocol
    @property
    def invalid(self) -> int:
        """Kernel records skipped because ``start >= end`` (Proton skips them too)."""
        return self._joiner.invalid

    @property
    def unmatched(self) -> int:
        """Kernels delivered without a launch-API record (``launch_ns = start_ns``)."""
        return self._joiner.unmatched

    @property
    def dropped(self) -> int:
        """Records rocprofiler-sdk dropped (buffer callback ``drop_count``) or we could not parse."""
        return (self.rt.sdk_dropped if self.rt else 0) + self._parse_dropped

    def configure(self) -> SdkRuntime:
        """Load the library and register the tool (idempotent; once per process per library)."""
        if self.rt is None:
            self.sdk = load_rocprofiler(self._lib_arg, self._environ)
            self.rt = runtime_for(self.sdk, buffer_bytes=self._buffer_bytes, environ=self._environ)
        return self.rt

    def start(self, sink, mode, python_context=None) -> None:
        """Check the environment and mode, register the tool if needed, begin delivering to ``sink``."""
        rocm_lib.check_amd_env(self._environ)
        name, opts = parse_mode("rocprofiler", mode)
        if name == "pcsampling":
            raise rocm_lib.ModeNotImplemented(
                f"[PROTON] {PROFILER_NAMES['rocprofiler']}: unsupported mode: pcsampling "
                "(PC sampling through rocprofiler-sdk is not implemented by proton_ctypes)")
        rt = self.configure()
        if not rt.initialized:
            raise RuntimeError("[PROTON] rocprofiler-sdk has not initialised the proton_ctypes tool")
        self.mode, self.mode_options = name, opts
        rt.calibration = rocm_lib.calibrate(rt.sdk.timestamp)    # again: REALTIME may have been stepped
        override = rocm_lib.attribution_override(self._environ)
        ext = override == "extcorr" or python_context is not None or \
            (override != "timestamp" and not rt.calibration.agrees)
        rt.python_context = python_context
        rt.activate("extcorr" if ext else "timestamp")
        self.attribution = rt.running
        rt.accepting = False                 # forget what ran between sessions
        rt.flush_buffer()
        rt.take()
        self._joiner.reset()
        self.sink = sink
        rt.accepting = True
        if name == "periodic_flushing":
            self._timer_stop.clear()
            self._timer = threading.Thread(target=self._periodic, name="proton_ctypes-rocprof-flush", daemon=True)
            self._timer.start()

    def flush(self) -> None:
        """Synchronise the device, flush the SDK buffer and deliver every record completed so far."""
        self._flush(sync=True, final=False)

    def stop(self) -> None:
        """Stop the timer, flush everything (unmatched kernels included); the context keeps running."""
        self._timer_stop.set()
        if self._timer is not None and self._timer is not threading.current_thread():
            self._timer.join()
        self._timer = None
        if self.rt is not None:
            self._flush(sync=True, final=True)
            self.rt.accepting = False
            self.rt.python_context = None
        self.sink = None

    def shutdown(self) -> None:
        """Stop every SDK context (process exit, tests). A later start() reuses the runtime."""
        self.stop()
        if self.rt is not None:
            self.rt.shutdown()

    def device_info(self, devices: Iterable[int]) -> dict:
        """``{"HIP": {"0": {arch, bus_width, clock_rate, memory_clock_rate, num_sms}}}`` (``{}`` if none)."""
        out = {}
        by_dev = {a.get("device"): a for a in (self.rt.agents if self.rt else ()) if "device" in a}
        for d in sorted(set(int(x) for x in devices)):
            info = rocm_devices.hip_device_info(d, self._hip)
            if info is None and d in by_dev:
                info = rocm_devices.agent_device_info(by_dev[d])
            out[str(d)] = info if info is not None else {}
        return {"HIP": out} if out else {}

    # ------------------------------------------------------------------ work
    def _periodic(self) -> None:
        while not self._timer_stop.wait(self.flush_interval_s):
            try:
                self._flush(sync=False, final=False)
            except Exception:
                pass

    def _flush(self, sync: bool, final: bool) -> None:
        rt = self.rt
        if rt is None:
            return
        with self._flush_lock:
            if sync:
                (self._synchronize or (lambda: rocm_devices.device_synchronize(self._hip)))()
            rt.flush_buffer()
            items, log = rt.take()
            batch = self._parse(items, log, final)
            sink = self.sink
        if sink is not None and len(batch):
            sink(batch)

    def _parse(self, items, log, final: bool) -> np.ndarray:
        off, rt = self.rt.calibration.offset_ns, self.rt
        if log:  # external-correlation stamps first: they win over the API records
            a = np.array(log, dtype=np.int64).reshape(-1, rocm_parse.LAUNCH_LOG_FIELDS)
            self._joiner.add_launches(a[:, 0], a[:, 1], a[:, 2], a[:, 3])
        parts = []
        for kind, offs, blob in items:
            ha = kind == api.BUFFER_TRACING_HIP_RUNTIME_API
            if ha.any():
                self._add_api(blob, offs[ha], off)
            kd = kind == api.BUFFER_TRACING_KERNEL_DISPATCH
            if kd.any():
                parts.append(rocm_parse.gather(blob, offs[kd], KERNEL_DISPATCH, _KD_FIELDS))
        kd = np.concatenate(parts) if parts else np.zeros(0, dtype=KERNEL_DISPATCH)
        bad = kd["size"] < KERNEL_DISPATCH.itemsize
        if bad.any():
            self._parse_dropped += int(bad.sum())
            kd = kd[~bad]
        names = rocm_parse.IdMap(default=strings.intern(UNKNOWN_KERNEL))
        names.table = rt.kernel_names
        devices = rocm_parse.IdMap(default=0)   # unknown agents are device 0, as in Proton
        devices.table = rt.agent_device
        rows = {"corr": kd["corr_internal"].astype(np.int64), "tid": kd["thread_id"].astype(np.int64),
                "start": kd["start"].astype(np.int64) + off, "end": kd["end"].astype(np.int64) + off,
                "device": devices.lookup(kd["agent_id"]), "stream": self._queues.lookup(kd["queue_id"], True),
                "name_id": names.lookup(kd["kernel_id"])}
        return self._joiner.join(rows, final)

    def _add_api(self, blob, offs, off) -> None:
        sizes = rocm_parse.gather(blob, offs, np.dtype([("size", "<u8")]))["size"]
        for dt, sel in ((HIP_API_V0, sizes == HIP_API_V0.itemsize), (HIP_API_V1, sizes >= HIP_API_V1.itemsize)):
            if sel.any():
                rec = rocm_parse.gather(blob, offs[sel], dt, ("corr_internal", "start", "thread_id"))
                self._joiner.add_launches(rec["corr_internal"].astype(np.int64),
                                          rec["start"].astype(np.int64) + off, rec["thread_id"].astype(np.int64))
        self._parse_dropped += int(((sizes != HIP_API_V0.itemsize) & (sizes < HIP_API_V1.itemsize)).sum())
