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
``unmatched`` counts) is :class:`~.amd.parse.KernelJoiner`, and the timer, flush, stop and
device block are :class:`~.amd.collection.AmdCollection`, both shared with roctracer.
"""
from __future__ import annotations

import ctypes
import os
from typing import Callable, Optional

import numpy as np

from ..tree import strings
from .amd import lib as rocm_lib, parse as rocm_parse
from .amd import sdk_api as api
from .amd.collection import UNKNOWN_KERNEL, AmdCollection
from .amd.sdk_runtime import SdkRuntime, runtime_for
from .amd.layout import HIP_API_V0, HIP_API_V1, KERNEL_DISPATCH
from .base import ATTRIBUTION_EXTCORR, ATTRIBUTION_TIMESTAMP, DEFAULT_FLUSH_INTERVAL_S
from .modes import NO_MODE, Mode
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


class RocprofilerBackend(AmdCollection):
    """Kernel activity from rocprofiler-sdk, delivered as :data:`~.base.KERNEL_DTYPE` batches."""

    name = "rocprofiler"
    timer_name = "proton_ctypes-rocprof-flush"
    graph_metric_pool = True

    def __init__(self, lib=None, hip=None, environ=None, buffer_bytes: int = rocm_lib.DEFAULT_BUFFER_BYTES,
                 flush_interval_s: float = DEFAULT_FLUSH_INTERVAL_S,
                 synchronize: Optional[Callable[[], object]] = None):
        super().__init__(hip, environ, flush_interval_s, synchronize)
        self._lib_arg = lib
        self._buffer_bytes = buffer_bytes
        self.sdk: Optional[api.SdkLib] = None
        self.rt: Optional[SdkRuntime] = None

    # ------------------------------------------------------------------ contract
    def lost(self) -> list:
        """Records rocprofiler-sdk dropped (buffer callback ``drop_count``) and records we could not parse."""
        out = [(self.rt.sdk_dropped if self.rt else 0, "activity records dropped by rocprofiler-sdk"),
               (self._parse_dropped, "activity records we could not parse")]
        return [(int(n), what) for n, what in out if n]

    def configure(self) -> SdkRuntime:
        """Load the library and register the tool (idempotent; once per process per library)."""
        if self.rt is None:
            self.sdk = load_rocprofiler(self._lib_arg, self._environ)
            self.rt = runtime_for(self.sdk, buffer_bytes=self._buffer_bytes, environ=self._environ)
        return self.rt

    def start(self, sink, mode: Mode = NO_MODE, python_context=None) -> None:
        """Check the environment and mode, register the tool if needed, begin delivering to ``sink``."""
        self._begin(mode)
        if mode.pc_sampling:
            raise rocm_lib.ModeNotImplemented(
                f"[PROTON] {mode.profiler}: unsupported mode: {mode.kind.value} "
                "(PC sampling through rocprofiler-sdk is not implemented by proton_ctypes)")
        rt = self.configure()
        if not rt.initialized:
            raise RuntimeError("[PROTON] rocprofiler-sdk has not initialised the proton_ctypes tool")
        rt.calibration = rocm_lib.calibrate(rt.sdk.timestamp)    # again: REALTIME may have been stepped
        rt.python_context = python_context
        rt.activate(ATTRIBUTION_EXTCORR if self._wants_extcorr(rt.calibration, python_context)
                    else ATTRIBUTION_TIMESTAMP)
        self.attribution = rt.running
        rt.accepting = False                 # forget what ran between sessions
        rt.flush_buffer()
        rt.take()
        self._joiner.reset()
        self.sink = sink
        rt.accepting = True
        self._start_timer()

    def shutdown(self) -> None:
        """Stop every SDK context (process exit, tests). A later start() reuses the runtime."""
        self.stop()
        if self.rt is not None:
            self.rt.shutdown()

    # ------------------------------------------------------------------ the skeleton's hooks
    def _collecting(self) -> bool:
        return self.rt is not None

    def _collect(self, final: bool) -> np.ndarray:
        rt = self.rt
        rt.flush_buffer()
        items, log = rt.take()
        return self._parse(items, log, final)

    def _end_collection(self) -> None:
        self.rt.accepting = False
        self.rt.python_context = None

    def _agents_by_device(self) -> dict:
        return {a.get("device"): a for a in (self.rt.agents if self.rt else ()) if "device" in a}

    # ------------------------------------------------------------------ parsing
    def _parse(self, items, log, final: bool) -> np.ndarray:
        off, rt = self.rt.calibration.offset_ns, self.rt
        self._add_launch_log(log)  # external-correlation stamps first: they win over the API records
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
