"""The rocprofiler-sdk tool, registered at run time from Python (why: ``docs/collection.md``, AMD).

A Python process has no ``rocprofiler_configure`` symbol, so :meth:`SdkRuntime.configure`
calls ``rocprofiler_force_configure`` with a ctypes configure callback returning a static
``rocprofiler_tool_configure_result_t``; the SDK then calls our ``initialize``
synchronously, where every service is set up (services can only be configured there):

* context ``codeobj`` (started at once, kept running): callback tracing of
  ``CODE_OBJECT`` / ``DEVICE_KERNEL_SYMBOL_REGISTER`` -> ``kernel_id -> name id``;
* context ``timestamp``: buffer tracing of ``KERNEL_DISPATCH`` and of the HIP runtime
  launch operations (an allow-list resolved by name) into one lossless buffer -- no
  Python runs per launch;
* context ``extcorr``: the same plus the external correlation request service, whose
  callback stamps ``time.time_ns()`` (and the python-context node) on the launching
  thread -- a Python call per launch, used only when the SDK clock cannot be matched to a
  Python clock, when ``PROTON_CTYPES_ATTRIBUTION=extcorr``, or for ``context="python"``.

The SDK can be configured once per process, so one runtime exists per library object
(:func:`runtime_for`). The buffer callback runs on the SDK's thread and only copies the
records out (they are recycled after it returns) and enqueues them.
"""
from __future__ import annotations

import collections
import ctypes
import os
import threading
import time
from typing import Callable, Dict, List, Optional

import numpy as np

from ...tree import strings
from . import lib as rocm_lib, parse as rocm_parse
from . import sdk_api as api
from .layout import AGENT_MEM_BANK, AGENT_V0, KERNEL_SYMBOL, callback_record_fields

_KID = KERNEL_SYMBOL.fields["kernel_id"][1]
_KNAME = KERNEL_SYMBOL.fields["kernel_name"][1]
PROFILING_CONTEXTS = ("timestamp", "extcorr")
#: The SDK calls the buffer callback once a buffer is this much short of full (1/8: 7/8 full).
WATERMARK_FRACTION = 8
#: ``rocprofiler_flush_buffer`` retries while the SDK answers BUFFER_BUSY, and the pause between.
FLUSH_BUSY_RETRIES = 50
FLUSH_BUSY_PAUSE_S = 0.001


class SdkRuntime:
    """Process-wide state of the registered tool: contexts, buffers, names, agents, queue."""

    def __init__(self, sdk: api.SdkLib, buffer_bytes: int = rocm_lib.DEFAULT_BUFFER_BYTES, environ=None):
        self.sdk = sdk
        self.buffer_bytes = buffer_bytes
        self.environ = environ
        self.version = sdk.version()
        self.calibration = rocm_lib.calibrate(sdk.timestamp)
        self.ctx = {k: api.ContextId() for k in ("codeobj",) + PROFILING_CONTEXTS}
        self.buf = {k: api.BufferId() for k in PROFILING_CONTEXTS}
        self.kernel_names: Dict[int, int] = {}
        self.agents: List[dict] = []
        self.agent_device: Dict[int, int] = {}
        self.ops: Dict[str, int] = {}
        self.ops_source = ""
        self.running: Optional[str] = None
        self.initialized = False
        self.init_error: Optional[BaseException] = None
        self.accepting = False
        self.sdk_dropped = 0
        self.discarded = 0
        self.python_context: Optional[Callable[[], int]] = None
        self.ext_log: collections.deque = collections.deque()
        self._pending: list = []
        self._lock = threading.Lock()
        self._client_name = b"proton_ctypes"
        # every ctypes callback is kept alive for the life of the process
        self._cb_configure = api.CONFIGURE_FUNC(self._configure)
        self._cb_buffer = api.BUFFER_CALLBACK(self._on_buffer)
        self._cb_codeobj = api.TRACING_CALLBACK(self._on_code_object)
        self._cb_extcorr = api.EXTERNAL_CORRELATION_CALLBACK(self._on_extcorr)
        self._cb_agents = api.AGENTS_CALLBACK(self._on_agents)
        self._cb_ops = api.OPERATION_CALLBACK(self._on_operation)
        self._op_ids: list = []
        self.result = api.ToolConfigureResult(ctypes.sizeof(api.ToolConfigureResult),
                                              api.TOOL_INITIALIZE(self._initialize),
                                              api.TOOL_FINALIZE(self._finalize), None)

    # ------------------------------------------------------------------ registration
    def configure(self) -> None:
        """``rocprofiler_force_configure``; raises if the SDK refuses or our initialize failed."""
        try:
            self.sdk.call("rocprofiler_force_configure", self._cb_configure)
        except api.RocprofilerError as e:
            raise api.RocprofilerError(e.func, e.status, e.text + "; rocprofiler-sdk was already configured "
                                       "(another tool, or HIP initialised first): call proton_ctypes.start() "
                                       "before the first HIP call") from None
        if self.init_error is not None:
            raise RuntimeError(f"[PROTON] rocprofiler-sdk tool initialisation failed: {self.init_error}") \
                from self.init_error

    def _configure(self, version, runtime_version, priority, client_id):
        if client_id:
            client_id.contents.name = self._client_name
        return ctypes.addressof(self.result)

    def _initialize(self, finalize_fn, tool_data):
        try:
            self._setup()
            self.initialized = True
            return 0
        except BaseException as e:  # never raise through C
            self.init_error = e
            return -1

    def _finalize(self, tool_data):
        self.accepting = False

    def _setup(self) -> None:
        sdk, LOSSLESS = self.sdk, api.BUFFER_POLICY_LOSSLESS
        self._query_agents()
        self.ops = self._resolve_operations()
        ops = (ctypes.c_int32 * len(self.ops))(*sorted(self.ops.values()))
        sdk.call("rocprofiler_create_context", ctypes.byref(self.ctx["codeobj"]))
        co_ops = (ctypes.c_int32 * 2)(api.CODE_OBJECT_LOAD, api.CODE_OBJECT_DEVICE_KERNEL_SYMBOL_REGISTER)
        sdk.call("rocprofiler_configure_callback_tracing_service", self.ctx["codeobj"],
                 api.CALLBACK_TRACING_CODE_OBJECT, co_ops, 2, self._cb_codeobj, None)
        for name in PROFILING_CONTEXTS:
            ctx = self.ctx[name]
            sdk.call("rocprofiler_create_context", ctypes.byref(ctx))
            sdk.call("rocprofiler_create_buffer", ctx, self.buffer_bytes, self.buffer_bytes - self.buffer_bytes // WATERMARK_FRACTION,
                     LOSSLESS, self._cb_buffer, None, ctypes.byref(self.buf[name]))
            sdk.call("rocprofiler_configure_buffer_tracing_service", ctx, api.BUFFER_TRACING_KERNEL_DISPATCH,
                     None, 0, self.buf[name])
            if self.ops:   # (an empty list would mean "every HIP call")
                sdk.call("rocprofiler_configure_buffer_tracing_service", ctx, api.BUFFER_TRACING_HIP_RUNTIME_API,
                         ops, len(self.ops), self.buf[name])
        kinds = (ctypes.c_int * 1)(api.EXTERNAL_CORRELATION_REQUEST_HIP_RUNTIME_API)
        sdk.call("rocprofiler_configure_external_correlation_id_request_service", self.ctx["extcorr"],
                 kinds, 1, self._cb_extcorr, None)
        # started now so that the code objects loaded before any session are named too
        sdk.call("rocprofiler_start_context", self.ctx["codeobj"])

    def _on_operation(self, kind, op, data):
        self._op_ids.append(int(op))
        return 0

    def _resolve_operations(self) -> Dict[str, int]:
        """HIP launch operations by name (``rocprofiler_iterate_*`` + ``query_*_name``)."""
        names: Dict[str, int] = {}
        q = "rocprofiler_query_buffer_tracing_kind_operation_name"
        if self.sdk.has("rocprofiler_iterate_buffer_tracing_kind_operations") and self.sdk.has(q):
            self._op_ids = []
            self.sdk.call("rocprofiler_iterate_buffer_tracing_kind_operations", api.BUFFER_TRACING_HIP_RUNTIME_API,
                          self._cb_ops, None)
            for op in self._op_ids:
                s, n = ctypes.c_char_p(), ctypes.c_uint64()
                if self.sdk.raw(q, api.BUFFER_TRACING_HIP_RUNTIME_API, op, ctypes.byref(s), ctypes.byref(n)) == 0 \
                        and s.value:
                    names[s.value.decode()] = op
            self.ops_source = "sdk"
        if not names:
            names, self.ops_source = dict(api.HIP_LAUNCH_OPERATION_IDS_0_5), "header-0.5.0"
        return {n: names[n] for n in api.HIP_LAUNCH_OPERATIONS if n in names}

    # ------------------------------------------------------------------ agents
    def _query_agents(self) -> None:
        self.sdk.call("rocprofiler_query_available_agents", api.AGENT_INFO_VERSION_0, self._cb_agents,
                      AGENT_V0.itemsize, None)
        gpus = sorted((a for a in self.agents if a["type"] == api.AGENT_TYPE_GPU),
                      key=lambda a: a["logical_node_type_id"])
        env = self.environ if self.environ is not None else os.environ
        visible = [t for t in env.get("ROCR_VISIBLE_DEVICES", "").replace(" ", ",").split(",") if t]
        for a in gpus:
            ordinal = a["logical_node_type_id"]
            if visible:
                if str(ordinal) not in visible:
                    continue
                ordinal = visible.index(str(ordinal))
            a["device"] = ordinal
            self.agent_device[a["id"]] = ordinal

    def _on_agents(self, version, agents, n, data):
        try:
            for i in range(n):
                self.agents.append(read_agent(int(agents[i])))
        except BaseException as e:
            self.init_error = e
        return 0

    # ------------------------------------------------------------------ callbacks on SDK / app threads
    def _on_buffer(self, context, buffer_id, headers, n, data, drop_count):
        try:
            if drop_count:
                self.sdk_dropped += int(drop_count)
            if not self.accepting:
                self.discarded += int(n)
                return
            item = rocm_parse.copy_sdk_buffer(headers, n, api.BUFFER_CATEGORY_TRACING,
                                              (api.BUFFER_TRACING_KERNEL_DISPATCH, api.BUFFER_TRACING_HIP_RUNTIME_API))
            if item is not None:
                with self._lock:
                    self._pending.append(item)
        except BaseException:
            self.sdk_dropped += int(n)

    def _on_code_object(self, record, user_data, data):
        try:
            _, kind, op, phase, payload = callback_record_fields(record.words, api.CALLBACK_TRACING_CODE_OBJECT,
                                                                 prefer_v1=self.version[0] >= 1)
            if op != api.CODE_OBJECT_DEVICE_KERNEL_SYMBOL_REGISTER or phase != api.CALLBACK_PHASE_LOAD or not payload:
                return
            kid = ctypes.c_uint64.from_address(payload + _KID).value
            name_ptr = ctypes.c_uint64.from_address(payload + _KNAME).value
            if name_ptr:
                name = ctypes.string_at(name_ptr).decode(errors="replace")
                self.kernel_names[kid] = strings.intern(rocm_parse.strip_kd(name))
        except BaseException:
            pass

    def _on_extcorr(self, thread_id, context, kind, operation, internal, external, data):
        t = time.time_ns()
        try:
            py = self.python_context() if self.python_context is not None else -1
        except BaseException:
            py = -1
        external[0] = t
        self.ext_log.append((int(internal), t, int(thread_id), int(py)))
        return 0

    # ------------------------------------------------------------------ control
    def activate(self, which: str) -> None:
        """Make profiling context ``which`` run. A started context is never stopped between
        sessions (Proton found the SDK does not re-intercept HIP after a stop/start cycle);
        ``extcorr`` does all ``timestamp`` does, so once running it stays."""
        if self.running in (which, "extcorr"):
            return
        if self.running is not None:
            self.sdk.call("rocprofiler_stop_context", self.ctx[self.running])
        self.sdk.call("rocprofiler_start_context", self.ctx[which])
        self.running = which

    def flush_buffer(self, retries: int = FLUSH_BUSY_RETRIES) -> None:
        """``rocprofiler_flush_buffer`` on the running context's buffer (delivers synchronously);
        retried while the SDK answers BUFFER_BUSY (a watermark flush in progress)."""
        if self.running is None:
            return
        for attempt in range(retries + 1):
            try:
                self.sdk.call("rocprofiler_flush_buffer", self.buf[self.running])
                return
            except api.RocprofilerError as e:
                if "busy" not in e.text.lower() or attempt == retries:
                    raise
                time.sleep(FLUSH_BUSY_PAUSE_S)

    def take(self):
        """Everything the callbacks queued since the last call: ``(buffers, extcorr log)``."""
        with self._lock:
            items, self._pending = self._pending, []
        return items, rocm_parse.drain(self.ext_log)

    def shutdown(self) -> None:
        """Stop every started context (process exit, tests)."""
        self.accepting = False
        for name in (self.running, "codeobj"):
            if name is not None:
                try:
                    self.sdk.call("rocprofiler_stop_context", self.ctx[name])
                except api.RocprofilerError:
                    pass
        self.running = None


def read_agent(addr: int) -> dict:
    """The fields of a ``rocprofiler_agent_v0_t`` at ``addr`` that the backend uses."""
    row = np.frombuffer(ctypes.string_at(addr, AGENT_V0.itemsize), dtype=AGENT_V0)[0]

    def s(field):
        p = int(row[field])
        return ctypes.string_at(p).decode(errors="replace") if p else ""

    out = {"id": int(row["id"]), "type": int(row["type"]), "cu_count": int(row["cu_count"]),
           "logical_node_type_id": int(row["logical_node_type_id"]), "node_id": int(row["node_id"]),
           "arch": s("name"), "product_name": s("product_name"), "clock_mhz": int(row["max_engine_clk_fcompute"]),
           "bus_width": 0, "mem_clock_mhz": 0}
    banks, nb = int(row["mem_banks"]), int(row["mem_banks_count"])
    if banks and nb:
        mb = np.frombuffer(ctypes.string_at(banks, AGENT_MEM_BANK.itemsize * min(nb, 64)), dtype=AGENT_MEM_BANK)
        fb = mb[np.isin(mb["heap_type"], (1, 2))]
        pick = fb[0] if len(fb) else mb[0]
        out["bus_width"], out["mem_clock_mhz"] = int(pick["width"]), int(pick["mem_clk_max"])
    return out


_RUNTIMES: Dict[int, SdkRuntime] = {}
_RUNTIMES_LOCK = threading.Lock()


def forget(sdk: api.SdkLib) -> None:
    """Drop the runtime of this library object (tests; the SDK itself cannot be re-configured)."""
    with _RUNTIMES_LOCK:
        _RUNTIMES.pop(id(sdk.lib), None)


def runtime_for(sdk: api.SdkLib, **kwargs) -> SdkRuntime:
    """The one (configured) runtime of this library object, configuring it on first use."""
    key = id(sdk.lib)
    with _RUNTIMES_LOCK:
        rt = _RUNTIMES.get(key)
        if rt is None or rt.sdk.lib is not sdk.lib:
            rt = SdkRuntime(sdk, **kwargs)
            rt.configure()
            _RUNTIMES[key] = rt
        return rt
