"""A fake libroctracer64 (and a fake HSA runtime) for CPU tests.

:class:`FakeRoctracer` exposes roctracer's C function names with the same calling
convention and behaves as roctracer does for what the backend uses: ``roctracer_open_pool``
reads the ``roctracer_properties_t`` it is given, activity records (``activity_record_t``,
64 B) accumulate in the pool and go to the buffer callback on the fake's own thread when
``buffer_size`` is reached or on ``roctracer_flush_activity`` (which waits), as
``[begin, end)`` of packed records (``roctracer_next_record`` is ``record + 1``); the
memory is poisoned after the callback returns. HIP API records are written at API exit
with the thread's ``gettid``; API callbacks get a ``hip_api_data_t`` (correlation id at
0, phase at 8) at ENTER and EXIT.

Layouts are ``struct`` formats written from ``inc/ext/prof_protocol.h`` and
``inc/roctracer.h`` (roctracer 4.1); this module never imports the backend's layouts.
Test-side API: :meth:`FakeRoctracer.launch`. :class:`FakeHsa`: ``hsa_iterate_agents`` /
``hsa_agent_get_info`` over a CPU node 0 and GPU nodes from ``gpu_nodes``.
"""
from __future__ import annotations

import ctypes
import itertools
import os
import queue
import struct
import threading
import time

# activity_record_t: domain kind op | pad | correlation_id begin_ns end_ns | union@40 (16) | union@56 (8)
KERNEL_RECORD = struct.Struct("<III4xQQQi4xQQ")     # HIP_OPS: device_id, queue_id, kernel_name
API_RECORD = struct.Struct("<III4xQQQII8xQ")        # HIP_API: process_id, thread_id, (bytes)
EXT_RECORD = struct.Struct("<III4xQQQQ8xQ")         # EXT_API: external_id
PROPERTIES = struct.Struct("<I4xQQQQQ")             # roctracer_properties_t (48)
HIP_API_DATA = struct.Struct("<QI4x64x")            # hip_api_data_t prefix: correlation_id, phase, args...
DOMAIN_HIP_OPS, DOMAIN_HIP_API, DOMAIN_EXT_API = 2, 3, 5
KIND_KERNEL = 0x11F0
OP_DISPATCH = 0
PHASE_ENTER, PHASE_EXIT = 0, 1
STATUS_ERROR_INVALID_DOMAIN_ID, STATUS_ERROR_INVALID_ARGUMENT, STATUS_ERROR_DEFAULT_POOL_UNDEFINED = -2, -3, -4
STATUS_ERROR_DEFAULT_POOL_ALREADY_DEFINED = -5
#: HIP_API_ID_* of a hip_prof_str.h (ids vary between HIP versions: the backend asks roctracer_op_code)
HIP_API_IDS = {"hipLaunchCooperativeKernel": 26, "hipLaunchCooperativeKernelMultiDevice": 27, "hipLaunchKernel": 83,
               "hipHccModuleLaunchKernel": 114, "hipMemcpy": 144, "hipExtLaunchMultiKernelMultiDevice": 146,
               "hipExtModuleLaunchKernel": 151, "hipDeviceSynchronize": 152, "hipModuleLaunchKernel": 168,
               "hipExtLaunchKernel": 170}

BUFFER_CB = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
API_CB = ctypes.CFUNCTYPE(None, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_void_p, ctypes.c_void_p)


def _out(ref):
    return ref._obj if hasattr(ref, "_obj") else ref.contents


def _fnptr(fn) -> int:
    return ctypes.cast(fn, ctypes.c_void_p).value or 0


class FakeRoctracer:
    """Stands in for ``ctypes.CDLL("libroctracer64.so")``; see the module docstring."""

    path = "<fake libroctracer64.so>"

    def __init__(self, clock_offset_ns=0, fail=None, gpu_node_base=1, partial_tail=False):
        self.clock_offset_ns, self.fail = clock_offset_ns, dict(fail or {})
        self.gpu_node_base, self.partial_tail = gpu_node_base, partial_tail
        self.pool = None
        self.api_activity, self.api_callbacks, self.domains = set(), {}, set()
        self.started = False
        self.calls, self.callback_threads = [], set()
        self._records, self._bytes = [], 0
        self._err = threading.local()
        self._names, self._keep = {}, []
        self._corr = itertools.count(1)
        self._lock = threading.Lock()
        self._tasks: "queue.Queue" = queue.Queue()
        threading.Thread(target=self._worker, name="fake-roctracer", daemon=True).start()

    def _status(self, name, status=0, text=""):
        self.calls.append(name)
        status = self.fail.get(name, status)
        if status:
            self._err.text = (text or f"{name}(), error {status}").encode()
        return status

    def _now(self):
        return time.clock_gettime_ns(time.CLOCK_BOOTTIME) + self.clock_offset_ns

    # ------------------------------------------------------------------ C API
    def roctracer_version_major(self):
        return 4

    def roctracer_version_minor(self):
        return 1

    def roctracer_error_string(self):
        return getattr(self._err, "text", b"")

    def roctracer_get_timestamp(self, ts):
        _out(ts).value = self._now()
        return self._status("roctracer_get_timestamp")

    def roctracer_op_code(self, domain, name, op, kind):
        if int(domain) != DOMAIN_HIP_API:
            return self._status("roctracer_op_code", STATUS_ERROR_INVALID_DOMAIN_ID, f"invalid domain ID({domain})")
        key = name.decode() if isinstance(name, bytes) else name
        if key not in HIP_API_IDS:
            return self._status("roctracer_op_code", STATUS_ERROR_INVALID_ARGUMENT, f"Invalid API name \"{key}\"")
        _out(op).value = HIP_API_IDS[key]
        if kind is not None:
            _out(kind).value = 0
        return self._status("roctracer_op_code")

    def roctracer_open_pool(self, props_ref):
        if self.pool is not None:
            return self._status("roctracer_open_pool", STATUS_ERROR_DEFAULT_POOL_ALREADY_DEFINED,
                                "default pool already defined")
        mode, size, alloc, alloc_arg, cb, cb_arg = PROPERTIES.unpack(
            ctypes.string_at(ctypes.addressof(_out(props_ref)), PROPERTIES.size))
        status = self._status("roctracer_open_pool")
        if not status:
            self.pool = {"size": size, "cb": cb, "arg": cb_arg}
        return status

    def roctracer_close_pool(self):
        if self.pool is None:
            return self._status("roctracer_close_pool", STATUS_ERROR_DEFAULT_POOL_UNDEFINED, "no default pool")
        self.roctracer_flush_activity()
        self.pool = None
        return self._status("roctracer_close_pool")

    def roctracer_enable_op_activity(self, domain, op):
        if self.pool is None:
            return self._status("roctracer_enable_op_activity", STATUS_ERROR_DEFAULT_POOL_UNDEFINED, "no default pool")
        if int(domain) == DOMAIN_HIP_API:
            self.api_activity.add(int(op))
        return self._status("roctracer_enable_op_activity")

    def roctracer_disable_op_activity(self, domain, op):
        self.api_activity.discard(int(op))
        return self._status("roctracer_disable_op_activity")

    def roctracer_enable_domain_activity(self, domain):
        if self.pool is None:
            return self._status("roctracer_enable_domain_activity", STATUS_ERROR_DEFAULT_POOL_UNDEFINED,
                                "no default pool")
        self.domains.add(int(domain))
        return self._status("roctracer_enable_domain_activity")

    def roctracer_disable_domain_activity(self, domain):
        self.domains.discard(int(domain))
        return self._status("roctracer_disable_domain_activity")

    def roctracer_enable_op_callback(self, domain, op, callback, arg):
        self.api_callbacks[int(op)] = (_fnptr(callback), arg)
        return self._status("roctracer_enable_op_callback")

    def roctracer_disable_op_callback(self, domain, op):
        self.api_callbacks.pop(int(op), None)
        return self._status("roctracer_disable_op_callback")

    def roctracer_flush_activity(self):
        status = self._status("roctracer_flush_activity")
        if not status and self.pool is not None:
            done = threading.Event()
            self._tasks.put(done)
            done.wait(10)
        return status

    def roctracer_start(self):
        self.calls.append("roctracer_start")
        self.started = True

    def roctracer_stop(self):
        self.calls.append("roctracer_stop")
        self.started = False

    # ------------------------------------------------------------------ test-side driving
    def launch(self, name, dur_ns=1000, device=0, queue=1, api="hipModuleLaunchKernel", start_delay_ns=5000,
               api_ns=2000):
        """One HIP launch on the calling thread; returns its correlation id."""
        op, tid, corr = HIP_API_IDS[api], threading.get_native_id(), next(self._corr)
        traced = self.started and self.pool is not None
        data = ctypes.create_string_buffer(HIP_API_DATA.size)
        cb = self.api_callbacks.get(op) if traced else None
        if cb:
            HIP_API_DATA.pack_into(data, 0, corr, PHASE_ENTER)
            API_CB(cb[0])(DOMAIN_HIP_API, op, ctypes.addressof(data), cb[1])
        begin = self._now()
        deadline = time.perf_counter_ns() + api_ns
        while time.perf_counter_ns() < deadline:
            pass
        end = self._now()
        if cb:
            HIP_API_DATA.pack_into(data, 0, corr, PHASE_EXIT)
            API_CB(cb[0])(DOMAIN_HIP_API, op, ctypes.addressof(data), cb[1])
        if not traced:
            return corr
        if op in self.api_activity:
            self._write(API_RECORD.pack(DOMAIN_HIP_API, 0, op, corr, begin, end, os.getpid(), tid, 0))
        if DOMAIN_HIP_OPS in self.domains:
            s = self._names.get(name)
            if s is None:
                s = self._names[name] = ctypes.create_string_buffer(name.encode())
            k0 = begin + start_delay_ns
            self._write(KERNEL_RECORD.pack(DOMAIN_HIP_OPS, KIND_KERNEL, OP_DISPATCH, corr, k0, k0 + dur_ns,
                                           device + self.gpu_node_base, 0xA000 + queue, ctypes.addressof(s)))
        return corr

    def _write(self, raw):
        with self._lock:
            self._records.append(raw)
            self._bytes += len(raw)
            full = self._bytes >= self.pool["size"]
        if full:
            self._tasks.put(None)

    def _worker(self):
        while True:
            done = self._tasks.get()
            try:
                self._deliver()
            finally:
                if done is not None:
                    done.set()

    def _deliver(self):
        with self._lock:
            records, self._records, self._bytes = self._records, [], 0
            pool = self.pool
        if not records or pool is None:
            return
        self.callback_threads.add(threading.get_native_id())
        blob = b"".join(records) + (b"\x07" * 8 if self.partial_tail else b"")
        mem = ctypes.create_string_buffer(blob, len(blob))
        begin = ctypes.addressof(mem)
        BUFFER_CB(pool["cb"])(begin, begin + len(blob), pool["arg"])
        ctypes.memset(mem, 0xDD, len(blob))   # roctracer reuses the pool memory


class _Agent(ctypes.Structure):  # hsa_agent_t, passed by value
    _fields_ = [("handle", ctypes.c_uint64)]


ITERATE_CB = ctypes.CFUNCTYPE(ctypes.c_int, _Agent, ctypes.c_void_p)
HSA_AGENT_INFO_NAME, HSA_AGENT_INFO_DEVICE, HSA_AMD_AGENT_INFO_DRIVER_NODE_ID = 0, 17, 0xA004  # hsa.h, hsa_ext_amd.h
HSA_STATUS_ERROR_INVALID_ARGUMENT = 0x1001
HSA_DEVICE_TYPE_CPU, HSA_DEVICE_TYPE_GPU = 0, 1


class FakeHsa:
    """``libhsa-runtime64`` for the agent walk: CPU node 0, MI300X-like GPUs at ``gpu_nodes``."""

    path = "<fake libhsa-runtime64.so>"

    def __init__(self, gpu_nodes=(1,)):
        cpu = {HSA_AGENT_INFO_DEVICE: HSA_DEVICE_TYPE_CPU, HSA_AMD_AGENT_INFO_DRIVER_NODE_ID: 0,
               HSA_AGENT_INFO_NAME: b"AMD EPYC 9654"}
        self.agents = {0x100: cpu}
        for i, n in enumerate(gpu_nodes):
            self.agents[0x200 + i] = {HSA_AGENT_INFO_DEVICE: HSA_DEVICE_TYPE_GPU, HSA_AMD_AGENT_INFO_DRIVER_NODE_ID: n,
                                      HSA_AGENT_INFO_NAME: b"gfx942", 0xA002: 304, 0xA003: 2100, 0xA007: 8192,
                                      0xA008: 1300}
        self.refcount = 0

    def hsa_init(self):
        self.refcount += 1
        return 0

    def hsa_shut_down(self):
        self.refcount -= 1
        return 0

    def hsa_iterate_agents(self, callback, data):
        cb = ITERATE_CB(_fnptr(callback))
        for handle in self.agents:
            status = cb(_Agent(handle), data)
            if status:
                return status
        return 0

    def hsa_agent_get_info(self, agent, attribute, value):
        facts = self.agents[int(getattr(agent, "handle", agent))]
        if int(attribute) not in facts:
            return HSA_STATUS_ERROR_INVALID_ARGUMENT
        v = facts[int(attribute)]
        if isinstance(v, bytes):      # char[64]
            ctypes.memmove(ctypes.addressof(_out(value)), v + b"\0", len(v) + 1)
        else:
            _out(value).value = v
        return 0
