"""A fake libcupti for CPU tests (``docs/collection.md``, testing without a GPU).

:class:`FakeCupti` exposes the CUPTI C function names with the same calling convention
(ctypes objects passed by reference, int result codes) and writes activity records, in
the real byte layout, into the buffers the backend hands out through its *request*
callback.  Completed buffers go back through the *complete* callback on a separate
thread, as CUPTI does; a partially filled buffer only on ``cuptiActivityFlushAll``.

The record layouts are ``struct`` formats written here from ``layout_check.c`` output
(offsetof on the CUPTI 12.8 headers); this module never imports the backend's
``cupti_layout``, so a wrong offset cannot pass on both sides.

Test-side driving API: :meth:`FakeCupti.launch`, :meth:`capture`, :meth:`instantiate`,
:meth:`replay`, :meth:`complete_kernels`, :meth:`nvtx_push` / :meth:`nvtx_pop`.  Knobs:
``multiple_subscribers``, ``drop_records``, ``clock_offset_ns``, ``record_size``,
``api_record_mode`` (``"real"`` or ``"none"``), ``defer_kernels``, ``fail`` (function name ->
result code), ``refuse_domains`` (callback domains ``cuptiEnableCallback`` rejects),
``graph_exec_created`` (whether instantiate fires ``GRAPHEXEC_CREATED``).

NVTX is modelled as the NVTX library does it: at the first NVTX call of the process it reads
``NVTX_INJECTION64_PATH`` once; only when that named a library (CUPTI) do the NVTX
callbacks fire, with a ``CUpti_NvtxData`` whose ``functionParams`` points at the call's
``nvtx*_params`` struct (generated_nvtx_meta.h).
"""
from __future__ import annotations

import ctypes
import itertools
import os
import queue
import struct
import threading
import time

# ------------------------------------------------------------------ layouts (from layout_check.c output)
# CUpti_ActivityKernel9 prefix up to graphId (160 bytes); the rest of the record is zero.
KERNEL_FORMAT = struct.Struct(
    "<I"     # 0   kind
    "BBH"    # 4   cacheConfig, sharedMemoryConfig, registersPerThread
    "II"     # 8   partitionedGlobalCacheRequested / Executed
    "QQQ"    # 16  start, end, completed
    "III"    # 40  deviceId, contextId, streamId
    "iii"    # 52  gridX, gridY, gridZ
    "iii"    # 64  blockX, blockY, blockZ
    "ii"     # 76  staticSharedMemory, dynamicSharedMemory
    "II"     # 84  localMemoryPerThread, localMemoryTotal
    "I"      # 92  correlationId
    "q"      # 96  gridId
    "Q"      # 104 name
    "Q"      # 112 reserved0
    "QQ"     # 120 queued, submitted
    "BBBB"   # 136 launchType, isSharedMemoryCarveoutRequested, sharedMemoryCarveoutRequested, padding
    "I"      # 140 sharedMemoryExecuted
    "Q"      # 144 graphNodeId
    "I"      # 152 shmemLimitConfig
    "I")     # 156 graphId
API_FORMAT = struct.Struct("<IIQQIIII")          # kind cbid start end processId threadId correlationId returnValue
EXTCORR_FORMAT = struct.Struct("<IIQI4x")        # kind externalKind externalId correlationId
CALLBACK_DATA_FORMAT = struct.Struct("<i4xQQQQQI4xQI4x")   # CUpti_CallbackData, 72 bytes
RESOURCE_DATA_FORMAT = struct.Struct("<QQQ")               # context, resourceHandle, resourceDescriptor
GRAPH_DATA_FORMAT = struct.Struct("<QQQQi4xQQ")            # graph, originalGraph, node, originalNode, nodeType, dependency, graphExec
GRAPH_LAUNCH_PARAMS_FORMAT = struct.Struct("<QQ")          # cuGraphLaunch_params: hGraph (the CUgraphExec), hStream
NVTX_DATA_FORMAT = struct.Struct("<QQQ")                   # CUpti_NvtxData: functionName, functionParams, functionReturnValue
NVTX_PUSH_A_PARAMS_FORMAT = struct.Struct("<Q")            # nvtxRangePushA_params: const char *message
NVTX_POP_PARAMS_FORMAT = struct.Struct("<Q")               # nvtxRangePop_params: void *dummy

#: Offsets of the fields above, for the header cross-check test.
KERNEL_OFFSETS = {"kind": 0, "start": 16, "end": 24, "completed": 32, "deviceId": 40, "contextId": 44,
                  "streamId": 48, "gridX": 52, "blockX": 64, "staticSharedMemory": 76, "correlationId": 92,
                  "gridId": 96, "name": 104, "queued": 120, "submitted": 128, "launchType": 136,
                  "graphNodeId": 144, "graphId": 156}

KIND_DRIVER, KIND_RUNTIME, KIND_KERNEL, KIND_EXTCORR = 4, 5, 10, 39
#: CUPTI_ACTIVITY_KIND_KERNEL: the same record as KIND_KERNEL (concurrent), kernels serialized
KIND_SERIAL_KERNEL = 3
KNOWN_KINDS = {1, 2, 3, KIND_DRIVER, KIND_RUNTIME, KIND_KERNEL, KIND_EXTCORR}
#: the bit CUPTI sets in the kind of a kernel record written at launch and not yet complete
INCOMPLETE_KIND_BIT = 0x8000_0000
DOMAIN_DRIVER, DOMAIN_RUNTIME, DOMAIN_RESOURCE, DOMAIN_NVTX = 1, 2, 3, 5
CBID_GRAPHNODE_CREATED, CBID_GRAPHNODE_CLONED, CBID_GRAPH_CREATED, CBID_GRAPHEXEC_CREATED = 13, 20, 9, 18
CBID_NVTX_RANGE_PUSH_A, CBID_NVTX_RANGE_POP = 8, 11     # cupti_nvtx_cbid.h
NVTX_INJECTION_ENV = "NVTX_INJECTION64_PATH"
CU_LAUNCH_KERNEL, CU_LAUNCH_KERNEL_EX, CU_GRAPH_LAUNCH, CUDA_LAUNCH_KERNEL = 307, 652, 514, 211
CU_GRAPH_LAUNCH_PTSZ = 515
CUDA_GRAPH_LAUNCH = 311
#: cuStreamBeginCapture_v2, cuStreamEndCapture (cupti_driver_cbid.h)
CU_STREAM_BEGIN_CAPTURE_V2, CU_STREAM_END_CAPTURE = 539, 497
EXISTING_DRIVER_CBIDS = range(1, 720)
ATTR_PER_THREAD_ACTIVITY_BUFFER = 9
EXISTING_RUNTIME_CBIDS = range(1, 480)

RESULT_STRINGS = {
    0: b"CUPTI_SUCCESS", 1: b"CUPTI_ERROR_INVALID_PARAMETER", 12: b"CUPTI_ERROR_MAX_LIMIT_REACHED",
    15: b"CUPTI_ERROR_NOT_INITIALIZED", 21: b"CUPTI_ERROR_INVALID_KIND",
    39: b"CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED", 999: b"CUPTI_ERROR_UNKNOWN",
}


def _obj(arg):
    """The ctypes object behind ``byref(x)`` / ``pointer(x)`` / ``x``."""
    if hasattr(arg, "_obj"):
        return arg._obj
    if hasattr(arg, "contents"):
        return arg.contents
    return arg


class FakeGraph:
    """A captured graph or an instantiated executable graph: its id and node (handle, id) pairs."""

    def __init__(self, graph_id, nodes, names, handle=0):
        self.graph_id = graph_id
        self.nodes = nodes          # [(handle, node_id)]
        self.names = names
        self.handle = handle        # the CUgraph / CUgraphExec handle


class FakeCupti:
    """Stands in for ``ctypes.CDLL("libcupti.so")``; see the module docstring."""

    def __init__(self, version=130001, record_size=None, multiple_subscribers=False, drop_records=0,
                 clock_offset_ns=0, api_record_mode="real", defer_kernels=False, fail=None,
                 refuse_domains=(), graph_exec_created=True, per_thread_buffers=True, latency_timestamps=True):
        self.version = version
        self.record_size = record_size or (216 if version >= 130000 else 208)
        self.multiple_subscribers = multiple_subscribers
        self.drop_records = drop_records
        self.clock_offset_ns = clock_offset_ns
        self.api_record_mode = api_record_mode
        self.defer_kernels = defer_kernels
        self.fail = dict(fail or {})
        self.refuse_domains = set(refuse_domains)
        self.graph_exec_created = graph_exec_created
        #: GRAPHEXEC_CREATED names the exec's own clone rather than the instantiated graph
        self.exec_names_clone = False
        #: the driver call a runtime launch nests (cudaLaunchKernel -> cuLaunchKernel) fires its
        #: callback with the runtime call's correlation id, the one its kernel carries (measured on
        #: the H200, tests/gpu/probe_correlation.py: every kernel matched its driver callback by
        #: id); True: with an id of its own, as a CUPTI that numbered nested calls apart would
        self.nested_own_corr = False
        #: CUPTI's default (CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER = 1): every launching
        #: thread writes into a buffer of its own, kept (also after the thread ends) until it is
        #: full or flushed; False: one buffer shared by every thread
        self.per_thread_buffers = per_thread_buffers
        #: whether this CUPTI has cuptiActivitySetAttribute / cuptiActivityEnableLatencyTimestamps
        #: (False: like a CUPTI without them, the functions are missing)
        self.latency_supported = latency_timestamps
        #: latency timestamps on: kernel records carry ``queued`` (a time inside the launch
        #: call; 0 for replayed graph kernels, as measured on the H200)
        self.latency = False
        self._queued = 0
        #: NVTX_INJECTION64_PATH as NVTX read it at its first call (None: no NVTX call yet)
        self.nvtx_injection = None
        self.nvtx_calls = 0
        self.calls = {}
        self.kinds = set()
        self.api_filter = {KIND_DRIVER: {}, KIND_RUNTIME: {}}
        self.thread_id_type = 0
        self.request = self.complete = None
        self.subscriber = None
        self.enabled_callbacks = set()
        self.dropped = 0
        self._corr = itertools.count(1)
        self._handles = itertools.count(0x7000_0000)
        self._graph_ids = itertools.count(1)
        self._node_ids = {}
        self._graph_handle_ids = {}    # CUgraph / CUgraphExec handle -> graph id / exec id
        self._params = 0
        self._names = {}
        self._keep = []
        self._ext_stacks = {}
        #: deferred kernel records: (record, buffer address, offset of the slot kept for it)
        self._deferred = []
        self._bufs = {}            # owner (thread id, or 0 when shared) -> [address, size, used]
        #: buffer address -> deferred records still to be written into it; a full or flushed
        #: buffer waits in ``_waiting`` (address -> (address, size, used)) until they are
        self._unwritten = {}
        self._waiting = {}
        self._lock = threading.RLock()
        self._queue = queue.Queue()
        self._worker = threading.Thread(target=self._complete_worker, name="fake-cupti-worker", daemon=True)
        self._worker.start()
        self.complete_threads = set()

    # ================================================================== C API
    def _enter(self, name):
        self.calls[name] = self.calls.get(name, 0) + 1
        return self.fail.get(name, 0)

    def cuptiGetVersion(self, p_version):
        _obj(p_version).value = self.version
        return self._enter("cuptiGetVersion")

    def cuptiGetResultString(self, code, p_text):
        text = RESULT_STRINGS.get(int(code), b"CUPTI_ERROR_UNKNOWN")
        _obj(p_text).value = text
        return 0

    def cuptiGetTimestamp(self, p_stamp):
        _obj(p_stamp).value = self._now()
        return self._enter("cuptiGetTimestamp")

    def cuptiSetThreadIdType(self, kind):
        self.thread_id_type = int(kind)
        return self._enter("cuptiSetThreadIdType")

    def cuptiActivityRegisterCallbacks(self, request, complete):
        self.request, self.complete = request, complete
        return self._enter("cuptiActivityRegisterCallbacks")

    def __getattr__(self, name):
        if name in ("cuptiActivitySetAttribute", "cuptiActivityEnableLatencyTimestamps") and self.latency_supported:
            return getattr(self, "_" + name)
        raise AttributeError(name)

    def _cuptiActivitySetAttribute(self, attr, p_size, p_value):
        if int(attr) == ATTR_PER_THREAD_ACTIVITY_BUFFER:
            if self.request is not None or self.kinds:
                return 1                         # "must be set before" callbacks and kinds: refuse
            self.per_thread_buffers = bool(ctypes.c_uint8.from_address(ctypes.addressof(_obj(p_value))).value)
        return self._enter("cuptiActivitySetAttribute")

    def _cuptiActivityEnableLatencyTimestamps(self, enable):
        self.latency = bool(enable)
        return self._enter("cuptiActivityEnableLatencyTimestamps")

    def cuptiActivityEnable(self, kind):
        code = self._enter("cuptiActivityEnable")
        if code:
            return code
        if int(kind) not in KNOWN_KINDS:
            return 21
        self.kinds.add(int(kind))
        if kind in self.api_filter:
            self.api_filter[kind] = {}          # enabling a kind resets its per-cbid filter (CUPTI 13.0)
        return 0

    def cuptiActivityDisable(self, kind):
        self.kinds.discard(int(kind))
        return self._enter("cuptiActivityDisable")

    def cuptiActivityEnableDriverApi(self, cbid, enable):
        return self._enable_api(KIND_DRIVER, cbid, enable, EXISTING_DRIVER_CBIDS, "cuptiActivityEnableDriverApi")

    def cuptiActivityEnableRuntimeApi(self, cbid, enable):
        return self._enable_api(KIND_RUNTIME, cbid, enable, EXISTING_RUNTIME_CBIDS, "cuptiActivityEnableRuntimeApi")

    def _enable_api(self, kind, cbid, enable, existing, name):
        code = self._enter(name)
        if code:
            return code
        if int(cbid) not in existing:
            return 1
        self.api_filter[kind][int(cbid)] = bool(enable)
        return 0

    def cuptiActivityFlushAll(self, flag):
        code = self._enter("cuptiActivityFlushAll")
        if code:
            return code
        with self._lock:
            self._write_deferred()
            for owner, buf in list(self._bufs.items()):
                if buf[2]:
                    self._hand_back(buf)
                    del self._bufs[owner]
        self._queue.join()
        return 0

    def cuptiActivityGetNextRecord(self, buffer, valid, p_record):
        record = _obj(p_record)
        if record.value is None:
            nxt = int(buffer)
        else:
            cur = int(record.value)
            nxt = cur + self._size_of(ctypes.c_uint32.from_address(cur).value)
        if nxt >= int(buffer) + int(valid):
            return 12
        if self._size_of(ctypes.c_uint32.from_address(nxt).value) is None:
            return 21
        record.value = nxt
        return 0

    def cuptiActivityGetNumDroppedRecords(self, context, stream, p_dropped):
        n, self.dropped = self.dropped + self.drop_records, 0
        self.drop_records = 0
        _obj(p_dropped).value = n
        return self._enter("cuptiActivityGetNumDroppedRecords")

    def cuptiActivityPushExternalCorrelationId(self, kind, external_id):
        self._ext_stacks.setdefault(threading.get_native_id(), []).append((int(kind), int(external_id)))
        return self._enter("cuptiActivityPushExternalCorrelationId")

    def cuptiActivityPopExternalCorrelationId(self, kind, p_id):
        stack = self._ext_stacks.get(threading.get_native_id())
        if not stack:
            return 18
        _obj(p_id).value = stack.pop()[1]
        return self._enter("cuptiActivityPopExternalCorrelationId")

    def cuptiSubscribe(self, p_handle, callback, userdata):
        code = self._enter("cuptiSubscribe")
        if code:
            return code
        if self.multiple_subscribers or self.subscriber is not None:
            return 39
        self.subscriber = callback
        _obj(p_handle).value = 0x5B5B
        return 0

    def cuptiUnsubscribe(self, handle):
        self.subscriber = None
        self.enabled_callbacks.clear()
        return self._enter("cuptiUnsubscribe")

    def cuptiFinalize(self):
        """Detach: what a session switched on is gone (kinds, callbacks, buffer callbacks,
        attributes), as CUPTI resets it."""
        with self._lock:
            self._write_deferred()
        self.kinds.clear()
        self.subscriber = None
        self.enabled_callbacks.clear()
        self.request = self.complete = None
        self.latency = False
        self.thread_id_type = 0
        return self._enter("cuptiFinalize")

    def cuptiEnableCallback(self, enable, handle, domain, cbid):
        key = (int(domain), int(cbid))
        if enable and int(domain) in self.refuse_domains:
            self._enter("cuptiEnableCallback")
            return 1
        if enable:
            self.enabled_callbacks.add(key)
        else:
            self.enabled_callbacks.discard(key)
        return self._enter("cuptiEnableCallback")

    def cuptiGetGraphNodeId(self, node, p_id):
        node_id = self._node_ids.get(int(node or 0))
        if node_id is None:
            return 1
        _obj(p_id).value = node_id
        return 0

    def cuptiGetGraphId(self, graph, p_id):
        return self._graph_handle_id(graph, p_id)

    def cuptiGetGraphExecId(self, graph_exec, p_id):
        return self._graph_handle_id(graph_exec, p_id)

    def _graph_handle_id(self, handle, p_id):
        graph_id = self._graph_handle_ids.get(int(handle or 0))
        if graph_id is None:
            return 1
        _obj(p_id).value = graph_id
        return 0

    # ================================================================== test-side driving
    def launch(self, name="tiny", dur_ns=800, stream=7, device=0, api="driver", block=(128, 1, 1),
               kernel_delay_ns=1000, timed=True):
        """One kernel launch on the calling thread; returns its correlation id.

        ``api="driver"`` models Triton (cuLaunchKernelEx: one driver API record, kernel shares
        its correlation id); ``api="runtime"`` models torch (cudaLaunchKernel: one runtime API
        record; the nested cuLaunchKernel fires the *driver callback*, with the same id unless
        :attr:`nested_own_corr`).
        """
        corr = next(self._corr)
        cbid = CU_LAUNCH_KERNEL_EX if api == "driver" else CUDA_LAUNCH_KERNEL
        kind = KIND_DRIVER if api == "driver" else KIND_RUNTIME
        self._api_call(kind, cbid, corr)
        api_end = self._now()
        k_start = api_end + kernel_delay_ns
        if not timed:     # "no timing information could be collected" (cupti_activity.h)
            k_start, dur_ns = 0, 0
        self._kernel(name, corr, k_start, dur_ns, stream, device, block, queued=self._queued)
        return corr

    def _api_call(self, kind, cbid, corr, inside=None, params=0):
        """Run one launch API: callbacks, ext-corr record, API record.  Returns the API start."""
        start = self._now()
        self._params = params      # CUpti_CallbackData.functionParams of this call's callbacks
        if params:
            self._callback(DOMAIN_DRIVER, cbid, 0, corr)
        elif kind == KIND_RUNTIME:
            self._callback(DOMAIN_RUNTIME, cbid, 0, corr)
            nested = next(self._corr) if self.nested_own_corr else corr   # the runtime's cuLaunchKernel
            self._callback(DOMAIN_DRIVER, CU_LAUNCH_KERNEL, 0, nested)
            if inside:
                inside()
            self._callback(DOMAIN_DRIVER, CU_LAUNCH_KERNEL, 1, nested)
        else:
            self._callback(DOMAIN_DRIVER, cbid, 0, corr)
            if inside:
                inside()
        self._ext_records(corr)
        self._queued = self._now() if self.latency else 0     # the command is queued inside the call
        end = self._now() + 500
        if self._api_enabled(kind, cbid):
            tid = threading.get_native_id() if self.thread_id_type == 1 else threading.get_ident() & 0xFFFFFFFF
            self._write(API_FORMAT.pack(kind, cbid, start, end, 4242, tid, corr, 0))
        self._callback(DOMAIN_RUNTIME if kind == KIND_RUNTIME else DOMAIN_DRIVER, cbid, 1, corr)
        self._params = 0
        return start

    def capture(self, names):
        """Stream-capture one launch per name on the calling thread; returns the captured graph."""
        graph_id = next(self._graph_ids)
        graph_handle = next(self._handles)
        self._graph_handle_ids[graph_handle] = graph_id
        nodes = []
        self._capture_call(CU_STREAM_BEGIN_CAPTURE_V2)
        for i, _ in enumerate(names):
            handle = next(self._handles)
            node_id = (graph_id << 32) | i
            self._node_ids[handle] = node_id
            nodes.append((handle, node_id))
            self._api_call(KIND_DRIVER, CU_LAUNCH_KERNEL_EX, next(self._corr),
                           inside=lambda h=handle: self._resource(CBID_GRAPHNODE_CREATED, graph_handle, h, 0))
        self._capture_call(CU_STREAM_END_CAPTURE)
        return FakeGraph(graph_id, nodes, list(names), graph_handle)

    def _capture_call(self, cbid):
        """``cuStreamBeginCapture_v2`` / ``cuStreamEndCapture``: their driver callbacks, ENTER and EXIT."""
        corr = next(self._corr)
        self._callback(DOMAIN_DRIVER, cbid, 0, corr)
        self._callback(DOMAIN_DRIVER, cbid, 1, corr)

    def instantiate(self, graph):
        """Instantiate: a new graph whose nodes are clones (CREATED then CLONED per node), then
        GRAPHEXEC_CREATED.  The exec's handle is both the cloned nodes' graph and the exec."""
        exec_id = next(self._graph_ids)
        exec_handle = next(self._handles)
        self._graph_handle_ids[exec_handle] = exec_id
        nodes = []
        for i, (orig_handle, _) in enumerate(graph.nodes):
            handle = next(self._handles)
            self._node_ids[handle] = (exec_id << 32) | i
            nodes.append((handle, (exec_id << 32) | i))
            self._resource(CBID_GRAPHNODE_CREATED, exec_handle, handle, 0)
            self._resource(CBID_GRAPHNODE_CLONED, exec_handle, handle, orig_handle, original_graph=graph.handle)
        if self.graph_exec_created:
            # the graph GRAPHEXEC_CREATED names: the instantiated one, or (``exec_names_clone``)
            # the exec's own clone of it
            named = exec_handle if self.exec_names_clone else graph.handle
            self._resource(CBID_GRAPHEXEC_CREATED, named, 0, 0, exec_handle)
        return FakeGraph(exec_id, nodes, graph.names, exec_handle)

    def replay(self, graph_exec, dur_ns=800, stream=7, device=0, api="driver", per_thread=False):
        """Launch an instantiated graph: one cuGraphLaunch API record (its callback's
        ``functionParams`` a ``cuGraphLaunch_params`` naming the exec and ``stream``), one kernel
        record per node.  ``api="runtime"`` models torch: cudaGraphLaunch's runtime callback and
        API record around the nested cuGraphLaunch's driver callback, all with the id the kernels
        carry; ``per_thread``: the driver call is ``cuGraphLaunch_ptsz``."""
        corr = next(self._corr)
        params = ctypes.create_string_buffer(GRAPH_LAUNCH_PARAMS_FORMAT.pack(graph_exec.handle, stream), 16)
        if api == "runtime":
            self._callback(DOMAIN_RUNTIME, CUDA_GRAPH_LAUNCH, 0, corr)
        self._api_call(KIND_DRIVER, CU_GRAPH_LAUNCH_PTSZ if per_thread else CU_GRAPH_LAUNCH, corr,
                       params=ctypes.addressof(params))
        if api == "runtime":
            self._callback(DOMAIN_RUNTIME, CUDA_GRAPH_LAUNCH, 1, corr)
        t = self._now() + 1000
        for (_, node_id), name in zip(graph_exec.nodes, graph_exec.names):
            self._kernel(name, corr, t, dur_ns, stream, device, (128, 1, 1), node_id, graph_exec.graph_id)
            t += dur_ns + 100
        return corr

    def nvtx_push(self, message):
        """``nvtxRangePushA(message)`` on the calling thread (``message`` None: a NULL pointer)."""
        text = None if message is None else ctypes.create_string_buffer(message.encode())
        params = ctypes.create_string_buffer(
            NVTX_PUSH_A_PARAMS_FORMAT.pack(ctypes.addressof(text) if text is not None else 0), 8)
        self._nvtx(CBID_NVTX_RANGE_PUSH_A, b"nvtxRangePushA", params)

    def nvtx_pop(self):
        """``nvtxRangePop()`` on the calling thread."""
        self._nvtx(CBID_NVTX_RANGE_POP, b"nvtxRangePop", ctypes.create_string_buffer(NVTX_POP_PARAMS_FORMAT.pack(0), 8))

    def _nvtx(self, cbid, function_name, params):
        self.nvtx_calls += 1
        if self.nvtx_injection is None:        # NVTX initialises once, at its first call
            self.nvtx_injection = os.environ.get(NVTX_INJECTION_ENV, "")
        if not self.nvtx_injection or self.subscriber is None or (DOMAIN_NVTX, cbid) not in self.enabled_callbacks:
            return
        name = ctypes.create_string_buffer(function_name)
        result = ctypes.c_int(0)
        data = ctypes.create_string_buffer(NVTX_DATA_FORMAT.pack(ctypes.addressof(name), ctypes.addressof(params),
                                                                 ctypes.addressof(result)), 24)
        self.subscriber(None, DOMAIN_NVTX, cbid, ctypes.addressof(data))

    def complete_kernels(self):
        """Write deferred kernel records now (as if the device finished them)."""
        with self._lock:
            self._write_deferred()

    def bulk_launch(self, n, name="tiny", dur_ns=800, stream=7, device=0, chunk=65536):
        """``n`` Triton-like launches on the calling thread, written in bulk (scale tests).

        Each launch is one driver API record (cuLaunchKernelEx, when that kind is on) followed
        by its kernel record, packed once with ``struct`` and replicated with numpy, then
        copied into the backend's buffers a buffer-full at a time.
        """
        import numpy as np
        kernel_kind = self._kernel_kind()
        assert kernel_kind is not None
        tid = threading.get_native_id() if self.thread_id_type == 1 else threading.get_ident() & 0xFFFFFFFF
        with_api = self._api_enabled(KIND_DRIVER, CU_LAUNCH_KERNEL_EX)
        api = API_FORMAT.pack(KIND_DRIVER, CU_LAUNCH_KERNEL_EX, 0, 0, 4242, tid, 0, 0) if with_api else b""
        kernel = KERNEL_FORMAT.pack(kernel_kind, 0, 0, 16, 0, 0, 0, 0, 0, device, 1, stream, 1, 1, 1, 128, 1, 1,
                                    0, 0, 0, 0, 0, 22, self._name_pointer(name), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        pair = np.frombuffer(api + kernel + bytes(self.record_size - len(kernel)), np.uint8)
        width, k_at = pair.size, len(api)
        done = 0
        while done < n:
            m = min(chunk, n - done)
            block = np.tile(pair, m).reshape(m, width)
            corr = (self._take_corr(m) + np.arange(m)).astype("<u4")
            t = np.uint64(self._now()) + np.arange(m, dtype=np.uint64) * np.uint64(2000)
            if with_api:
                block[:, 8:16] = t.astype("<u8").view(np.uint8).reshape(m, 8)
                block[:, 16:24] = (t + np.uint64(500)).astype("<u8").view(np.uint8).reshape(m, 8)
                block[:, 32:36] = corr.view(np.uint8).reshape(m, 4)
            k0 = t + np.uint64(1500)
            stamps = [(16, k0), (24, k0 + np.uint64(dur_ns)), (32, k0 + np.uint64(dur_ns))]
            if self.latency:
                stamps.append((120, t + np.uint64(200)))           # queued: inside the launch call
            for off, values in stamps:
                block[:, k_at + off:k_at + off + 8] = values.astype("<u8").view(np.uint8).reshape(m, 8)
            block[:, k_at + 92:k_at + 96] = corr.view(np.uint8).reshape(m, 4)
            self._write_rows(block)
            done += m

    def _take_corr(self, m):
        """Reserve ``m`` consecutive correlation ids; return the first."""
        with self._lock:
            first = next(self._corr)
            self._corr = itertools.count(first + m)
        return first

    def raw_buffer_write(self, data: bytes):
        """Write raw bytes as records (tests of odd buffers)."""
        self._write(data)

    # ================================================================== internals
    def _now(self):
        return time.time_ns() + self.clock_offset_ns

    def _name_pointer(self, name):
        buf = self._names.get(name)
        if buf is None:
            buf = self._names[name] = ctypes.create_string_buffer(name.encode())
        return ctypes.addressof(buf)

    def _kernel_kind(self):
        """The kind kernel records are written as: concurrent if on, else serialized if on, else None."""
        return next((k for k in (KIND_KERNEL, KIND_SERIAL_KERNEL) if k in self.kinds), None)

    def _kernel(self, name, corr, start, dur_ns, stream, device, block, node_id=0, graph_id=0, queued=0):
        kind = self._kernel_kind()
        if kind is None:
            return
        prefix = KERNEL_FORMAT.pack(kind, 0, 0, 16, 0, 0, start, start + dur_ns, start + dur_ns,
                                    device, 1, stream, 1, 1, 1, block[0], block[1], block[2], 0, 0, 0, 0,
                                    corr, 22, self._name_pointer(name), 0, queued, 0, 0, 0, 0, 0, 0, node_id, 0,
                                    graph_id)
        record = prefix + bytes(self.record_size - len(prefix))
        with self._lock:
            if not self.defer_kernels:
                self._write(record)
                return
            # the record's place is taken now, in the launching thread's buffer (requested on
            # that thread if it holds none), and written when the kernel completes: every
            # kernel record lies in a buffer its launching thread asked for (measured on the H200)
            slot = self._slot(self._owner(), len(record))
            if slot is None:
                self.dropped += 1
                return
            buf, offset = slot
            # what CUPTI writes there during the launch (measured, tests/gpu/probe_buffer_fill.py):
            # the kind with its top bit set (incomplete) and the correlation id, times still zero
            pending = bytearray(len(record))
            pending[:4] = (kind | INCOMPLETE_KIND_BIT).to_bytes(4, "little")
            pending[KERNEL_OFFSETS["correlationId"]:KERNEL_OFFSETS["correlationId"] + 4] = corr.to_bytes(4, "little")
            ctypes.memmove(buf[0] + offset, bytes(pending), len(pending))
            self._unwritten[buf[0]] = self._unwritten.get(buf[0], 0) + 1
            self._deferred.append((record, buf[0], offset))

    def _write_deferred(self):
        deferred, self._deferred = self._deferred, []
        for record, address, offset in deferred:
            ctypes.memmove(address + offset, record, len(record))
            self._unwritten[address] -= 1
            if not self._unwritten[address]:
                del self._unwritten[address]
                if address in self._waiting:
                    self._queue.put(self._waiting.pop(address))

    def _hand_back(self, buf):
        """Complete ``buf`` (to the backend), or once its deferred records are written."""
        if self._unwritten.get(buf[0]):
            self._waiting[buf[0]] = tuple(buf)
        else:
            self._queue.put(tuple(buf))

    def _slot(self, owner, nbytes):
        """``(buffer, offset)``: room for ``nbytes`` in ``owner``'s buffer, a new one requested (on
        the calling thread) when it has none or that one is full; None when none can be had."""
        buf = self._bufs.get(owner)
        if buf is not None and buf[2] + nbytes > buf[1]:
            self._hand_back(buf)
            del self._bufs[owner]
            buf = None
        if buf is None:
            if self.request is None:
                return None
            address, size, max_records = ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_size_t()
            self.request(ctypes.byref(address), ctypes.byref(size), ctypes.byref(max_records))
            if not address.value or size.value < nbytes:
                return None
            buf = self._bufs[owner] = [address.value, size.value, 0]
        offset = buf[2]
        buf[2] = offset + nbytes
        return buf, offset

    def _api_enabled(self, kind, cbid):
        if self.api_record_mode == "none" or kind not in self.kinds:
            return False
        return self.api_filter[kind].get(cbid, True)

    def _ext_records(self, corr):
        if KIND_EXTCORR not in self.kinds:
            return
        stack = self._ext_stacks.get(threading.get_native_id())
        if stack:
            kind, ext_id = stack[-1]
            self._write(EXTCORR_FORMAT.pack(KIND_EXTCORR, kind, ext_id, corr))

    def _size_of(self, kind):
        return {KIND_KERNEL: self.record_size, KIND_SERIAL_KERNEL: self.record_size, KIND_DRIVER: 40, KIND_RUNTIME: 40,
                KIND_EXTCORR: 24}.get(kind)

    def _owner(self):
        """Whose buffer the calling thread writes into."""
        return threading.get_native_id() if self.per_thread_buffers else 0

    @property
    def buffers_held(self) -> int:
        """Buffers CUPTI holds now (one per thread that wrote since the last flush)."""
        return len(self._bufs)

    def _write(self, record: bytes):
        with self._lock:
            slot = self._slot(self._owner(), len(record))
            if slot is None:
                self.dropped += 1
                return
            buf, offset = slot
            ctypes.memmove(buf[0] + offset, record, len(record))

    def _write_rows(self, rows):
        """Copy whole rows (each a run of records) into buffers, as many per buffer as fit."""
        width = rows.shape[1]
        owner = self._owner()
        i = 0
        while i < rows.shape[0]:
            with self._lock:
                buf = self._bufs.get(owner)
                if buf is not None and buf[1] - buf[2] < width:
                    self._hand_back(buf)
                    del self._bufs[owner]
                    buf = None
                if buf is None:
                    address, size, max_records = ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_size_t()
                    self.request(ctypes.byref(address), ctypes.byref(size), ctypes.byref(max_records))
                    if not address.value or size.value < width:
                        self.dropped += 2                   # CUPTI drops what it cannot store
                        i += 1
                        continue
                    buf = self._bufs[owner] = [address.value, size.value, 0]
                address, size, used = buf
                m = min((size - used) // width, rows.shape[0] - i)
                chunk = rows[i:i + m]
                ctypes.memmove(address + used, chunk.ctypes.data, m * width)
                buf[2] = used + m * width
                i += m

    def _complete_worker(self):
        while True:
            address, size, used = self._queue.get()
            try:
                self.complete_threads.add(threading.get_native_id())
                self.complete(None, 0, address, size, used)
            finally:
                self._queue.task_done()

    def _callback(self, domain, cbid, site, corr):
        if self.subscriber is None or (domain, cbid) not in self.enabled_callbacks:
            return
        data = ctypes.create_string_buffer(CALLBACK_DATA_FORMAT.pack(site, 0, self._params, 0, 0, 0, 1, 0, corr), 72)
        self.subscriber(None, domain, cbid, ctypes.addressof(data))

    def _resource(self, cbid, graph_handle, node_handle, original_handle, exec_handle=0, original_graph=0):
        if self.subscriber is None or (DOMAIN_RESOURCE, cbid) not in self.enabled_callbacks:
            return
        graph_data = ctypes.create_string_buffer(
            GRAPH_DATA_FORMAT.pack(graph_handle, original_graph, node_handle, original_handle, 0, 0, exec_handle), 56)
        resource = ctypes.create_string_buffer(RESOURCE_DATA_FORMAT.pack(0, graph_handle,
                                                                         ctypes.addressof(graph_data)), 24)
        self.subscriber(None, DOMAIN_RESOURCE, cbid, ctypes.addressof(resource))


class FakeDriver:
    """Stands in for :class:`proton_ctypes.backends.nvidia.driver.CudaDriver` (device side)."""

    H200 = {"arch": "90", "bus_width": 6016, "clock_rate": 1980000, "memory_clock_rate": 3201000, "num_sms": 132}

    def __init__(self, fake: FakeCupti = None):
        self.fake = fake
        self.syncs = 0

    def synchronize(self):
        """Finish every deferred kernel, like a device sync."""
        self.syncs += 1
        if self.fake is not None:
            self.fake.complete_kernels()

    def device_attributes(self, index):
        """The H200's attributes for every index."""
        return dict(self.H200)


class BatchSink:
    """A sink for tests: keeps every batch it is given (thread-safe) and concatenates them on demand."""

    def __init__(self):
        self.batches = []
        self.threads = set()
        self._lock = threading.Lock()

    def __call__(self, batch):
        with self._lock:
            self.batches.append(batch.copy())
            self.threads.add(threading.get_native_id())

    def rows(self):
        """All rows received so far, in delivery order."""
        import numpy as np
        from proton_ctypes.backends.base import empty_batch
        with self._lock:
            return np.concatenate(self.batches) if self.batches else empty_batch(0)


def started_backend(fake=None, mode="", python_context=None, graph_hooks=None, **kwargs):
    """A CuptiBackend over ``fake`` (a new FakeCupti by default), started with a BatchSink and
    ``mode`` (a mode string, parsed as a session would); ``graph_hooks`` as the engine connects them.

    Returns ``(backend, fake, sink)``.
    """
    from proton_ctypes.backends import select
    from proton_ctypes.backends.cupti import CuptiBackend
    fake = fake or FakeCupti()
    backend = CuptiBackend(lib=fake, driver=FakeDriver(fake), **kwargs)
    sink = BatchSink()
    backend.connect(graph_hooks=graph_hooks)
    backend.start(sink, select.parse_mode("cupti", mode), python_context=python_context)
    return backend, fake, sink
