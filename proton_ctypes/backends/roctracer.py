"""The roctracer backend (``backend="roctracer"``, ``device_type`` ``"HIP"``): the fallback
when rocprofiler-sdk is absent (ROCm < 6.2), same interface.

Per session (as Proton's RoctracerProfiler does): open the default activity pool with a
ctypes buffer callback, enable activity for the HIP_OPS domain (kernel records,
``roctracer_record_t`` with begin/end, device, queue, kernel name) and for the HIP API
launch operations only (``roctracer_enable_op_activity``; records with thread id and
begin time), ``roctracer_start``; at stop, the reverse and ``roctracer_close_pool``.
The buffer callback runs on roctracer's thread and only copies ``[begin, end)`` out and
enqueues it. Kernels are joined to their launch records by correlation id, timestamps
moved to ``time.time_ns()`` with the ``roctracer_get_timestamp`` calibration, device ids
made HIP indices by subtracting the smallest HSA GPU node id (Proton's mapping).

Fallback when the roctracer clock matches no Python clock, when
``PROTON_CTYPES_ATTRIBUTION=extcorr``, or for ``context="python"``: an API callback on the
launch operations stamps ``time.time_ns()`` (and the python-context node) at ENTER on the
launching thread -- a Python call per launch, used only then.
"""
from __future__ import annotations

import collections
import ctypes
import os
import threading
import time
from typing import Callable, Optional

import numpy as np

from ..tree import strings
from .amd import hsa as rocm_hsa, lib as rocm_lib, parse as rocm_parse
from .amd.collection import UNKNOWN_KERNEL, AmdCollection
from .amd import tracer_api as rt_api
from .amd.layout import (HIP_API_DATA_CORRELATION, HIP_API_DATA_PHASE, ROCTRACER_DOMAIN_HIP_API,
                         ROCTRACER_DOMAIN_HIP_OPS, ROCTRACER_KIND_KERNEL, ROCTRACER_KIND_TASK,
                         ROCTRACER_RECORD)
from .base import ATTRIBUTION_EXTCORR, ATTRIBUTION_TIMESTAMP, DEFAULT_FLUSH_INTERVAL_S
from .modes import NO_MODE, Mode


def load_roctracer(lib=None, environ=None) -> rt_api.TracerLib:
    """Load libroctracer64 (knobs, mapped copy, ROCm install; or the object ``lib``) and
    declare it. Raises ``RuntimeError("[PROTON] Could not load `libroctracer64.so`")``."""
    return rt_api.TracerLib.load(lib, environ)


class RoctracerBackend(AmdCollection):
    """Kernel activity from roctracer, delivered as :data:`~.base.KERNEL_DTYPE` batches."""

    name = "roctracer"
    timer_name = "proton_ctypes-roctracer-flush"

    def __init__(self, lib=None, hsa=None, hip=None, environ=None, buffer_bytes: Optional[int] = None,
                 flush_interval_s: float = DEFAULT_FLUSH_INTERVAL_S,
                 synchronize: Optional[Callable[[], object]] = None):
        super().__init__(hip, environ, flush_interval_s, synchronize)
        self._lib_arg, self._hsa_arg = lib, hsa
        env = os.environ if environ is None else environ
        self._buffer_bytes = buffer_bytes or int(env.get("TRITON_PROFILE_BUFFER_SIZE", rocm_lib.DEFAULT_BUFFER_BYTES))
        self.tracer: Optional[rt_api.TracerLib] = None
        self.calibration = None
        self.ops = {}
        self.device_offset = None
        self.gpu_agents = []
        self.running = False
        self.tracer_dropped = 0
        self._accepting = False
        self._python_context = None
        self._pending, self._api_log = [], collections.deque()
        self._lock = threading.Lock()
        self._names = {}
        self._cb_buffer = rt_api.BUFFER_CALLBACK(self._on_buffer)
        self._cb_api = rt_api.API_CALLBACK(self._on_api)
        self._properties = None

    # ------------------------------------------------------------------ contract
    def lost(self) -> list:
        """Records roctracer dropped and records we could not parse (a buffer whose length is not a
        whole number of records)."""
        out = [(self.tracer_dropped, "activity records dropped by roctracer"),
               (self._parse_dropped, "activity records we could not parse")]
        return [(int(n), what) for n, what in out if n]

    def start(self, sink, mode: Mode = NO_MODE, python_context=None) -> None:
        """Check the environment, load roctracer, open the pool and start tracing."""
        self._begin(mode)
        if self.tracer is None:
            self.tracer = load_roctracer(self._lib_arg, self._environ)
        tr = self.tracer
        self.calibration = rocm_lib.calibrate(tr.timestamp)   # per session: REALTIME may have been stepped
        if self.device_offset is None:
            self.gpu_agents = self._hsa_agents()
            self.device_offset = self.gpu_agents[0]["node_id"] if self.gpu_agents else 0
        self.ops = {n: op for n in rt_api.HIP_LAUNCH_OPERATIONS
                    if (op := tr.op_code(rt_api.ACTIVITY_DOMAIN_HIP_API, n)) is not None}
        ext = self._wants_extcorr(self.calibration, python_context)
        self.attribution = ATTRIBUTION_EXTCORR if ext else ATTRIBUTION_TIMESTAMP
        self._python_context = python_context
        self._joiner.reset()
        self._pending = []
        self._api_log.clear()
        self._properties = rt_api.Properties(0, self._buffer_bytes, rt_api.ALLOCATOR(), None, self._cb_buffer, None)
        tr.call("roctracer_open_pool", ctypes.byref(self._properties))
        try:
            for op in self.ops.values():
                tr.call("roctracer_enable_op_activity", rt_api.ACTIVITY_DOMAIN_HIP_API, op)
                if ext:
                    tr.call("roctracer_enable_op_callback", rt_api.ACTIVITY_DOMAIN_HIP_API, op, self._cb_api, None)
            tr.call("roctracer_enable_domain_activity", rt_api.ACTIVITY_DOMAIN_HIP_OPS)
        except rt_api.RoctracerError:
            self._disable(quiet=True)
            raise
        self.sink = sink
        self._accepting = True
        tr.raw("roctracer_start")
        self.running = True
        self._start_timer()

    def _disable(self, quiet: bool) -> None:
        """Undo what start() enabled, then close the pool (``quiet``: ignore failures)."""
        tr, hip_api = self.tracer, rt_api.ACTIVITY_DOMAIN_HIP_API
        steps = [("roctracer_disable_op_callback", hip_api, op) for op in self.ops.values()
                 if self.attribution == ATTRIBUTION_EXTCORR]
        steps += [("roctracer_disable_domain_activity", rt_api.ACTIVITY_DOMAIN_HIP_OPS)]
        steps += [("roctracer_disable_op_activity", hip_api, op) for op in self.ops.values()]
        steps += [("roctracer_close_pool",)]
        for step in steps:
            try:
                tr.call(*step)
            except rt_api.RoctracerError:
                if not quiet:
                    raise

    # ------------------------------------------------------------------ the skeleton's hooks
    def _collecting(self) -> bool:
        return self.running

    def _collect(self, final: bool) -> np.ndarray:
        self.tracer.call("roctracer_flush_activity")
        with self._lock:
            blobs, self._pending = self._pending, []
        return self._parse(blobs, rocm_parse.drain(self._api_log), final)

    def _end_collection(self) -> None:
        """``roctracer_stop``, disable the domains and close the pool."""
        self.tracer.raw("roctracer_stop")
        self._accepting = False
        self._disable(quiet=False)
        self.running = False
        self._python_context = None

    def _agents_by_device(self) -> dict:
        return {a["node_id"] - (self.device_offset or 0): a for a in self.gpu_agents}

    # ------------------------------------------------------------------ callbacks
    def _on_buffer(self, begin, end, arg):
        try:
            if not self._accepting or not begin or not end or end <= begin:
                return
            blob = ctypes.string_at(begin, end - begin)
            with self._lock:
                self._pending.append(blob)
        except BaseException:
            self.tracer_dropped += 1

    def _on_api(self, domain, cid, data, arg):
        try:
            if not data or ctypes.c_uint32.from_address(data + HIP_API_DATA_PHASE).value != \
                    rt_api.ACTIVITY_API_PHASE_ENTER:
                return
            t = time.time_ns()
            corr = ctypes.c_uint64.from_address(data + HIP_API_DATA_CORRELATION).value
            py = self._python_context() if self._python_context is not None else -1
            self._api_log.append((int(corr), t, threading.get_native_id(), int(py)))
        except BaseException:
            pass

    # ------------------------------------------------------------------ work
    def _hsa_agents(self) -> list:
        try:
            return rocm_hsa.gpu_agents(rocm_hsa.load_hsa(self._hsa_arg, self._environ))
        except Exception:
            return []

    def _parse(self, blobs, log, final: bool) -> np.ndarray:
        size = ROCTRACER_RECORD.itemsize
        whole = []
        for b in blobs:
            if len(b) % size:
                self._parse_dropped += 1
            whole.append(b[:len(b) - len(b) % size])
        rec = np.frombuffer(b"".join(whole), dtype=ROCTRACER_RECORD)
        off = self.calibration.offset_ns
        self._add_launch_log(log)  # Python-clock stamps first: they win over the API records
        api = rec[rec["domain"] == ROCTRACER_DOMAIN_HIP_API]
        if len(api):
            self._joiner.add_launches(api["correlation_id"].astype(np.int64), api["begin_ns"].astype(np.int64) + off,
                                      api["thread_id"].astype(np.int64))
        k = rec[(rec["domain"] == ROCTRACER_DOMAIN_HIP_OPS) &
                np.isin(rec["kind"], (ROCTRACER_KIND_KERNEL, ROCTRACER_KIND_TASK))]
        rows = {"corr": k["correlation_id"].astype(np.int64), "tid": np.full(len(k), -1, dtype=np.int64),
                "start": k["begin_ns"].astype(np.int64) + off, "end": k["end_ns"].astype(np.int64) + off,
                "device": np.maximum(k["device_id"].astype(np.int64) - (self.device_offset or 0), 0),
                "stream": self._queues.lookup(k["queue_id"], True), "name_id": self._name_ids(k["kernel_name"])}
        return self._joiner.join(rows, final)  # tid -1: taken from the launch record

    def _name_ids(self, ptrs: np.ndarray) -> np.ndarray:
        """Kernel name ids from the records' ``kernel_name`` pointers (resolved once per pointer)."""
        if len(ptrs) == 0:
            return np.zeros(0, dtype=np.int64)
        uniq, inv = np.unique(ptrs, return_inverse=True)
        ids = np.empty(len(uniq), dtype=np.int64)
        for i, p in enumerate(uniq.tolist()):
            nid = self._names.get(p)
            if nid is None:
                name = ctypes.string_at(p).decode(errors="replace") if p else UNKNOWN_KERNEL
                nid = self._names[p] = strings.intern(name or UNKNOWN_KERNEL)
            ids[i] = nid
        return ids[inv.reshape(-1)]
