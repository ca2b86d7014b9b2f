"""A fake librocprofiler-sdk for CPU tests, built like the fake CUPTI (``docs/collection.md``).

:class:`FakeRocprofilerSdk` exposes the C function names of rocprofiler-sdk with the
same calling convention (ctypes objects passed by value or by reference, ``int`` status
codes) and drives the backend's callbacks the way the SDK does:
``rocprofiler_force_configure`` calls the configure function, reads the returned
``rocprofiler_tool_configure_result_t`` and calls its ``initialize`` at once; services
can only be configured inside it; buffer callbacks run on the fake's own "SDK thread"
(watermark reached, or ``rocprofiler_flush_buffer``, which waits); records are poisoned
after the callback returns, as the SDK recycles its ring buffer. Every callback is
called through a raw function pointer cast to a prototype written here from the headers.

Layouts are ``struct`` formats written from the rocprofiler-sdk 0.5.0 headers
(``fwd.h``, ``buffer_tracing.h``, ``callback_tracing.h``, ``agent.h``,
``registration.h``) and the 1.x changes (``correlation_id.ancestor``, ``pipe_id``);
this module never imports the backend's ``rocprof_layout``.

Test-side API: :meth:`load_code_object`, :meth:`launch`, :meth:`finalize`. Knobs:
``version``, ``clock_offset_ns``, ``agents``, ``drop_records``, ``fail`` (function name
-> status), ``already_configured``, ``enumerate_ops``, ``kernel_first``,
``hold_api_records`` / ``hold_kernel_records`` (with :meth:`release_api_records` /
:meth:`release_kernel_records`).
"""
from __future__ import annotations

import ctypes
import itertools
import queue
import struct
import threading
import time

# ------------------------------------------------------------------ layouts (from the headers)
HEADER = struct.Struct("<IIQ")                       # rocprofiler_record_header_t (16)
CORR_0 = "QQ"                                        # rocprofiler_correlation_id_t 0.x: internal, external
CORR_1 = "QQQ"                                       # 1.x adds ancestor
DISPATCH_INFO = "QQQQQII3I3I56x"                     # rocprofiler_kernel_dispatch_info_t (128)
KERNEL_DISPATCH_0 = struct.Struct("<QII" + CORR_0 + "QQQ" + DISPATCH_INFO)          # 184
KERNEL_DISPATCH_1 = struct.Struct("<QII" + CORR_0 + "QQQ" + DISPATCH_INFO + "i4x")  # 192 (async corr id, pipe_id)
HIP_API_0 = struct.Struct("<QIi" + CORR_0 + "QQQ")  # size kind op corr start end tid (56)
HIP_API_1 = struct.Struct("<QIi" + CORR_1 + "QQQ")  # 64
SYMBOL_0 = struct.Struct("<QQQQQ7I4x")               # kernel_symbol_register_data_t (72)
SYMBOL_1 = struct.Struct("<QQQQQ7I4xqQ")             # 1.x adds entry offset, kernel address (88)
CODE_OBJECT_LOAD = struct.Struct("<QQQQQQQqi4xQQ")   # code_object_load_data_t (prefix is enough)
CB_RECORD_0 = struct.Struct("<Q Q" + CORR_0 + "IIi4xQ")   # callback_tracing_record_t (56)
CB_RECORD_1 = struct.Struct("<Q Q" + CORR_1 + "IIi4xQ")   # 64
CONFIGURE_RESULT = struct.Struct("<QQQQ")            # size, initialize, finalize, tool_data
CLIENT_ID = struct.Struct("<QI4x")                   # const char* name; uint32 handle
MEM_BANK = struct.Struct("<IIIIQ")                   # heap_type flags width mem_clk_max size (24)
AGENT_FIELDS = (  # rocprofiler_agent_v0_t in header order (296)
    ("size", "Q"), ("id", "Q"), ("type", "I"),
    *((f, "I") for f in ("cpu_cores_count", "simd_count", "mem_banks_count", "caches_count", "io_links_count",
                         "cpu_core_id_base", "simd_id_base", "max_waves_per_simd", "lds_size_in_kb",
                         "gds_size_in_kb", "num_gws", "wave_front_size", "num_xcc", "cu_count", "array_count",
                         "num_shader_banks", "simd_arrays_per_engine", "cu_per_simd_array", "simd_per_cu",
                         "max_slots_scratch_cu", "gfx_target_version")),
    ("vendor_id", "H"), ("device_id", "H"),
    *((f, "I") for f in ("location_id", "domain", "drm_render_minor", "num_sdma_engines", "num_sdma_xgmi_engines",
                         "num_sdma_queues_per_engine", "num_cp_queues", "max_engine_clk_ccompute",
                         "max_engine_clk_fcompute", "sdma_fw_version", "fw_version", "capability", "cu_per_engine",
                         "max_waves_per_cu", "family_id", "workgroup_max_size", "grid_max_size")),
    ("local_mem_size", "Q"), ("hive_id", "Q"), ("gpu_id", "Q"),
    *((f, "I") for f in ("wg_max_x", "wg_max_y", "wg_max_z", "grid_max_x", "grid_max_y", "grid_max_z")),
    *((f, "Q") for f in ("mem_banks", "caches", "io_links", "name", "vendor_name", "product_name", "model_name")),
    ("node_id", "I"), ("logical_node_id", "i"), ("logical_node_type_id", "i"), ("reserved_padding0", "i"),
)
AGENT = struct.Struct("<" + "".join(f for _, f in AGENT_FIELDS))

# ------------------------------------------------------------------ enum values (fwd.h 0.5.0)
SUCCESS, ERROR, CONTEXT_NOT_FOUND, BUFFER_NOT_FOUND, KIND_NOT_FOUND, OPERATION_NOT_FOUND = 0, 1, 2, 3, 4, 5
BUFFER_BUSY, SERVICE_ALREADY_CONFIGURED, CONFIGURATION_LOCKED, INCOMPATIBLE_ABI, INVALID_ARGUMENT = 13, 14, 15, 17, 18
STATUS_STRINGS = {  # the header's doc comments, which rocprofiler_get_status_string returns
    SUCCESS: b"No error occurred", ERROR: b"Generalized error",
    CONTEXT_NOT_FOUND: b"No valid context for given context id",
    BUFFER_NOT_FOUND: b"No valid buffer for given buffer id", KIND_NOT_FOUND: b"Kind identifier is invalid",
    OPERATION_NOT_FOUND: b"Operation identifier is invalid for domain",
    SERVICE_ALREADY_CONFIGURED: b"service has already been configured in context",
    BUFFER_BUSY: b"buffer operation failed because it currently busy handling another request (e.g. flushing)",
    CONFIGURATION_LOCKED: b"Function call is not valid outside of rocprofiler configuration "
                          b"(i.e. function called post-initialization)",
    INCOMPATIBLE_ABI: b"Data structure provided by user is incompatible with current version of rocprofiler",
    INVALID_ARGUMENT: b"Function invoked with one or more invalid arguments",
}
CATEGORY_TRACING = 1
BUF_HIP_RUNTIME_API, BUF_KERNEL_DISPATCH = 5, 11
CB_CODE_OBJECT = 10
CO_LOAD, CO_SYMBOL = 1, 2
PHASE_LOAD = 1
EXT_REQ_HIP_RUNTIME_API = 5
KERNEL_DISPATCH_COMPLETE = 2
#: rocprofiler_hip_runtime_api_id_t (hip/runtime_api_id.h, SDK 0.5.0), a few besides the launches
HIP_OPS = {"hipDeviceSynchronize": 66, "hipExtLaunchKernel": 84, "hipExtLaunchMultiKernelMultiDevice": 85,
           "hipGetLastError": 109, "hipGraphLaunch": 166, "hipLaunchCooperativeKernel": 211,
           "hipLaunchCooperativeKernelMultiDevice": 212, "hipLaunchKernel": 214, "hipMalloc": 215, "hipMemcpy": 259,
           "hipModuleLaunchCooperativeKernel": 306, "hipModuleLaunchCooperativeKernelMultiDevice": 307,
           "hipModuleLaunchKernel": 308, "hipExtModuleLaunchKernel": 388, "hipHccModuleLaunchKernel": 389,
           "hipLaunchCooperativeKernel_spt": 418, "hipLaunchKernel_spt": 419, "hipGraphLaunch_spt": 420}

# ------------------------------------------------------------------ prototypes the SDK calls (from the headers)
VP, U32, U64 = ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint64


class _Handle(ctypes.Structure):  # rocprofiler_context_id_t / buffer_id_t, passed by value
    _fields_ = [("handle", U64)]


class _CbRecord0(ctypes.Structure):  # rocprofiler_callback_tracing_record_t, 56 B, passed by value
    _fields_ = [("w", U64 * 7)]


class _CbRecord1(ctypes.Structure):
    _fields_ = [("w", U64 * 8)]


CONFIGURE = ctypes.CFUNCTYPE(VP, U32, ctypes.c_char_p, U32, VP)
INITIALIZE = ctypes.CFUNCTYPE(ctypes.c_int, VP, VP)
FINALIZE = ctypes.CFUNCTYPE(None, VP)
CLIENT_FINALIZE = ctypes.CFUNCTYPE(None, U64)
BUFFER_CB = ctypes.CFUNCTYPE(None, _Handle, _Handle, VP, ctypes.c_size_t, VP, U64)
TRACING_CB = {0: ctypes.CFUNCTYPE(None, _CbRecord0, VP, VP), 1: ctypes.CFUNCTYPE(None, _CbRecord1, VP, VP)}
EXTCORR_CB = ctypes.CFUNCTYPE(ctypes.c_int, U64, _Handle, U32, ctypes.c_int32, U64, VP, VP)
AGENTS_CB = ctypes.CFUNCTYPE(ctypes.c_int, U32, VP, ctypes.c_size_t, VP)
OPS_CB = ctypes.CFUNCTYPE(ctypes.c_int, U32, ctypes.c_int32, VP)


def _fnptr(fn) -> int:
    return ctypes.cast(fn, VP).value or 0


def _out(ref):
    """The ctypes object behind ``byref(x)`` / ``pointer(x)``."""
    return ref._obj if hasattr(ref, "_obj") else ref.contents


def _handle(v) -> int:
    return int(getattr(v, "handle", v))


def _ints(arr, n) -> list:
    return [int(arr[i]) for i in range(n)] if arr is not None and n else []


def gpu_agent(index=0, name="gfx942", cu_count=304, clock_mhz=2100, bus_width=8192, mem_clock_mhz=1300):
    """An agent description for :class:`FakeRocprofilerSdk` (``agents=[...]``)."""
    return {"type": 2, "logical_node_type_id": index, "name": name, "product_name": "AMD Instinct MI300X",
            "cu_count": cu_count, "max_engine_clk_fcompute": clock_mhz, "banks": [(2, bus_width, mem_clock_mhz)]}


class FakeRocprofilerSdk:
    """Stands in for ``ctypes.CDLL("librocprofiler-sdk.so")``; see the module docstring."""

    path = "<fake librocprofiler-sdk.so>"

    def __init__(self, version=(0, 5, 0), clock_offset_ns=0, agents=None, drop_records=0, fail=None,
                 already_configured=False, enumerate_ops=True, kernel_first=False, hold_api_records=False,
                 hold_kernel_records=False):
        self.version, self.clock_offset_ns = tuple(version), clock_offset_ns
        self.v1 = self.version[0] >= 1
        self.agent_specs = agents if agents is not None else [{"type": 1, "logical_node_type_id": 0,
                                                               "name": "AMD EPYC"}, gpu_agent(0)]
        self.drop_records, self.fail = drop_records, dict(fail or {})
        self.already_configured, self.enumerate_ops, self.kernel_first = already_configured, enumerate_ops, kernel_first
        self.hold_api_records, self.hold_kernel_records, self.held = hold_api_records, hold_kernel_records, []
        self.busy_flushes = 0             # answer BUFFER_BUSY to that many flushes
        self.scatter = False              # headers and payloads not contiguous
        self.phase = "fresh"            # fresh -> configuring -> locked
        self.contexts, self.buffers = {}, {}
        self.kernel_ids, self.calls = {}, []
        self.callback_threads, self.external_requests = set(), []
        self._keep = []                 # native memory handed to the backend
        self._ids = itertools.count(1)
        self._corr = itertools.count(1)
        self._lock = threading.Lock()
        self._tasks: "queue.Queue" = queue.Queue()
        self._thread = threading.Thread(target=self._sdk_thread, name="fake-rocprofiler-sdk", daemon=True)
        self._thread.start()
        self.agent_handles = {}         # GPU logical index -> agent handle
        self.client_name = None

    # ------------------------------------------------------------------ misc
    def _fail(self, name):
        self.calls.append(name)
        return self.fail.get(name)

    def _configurable(self):
        return self.phase == "configuring"

    def rocprofiler_get_version(self, major, minor, patch):
        for ref, v in zip((major, minor, patch), self.version):
            _out(ref).value = v
        return SUCCESS

    def rocprofiler_get_status_string(self, status):
        return STATUS_STRINGS.get(int(status))

    def rocprofiler_get_status_name(self, status):
        return b"ROCPROFILER_STATUS_%d" % int(status)

    def rocprofiler_get_timestamp(self, ts):
        _out(ts).value = time.clock_gettime_ns(time.CLOCK_BOOTTIME) + self.clock_offset_ns
        return SUCCESS

    def _now(self):
        return time.clock_gettime_ns(time.CLOCK_BOOTTIME) + self.clock_offset_ns

    # ------------------------------------------------------------------ registration
    def rocprofiler_force_configure(self, configure_fn):
        if self._fail("rocprofiler_force_configure") is not None:
            return self.fail["rocprofiler_force_configure"]
        if self.already_configured or self.phase != "fresh":
            return CONFIGURATION_LOCKED
        client = ctypes.create_string_buffer(CLIENT_ID.size)
        CLIENT_ID.pack_into(client, 0, 0, 7)
        vnum = 10000 * self.version[0] + 100 * self.version[1] + self.version[2]
        res = CONFIGURE(_fnptr(configure_fn))(vnum, b"%d.%d.%d (fake)" % self.version, 0, ctypes.addressof(client))
        self.client_name = ctypes.string_at(CLIENT_ID.unpack_from(client)[0]) if CLIENT_ID.unpack_from(client)[0] else None
        if not res:
            return SUCCESS
        size, init, fini, data = CONFIGURE_RESULT.unpack(ctypes.string_at(res, CONFIGURE_RESULT.size))
        self._finalize_fn, self._tool_data = fini, data
        self.phase = "configuring"
        self._client_fini = CLIENT_FINALIZE(lambda cid: None)
        try:
            self.init_result = INITIALIZE(init)(_fnptr(self._client_fini), data) if init else 0
        finally:
            self.phase = "locked"
        return SUCCESS

    def finalize(self):
        """What the SDK does at exit: call the tool's finalize."""
        if getattr(self, "_finalize_fn", 0):
            FINALIZE(self._finalize_fn)(self._tool_data)

    def rocprofiler_create_context(self, ctx_ref):
        if self._fail("rocprofiler_create_context") is not None:
            return self.fail["rocprofiler_create_context"]
        if not self._configurable():
            return CONFIGURATION_LOCKED
        ctx = _out(ctx_ref)
        if ctx.handle != 0:
            return INVALID_ARGUMENT   # 0.5 "forces tools to initialize context id with zero"
        ctx.handle = next(self._ids)
        self.contexts[ctx.handle] = {"active": False, "buffer": {}, "callback": {}, "extcorr": None}
        return SUCCESS

    def rocprofiler_create_buffer(self, ctx, size, watermark, policy, callback, data, buf_ref):
        if self._fail("rocprofiler_create_buffer") is not None:
            return self.fail["rocprofiler_create_buffer"]
        if _handle(ctx) not in self.contexts:
            return CONTEXT_NOT_FOUND
        buf = _out(buf_ref)
        buf.handle = next(self._ids)
        self.buffers[buf.handle] = {"ctx": _handle(ctx), "size": int(size), "watermark": int(watermark),
                                    "policy": int(policy), "cb": _fnptr(callback), "data": data,
                                    "records": [], "bytes": 0, "dropped": 0}
        return SUCCESS

    def rocprofiler_configure_buffer_tracing_service(self, ctx, kind, ops, n, buf):
        if self._fail("rocprofiler_configure_buffer_tracing_service") is not None:
            return self.fail["rocprofiler_configure_buffer_tracing_service"]
        if not self._configurable():
            return CONFIGURATION_LOCKED
        c = self.contexts.get(_handle(ctx))
        if c is None:
            return CONTEXT_NOT_FOUND
        if _handle(buf) not in self.buffers:
            return BUFFER_NOT_FOUND
        if int(kind) in c["buffer"]:
            return SERVICE_ALREADY_CONFIGURED
        if int(kind) not in (BUF_HIP_RUNTIME_API, BUF_KERNEL_DISPATCH):
            return KIND_NOT_FOUND
        op_list = _ints(ops, n)
        if int(kind) == BUF_HIP_RUNTIME_API and any(o not in HIP_OPS.values() for o in op_list):
            return OPERATION_NOT_FOUND
        c["buffer"][int(kind)] = (set(op_list) or None, _handle(buf))
        return SUCCESS

    def rocprofiler_configure_callback_tracing_service(self, ctx, kind, ops, n, callback, data):
        if not self._configurable():
            return CONFIGURATION_LOCKED
        c = self.contexts.get(_handle(ctx))
        if c is None:
            return CONTEXT_NOT_FOUND
        if int(kind) in c["callback"]:
            return SERVICE_ALREADY_CONFIGURED
        c["callback"][int(kind)] = (set(_ints(ops, n)) or None, _fnptr(callback), data)
        return SUCCESS

    def rocprofiler_configure_external_correlation_id_request_service(self, ctx, kinds, n, callback, data):
        if not self._configurable():
            return CONFIGURATION_LOCKED
        c = self.contexts.get(_handle(ctx))
        if c is None:
            return CONTEXT_NOT_FOUND
        c["extcorr"] = (set(_ints(kinds, n)) or None, _fnptr(callback), data)
        return SUCCESS

    def rocprofiler_start_context(self, ctx):
        if self._fail("rocprofiler_start_context") is not None:
            return self.fail["rocprofiler_start_context"]
        c = self.contexts.get(_handle(ctx))
        if c is None:
            return CONTEXT_NOT_FOUND
        c["active"] = True
        if CB_CODE_OBJECT in c["callback"]:   # replay of already-loaded code objects
            for name, kid in list(self.kernel_ids.items()):
                self._code_object_event(c["callback"][CB_CODE_OBJECT], name, kid)
        return SUCCESS

    def rocprofiler_stop_context(self, ctx):
        c = self.contexts.get(_handle(ctx))
        if c is None:
            return CONTEXT_NOT_FOUND
        c["active"] = False
        return SUCCESS

    def rocprofiler_flush_buffer(self, buf):
        if self._fail("rocprofiler_flush_buffer") is not None:
            return self.fail["rocprofiler_flush_buffer"]
        if self.busy_flushes > 0:
            self.busy_flushes -= 1
            return BUFFER_BUSY
        if _handle(buf) not in self.buffers:
            return BUFFER_NOT_FOUND
        done = threading.Event()
        self._tasks.put((_handle(buf), done))
        done.wait(10)
        return SUCCESS

    # ------------------------------------------------------------------ queries
    def rocprofiler_query_available_agents(self, version, callback, agent_size, data):
        if self._fail("rocprofiler_query_available_agents") is not None:
            return self.fail["rocprofiler_query_available_agents"]
        if int(agent_size) > AGENT.size:
            return INCOMPATIBLE_ABI
        ptrs = (VP * len(self.agent_specs))()
        for i, spec in enumerate(self.agent_specs):
            handle = 0x7F0000 + 0x100 * i
            vals = {k: 0 for k, _ in AGENT_FIELDS}
            vals.update({k: v for k, v in spec.items() if k in vals and not isinstance(v, str)})
            vals.update(size=AGENT.size, id=handle, node_id=i, logical_node_id=i)
            for key in ("name", "product_name"):
                s = ctypes.create_string_buffer(spec.get(key, "").encode())
                self._keep.append(s)
                vals[key] = ctypes.addressof(s)
            banks = spec.get("banks", [])
            if banks:
                mem = ctypes.create_string_buffer(MEM_BANK.size * len(banks))
                for j, (heap, width, clk) in enumerate(banks):
                    MEM_BANK.pack_into(mem, j * MEM_BANK.size, heap, 0, width, clk, 192 << 30)
                self._keep.append(mem)
                vals["mem_banks"], vals["mem_banks_count"] = ctypes.addressof(mem), len(banks)
            raw = ctypes.create_string_buffer(AGENT.pack(*(vals[k] for k, _ in AGENT_FIELDS)), AGENT.size)
            self._keep.append(raw)
            ptrs[i] = ctypes.addressof(raw)
            if spec.get("type") == 2:
                self.agent_handles[spec["logical_node_type_id"]] = handle
        self._keep.append(ptrs)
        return AGENTS_CB(_fnptr(callback))(1, ctypes.addressof(ptrs), len(self.agent_specs), data)

    def rocprofiler_iterate_buffer_tracing_kind_operations(self, kind, callback, data):
        if int(kind) != BUF_HIP_RUNTIME_API:
            return KIND_NOT_FOUND
        cb = OPS_CB(_fnptr(callback))
        for op in sorted(HIP_OPS.values()) if self.enumerate_ops else ():
            if cb(int(kind), op, data) != 0:
                break
        return SUCCESS

    def rocprofiler_query_buffer_tracing_kind_operation_name(self, kind, op, name_ref, len_ref):
        names = {v: k for k, v in HIP_OPS.items()}
        if int(kind) != BUF_HIP_RUNTIME_API:
            return KIND_NOT_FOUND
        if int(op) not in names:
            return OPERATION_NOT_FOUND
        _out(name_ref).value = names[int(op)].encode()
        _out(len_ref).value = len(names[int(op)])
        return SUCCESS

    # ------------------------------------------------------------------ test-side driving
    def load_code_object(self, names) -> dict:
        """Load a code object with kernel symbols ``names`` (``.kd`` appended as AMDGPU does):
        fires CODE_OBJECT LOAD then one DEVICE_KERNEL_SYMBOL_REGISTER per kernel on this thread."""
        ids = {}
        for name in names:
            ids[name] = self.kernel_ids.setdefault(name, 0x5000 + len(self.kernel_ids))
        for c in self.contexts.values():
            if c["active"] and CB_CODE_OBJECT in c["callback"]:
                self._code_object_event(c["callback"][CB_CODE_OBJECT], None, 0)
                for name, kid in ids.items():
                    self._code_object_event(c["callback"][CB_CODE_OBJECT], name, kid)
        return ids

    def _code_object_event(self, service, name, kid):
        ops, fn, data = service
        op = CO_SYMBOL if name is not None else CO_LOAD
        if ops is not None and op not in ops:
            return
        if name is None:
            payload = ctypes.create_string_buffer(CODE_OBJECT_LOAD.pack(CODE_OBJECT_LOAD.size, 1, 0, 0, 0,
                                                                        0x1000, 0x100, 0, 2, 0, 0))
        else:
            s = ctypes.create_string_buffer((name + ".kd").encode())
            sym = SYMBOL_1 if self.v1 else SYMBOL_0
            vals = [sym.size, kid, 1, ctypes.addressof(s), 0xABC000 + kid, 64, 16, 0, 0, 32, 64, 0]
            payload = ctypes.create_string_buffer(sym.pack(*(vals + ([0, 0] if self.v1 else []))), sym.size)
            self._keep.append(s)
        self._keep.append(payload)
        rec_fmt, rec_t = (CB_RECORD_1, _CbRecord1) if self.v1 else (CB_RECORD_0, _CbRecord0)
        corr = [0, 0, 0] if self.v1 else [0, 0]
        raw = rec_fmt.pack(self._context_of(service), threading.get_native_id(), *corr,
                           CB_CODE_OBJECT, op, PHASE_LOAD, ctypes.addressof(payload))
        rec = rec_t.from_buffer_copy(raw)
        user = U64(0)
        TRACING_CB[1 if self.v1 else 0](fn)(rec, ctypes.addressof(user), data)

    def _context_of(self, service):
        return next((h for h, c in self.contexts.items() if service in c["callback"].values()), 0)

    def launch(self, name, dur_ns=1000, device=0, queue=1, api="hipModuleLaunchKernel", start_delay_ns=5000,
               api_ns=2000):
        """One HIP launch of kernel ``name`` on the calling thread: external-correlation
        requests, then the HIP API record (SDK clock, this thread's id), then the kernel
        dispatch record (``start_delay_ns`` after the API start) into every active context
        tracing them. Returns the internal correlation id."""
        op, tid = HIP_OPS[api], threading.get_native_id()
        corr = next(self._corr)
        kid = self.kernel_ids.setdefault(name, 0x9000 + len(self.kernel_ids))  # unknown if never loaded
        active = [(h, c) for h, c in self.contexts.items() if c["active"]]
        ext = {}
        for h, c in active:
            svc = c["extcorr"]
            if svc is not None and (svc[0] is None or EXT_REQ_HIP_RUNTIME_API in svc[0]):
                val = U64(0)
                EXTCORR_CB(svc[1])(tid, _Handle(h), EXT_REQ_HIP_RUNTIME_API, op, corr, ctypes.addressof(val), svc[2])
                ext[h] = val.value
                self.external_requests.append((corr, val.value, tid))
        api_start = self._now()
        deadline = time.perf_counter_ns() + api_ns
        while time.perf_counter_ns() < deadline:
            pass
        api_end = self._now()
        k_start = api_start + start_delay_ns
        for h, c in active:
            writes = []
            hip = c["buffer"].get(BUF_HIP_RUNTIME_API)
            if hip is not None and (hip[0] is None or op in hip[0]):
                fmt = HIP_API_1 if self.v1 else HIP_API_0
                cid = [corr, ext.get(h, 0)] + ([0] if self.v1 else [])
                writes.append((hip[1], BUF_HIP_RUNTIME_API,
                               fmt.pack(fmt.size, BUF_HIP_RUNTIME_API, op, *cid, api_start, api_end, tid)))
            kd = c["buffer"].get(BUF_KERNEL_DISPATCH)
            if kd is not None:
                fmt = KERNEL_DISPATCH_1 if self.v1 else KERNEL_DISPATCH_0
                vals = [fmt.size, BUF_KERNEL_DISPATCH, KERNEL_DISPATCH_COMPLETE, corr, ext.get(h, 0), tid,
                        k_start, k_start + dur_ns, 72, self.agent_handles.get(device, 0xDEAD), 0xC0DE00 + queue,
                        kid, corr, 0, 0, 256, 1, 1, 1024, 1, 1] + ([-1] if self.v1 else [])
                writes.append((kd[1], BUF_KERNEL_DISPATCH, fmt.pack(*vals)))
            if self.kernel_first:
                writes.reverse()
            for buf, kind, raw in writes:
                if (kind == BUF_HIP_RUNTIME_API and self.hold_api_records) or \
                        (kind == BUF_KERNEL_DISPATCH and self.hold_kernel_records):
                    self.held.append((buf, kind, raw))
                else:
                    self._write(buf, kind, raw)
        return corr

    def release_api_records(self):
        """Write the records held back by ``hold_api_records`` (a late API record)."""
        self._release(BUF_HIP_RUNTIME_API)

    def release_kernel_records(self):
        """Write the records held back by ``hold_kernel_records`` (long kernels completing)."""
        self._release(BUF_KERNEL_DISPATCH)

    def _release(self, kind):
        now = [h for h in self.held if h[1] == kind]
        self.held = [h for h in self.held if h[1] != kind]
        for args in now:
            self._write(*args)

    def _write(self, buf_handle, kind, raw):
        b = self.buffers[buf_handle]
        with self._lock:
            if kind == BUF_KERNEL_DISPATCH and self.drop_records > 0:
                self.drop_records -= 1
                b["dropped"] += 1
                return
            b["records"].append((kind, raw))
            b["bytes"] += len(raw)
            full = b["bytes"] >= b["watermark"]
        if full:
            self._tasks.put((buf_handle, None))

    # ------------------------------------------------------------------ the SDK thread
    def _sdk_thread(self):
        while True:
            buf_handle, done = self._tasks.get()
            try:
                self._deliver(buf_handle)
            finally:
                if done is not None:
                    done.set()

    def _deliver(self, buf_handle):
        b = self.buffers[buf_handle]
        with self._lock:
            records, b["records"], b["bytes"] = b["records"], [], 0
            dropped, b["dropped"] = b["dropped"], 0
        if not records and not dropped:
            return
        self.callback_threads.add(threading.get_native_id())
        offs, pos = [], 0
        for _, raw in records:           # payloads packed 8-aligned in one ring buffer
            offs.append(pos)
            pos += (len(raw) + 7) // 8 * 8
        ring = ctypes.create_string_buffer(max(pos, 8))
        for (_, raw), o in zip(records, offs):
            ctypes.memmove(ctypes.addressof(ring) + o, raw, len(raw))
        n = len(records)
        headers = ctypes.create_string_buffer(max(HEADER.size * n, 16))
        ptrs = (VP * max(n, 1))()
        scattered = []
        for i, ((kind, raw), o) in enumerate(zip(records, offs)):
            if self.scatter:   # every header and payload in an allocation of its own, in reverse order
                rec = ctypes.create_string_buffer(raw, 128 << 10)   # far apart: not one ring
                hdr = ctypes.create_string_buffer(HEADER.pack(CATEGORY_TRACING, kind, ctypes.addressof(rec)), 16)
                scattered += [rec, hdr]
                ptrs[n - 1 - i] = ctypes.addressof(hdr)
                continue
            HEADER.pack_into(headers, HEADER.size * i, CATEGORY_TRACING, kind, ctypes.addressof(ring) + o)
            ptrs[i] = ctypes.addressof(headers) + HEADER.size * i
        BUFFER_CB(b["cb"])(_Handle(b["ctx"]), _Handle(buf_handle), ctypes.addressof(ptrs), n, b["data"], dropped)
        ctypes.memset(ring, 0xDD, max(pos, 8))   # the SDK recycles the ring after the callback
        for buf in scattered:
            ctypes.memset(buf, 0xDD, len(buf))
        ctypes.memset(headers, 0xDD, max(HEADER.size * n, 16))
