"""libcupti through ctypes: one declaration per function, and the one owner of every call.

Where the library comes from is :mod:`.locate` (``TRITON_CUPTI_LIB_PATH``, a copy already
mapped, cuda.pathfinder, the triton wheel); the winner is kept in :attr:`CuptiLib.source`
for the profile metadata.

Every CUPTI function used by the backend is declared exactly once, in :data:`PROTOTYPES`.
:class:`CuptiLib` is the one owner of the library (as Kineto's ``CuptiActivityApi``): the
backend, the callback hub and the PC sampler call its methods, never a CUPTI function; a
failing call raises :class:`CuptiError`, carrying ``cuptiGetResultString``'s text and the
function name.  Calls whose failure is expected (teardown, probing loops) say so by name
(``disable_kind``, ``dropped_records``, ...) and return quietly.
``load_cupti(lib=fake)`` accepts any object exposing the same function names (the CPU
tests' fake libcupti).
"""
from __future__ import annotations

import ctypes
from typing import Optional

from .cbids import CB_DOMAIN_NVTX, MAX_CBID, NVTX_CBIDS
from .layout import RECORD_ALIGNMENT
from .locate import find_cupti

# ------------------------------------------------------------------ C types used in the prototypes
U8, U32, U64, SIZE_T, VOIDP = ctypes.c_uint8, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p
P = ctypes.POINTER

#: ``void (*)(uint8_t **buffer, size_t *size, size_t *maxNumRecords)``
BUFFER_REQUEST_FUNC = ctypes.CFUNCTYPE(None, P(VOIDP), P(SIZE_T), P(SIZE_T))
#: ``void (*)(CUcontext ctx, uint32_t streamId, uint8_t *buffer, size_t size, size_t validSize)``
BUFFER_COMPLETE_FUNC = ctypes.CFUNCTYPE(None, VOIDP, U32, VOIDP, SIZE_T, SIZE_T)
#: ``void (*)(void *userdata, CUpti_CallbackDomain, CUpti_CallbackId, const void *cbdata)``
CALLBACK_FUNC = ctypes.CFUNCTYPE(None, VOIDP, U32, U32, VOIDP)

#: One declaration per CUPTI function the backend uses: name -> argtypes (all return CUptiResult).
PROTOTYPES = {
    "cuptiGetVersion": [P(U32)],
    "cuptiGetResultString": [ctypes.c_int, P(ctypes.c_char_p)],
    "cuptiGetTimestamp": [P(U64)],
    "cuptiSetThreadIdType": [ctypes.c_int],
    "cuptiActivityEnable": [ctypes.c_int],
    "cuptiActivityDisable": [ctypes.c_int],
    "cuptiActivityEnableDriverApi": [U32, U8],
    "cuptiActivityEnableRuntimeApi": [U32, U8],
    "cuptiActivityRegisterCallbacks": [BUFFER_REQUEST_FUNC, BUFFER_COMPLETE_FUNC],
    "cuptiActivityFlushAll": [U32],
    "cuptiActivityGetNextRecord": [VOIDP, SIZE_T, P(VOIDP)],
    "cuptiActivityGetNumDroppedRecords": [VOIDP, U32, P(SIZE_T)],
    "cuptiActivityPushExternalCorrelationId": [ctypes.c_int, U64],
    "cuptiActivityPopExternalCorrelationId": [ctypes.c_int, P(U64)],
    "cuptiSubscribe": [P(VOIDP), CALLBACK_FUNC, VOIDP],
    "cuptiUnsubscribe": [VOIDP],
    "cuptiFinalize": [],
    "cuptiEnableCallback": [U32, VOIDP, ctypes.c_int, U32],
    "cuptiGetGraphNodeId": [VOIDP, P(U64)],
    # PC sampling (cupti_pcsampling.h): each takes a pointer to its CUpti_*Params struct
    # (structs in pcsampling_layout.py)
    "cuptiPCSamplingGetNumStallReasons": [VOIDP],
    "cuptiPCSamplingGetStallReasons": [VOIDP],
    "cuptiPCSamplingSetConfigurationAttribute": [VOIDP],
    "cuptiPCSamplingEnable": [VOIDP],
    "cuptiPCSamplingDisable": [VOIDP],
    "cuptiPCSamplingStart": [VOIDP],
    "cuptiPCSamplingStop": [VOIDP],
    "cuptiPCSamplingGetData": [VOIDP],
    "cuptiGetSassToSourceCorrelation": [VOIDP],
    "cuptiGetCubinCrc": [VOIDP],
}
#: Functions used when the library has them (older CUPTI lacks them; the feature is then off):
#: the executable-graph and graph ids of the missing-graph check (CUPTI 12.x).
OPTIONAL_PROTOTYPES = {
    "cuptiGetGraphExecId": [VOIDP, P(U32)],
    "cuptiGetGraphId": [VOIDP, P(U32)],
    # the kernel-record launch source (activity.py): per-thread buffers and launch timestamps
    "cuptiActivitySetAttribute": [ctypes.c_int, P(SIZE_T), VOIDP],
    "cuptiActivityEnableLatencyTimestamps": [U8],
}

# ------------------------------------------------------------------ constants (cupti_*.h, checked by layout_check.c)
SUCCESS = 0
ERROR_MAX_LIMIT_REACHED = 12
ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED = 39
FLUSH_FORCED = 1
#: ``CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER`` (cupti_activity.h; a uint8_t, default 0 in
#: CUDA 12.x and 1 in 13.x): each launching thread's records go into buffers of its own.
ATTR_PER_THREAD_ACTIVITY_BUFFER = 9
THREAD_ID_TYPE_SYSTEM = 1
EXTERNAL_CORRELATION_KIND_CUSTOM0 = 3

#: First CUPTI API version (CUDA 12.9) that survives a declined buffer request; older ones
#: can crash (Kineto declines only from this version on).
MIN_VERSION_DECLINE_BUFFER = 27


class CuptiError(RuntimeError):
    """A CUPTI function returned a non-zero ``CUptiResult``."""

    def __init__(self, function: str, code: int, text: str):
        super().__init__(f"[PROTON] {function} failed: CUPTI error {code}: {text}")
        self.function = function
        self.code = code
        self.text = text


def declare(lib) -> None:
    """Give every function of :data:`PROTOTYPES` (and of :data:`OPTIONAL_PROTOTYPES` the library
    has) its argtypes and an int restype (real libraries only)."""
    for table, required in ((PROTOTYPES, True), (OPTIONAL_PROTOTYPES, False)):
        for name, argtypes in table.items():
            if not required and not hasattr(lib, name):
                continue
            fn = getattr(lib, name)
            fn.argtypes = argtypes
            fn.restype = ctypes.c_int


class CuptiLib:
    """A loaded libcupti (or a fake with the same function names): every CUPTI call of the package."""

    def __init__(self, lib, source: str, path: Optional[str]):
        self.lib = lib
        self.source = source
        self.path = path
        version = U32()
        self.call("cuptiGetVersion", ctypes.byref(version))
        self.version = int(version.value)
        # bound once: called per scope edge (extcorr attribution) and per graph node
        self._push = lib.cuptiActivityPushExternalCorrelationId
        self._pop = lib.cuptiActivityPopExternalCorrelationId
        self._node_id = lib.cuptiGetGraphNodeId
        # optional (see OPTIONAL_PROTOTYPES): None where this CUPTI lacks them
        self._exec_id = getattr(lib, "cuptiGetGraphExecId", None)
        self._graph_id = getattr(lib, "cuptiGetGraphId", None)

    # ------------------------------------------------------------------ checked calls
    def result_string(self, code: int) -> str:
        """``cuptiGetResultString`` text for ``code`` (never raises)."""
        text = ctypes.c_char_p()
        try:
            if self.lib.cuptiGetResultString(int(code), ctypes.byref(text)) == SUCCESS and text.value:
                return text.value.decode(errors="replace")
        except Exception:
            pass
        return "unknown error"

    def check(self, name: str, code: int) -> None:
        """Raise :class:`CuptiError` for a non-zero result ``code`` returned by ``name``."""
        if code != SUCCESS:
            raise CuptiError(name, int(code), self.result_string(code))

    def call(self, name: str, *args) -> None:
        """Call ``name(*args)`` and raise :class:`CuptiError` unless it returns CUPTI_SUCCESS."""
        code = getattr(self.lib, name)(*args)
        if code != SUCCESS:
            raise CuptiError(name, int(code), self.result_string(code))

    def try_call(self, name: str, *args) -> int:
        """Call ``name(*args)`` and return its result code without raising."""
        return int(getattr(self.lib, name)(*args))

    # ------------------------------------------------------------------ activity API
    @property
    def can_decline_buffers(self) -> bool:
        """Whether a buffer request may be declined (``*buffer = NULL``) without crashing CUPTI."""
        return self.version >= MIN_VERSION_DECLINE_BUFFER

    def register_buffer_callbacks(self, request, complete) -> None:
        """``cuptiActivityRegisterCallbacks``: CUPTI asks ``request`` for buffers, returns them to ``complete``."""
        self.call("cuptiActivityRegisterCallbacks", request, complete)

    def set_thread_id_type(self, kind: int) -> None:
        """``cuptiSetThreadIdType`` (API records then carry ``kind`` thread ids)."""
        self.call("cuptiSetThreadIdType", kind)

    def set_per_thread_buffers(self, on: bool) -> bool:
        """Set ``CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER`` (before the buffer callbacks are
        registered and any kind is enabled); False where this CUPTI refuses or lacks it."""
        if not hasattr(self.lib, "cuptiActivitySetAttribute"):
            return False
        value, size = U8(1 if on else 0), SIZE_T(ctypes.sizeof(U8))
        return self.try_call("cuptiActivitySetAttribute", ATTR_PER_THREAD_ACTIVITY_BUFFER, ctypes.byref(size),
                             ctypes.byref(value)) == SUCCESS

    def enable_latency_timestamps(self, on: bool) -> bool:
        """``cuptiActivityEnableLatencyTimestamps``: kernel records then carry ``queued`` (the host
        time the launch was written to the command buffer); False where refused or missing."""
        if not hasattr(self.lib, "cuptiActivityEnableLatencyTimestamps"):
            return False
        return self.try_call("cuptiActivityEnableLatencyTimestamps", 1 if on else 0) == SUCCESS

    def enable_kind(self, kind: int) -> None:
        """``cuptiActivityEnable(kind)``."""
        self.call("cuptiActivityEnable", kind)

    def disable_kind(self, kind: int) -> None:
        """``cuptiActivityDisable(kind)``, errors ignored (teardown)."""
        self.try_call("cuptiActivityDisable", kind)

    def deny_api_records(self, keep_driver, keep_runtime) -> None:
        """Switch off the driver/runtime API records of every callback id but ``keep_*``.

        Ids 1..:data:`MAX_CBID` are probed; ids that do not exist fail harmlessly.
        """
        driver_api, runtime_api = self.lib.cuptiActivityEnableDriverApi, self.lib.cuptiActivityEnableRuntimeApi
        for cbid in range(1, MAX_CBID):
            if cbid not in keep_driver:
                driver_api(cbid, 0)
            if cbid not in keep_runtime:
                runtime_api(cbid, 0)

    def flush_all(self, flag: int = 0) -> None:
        """``cuptiActivityFlushAll(flag)``: hand every completed (with FLUSH_FORCED: every) buffer back."""
        self.call("cuptiActivityFlushAll", flag)

    def flush_all_quietly(self, flag: int = FLUSH_FORCED) -> None:
        """:meth:`flush_all`, errors ignored (teardown)."""
        self.try_call("cuptiActivityFlushAll", flag)

    def finalize_quietly(self) -> None:
        """``cuptiFinalize``: detach CUPTI from the process, every kind, callback and attribute
        reset (the next CUPTI call attaches it afresh); errors ignored (teardown)."""
        self.try_call("cuptiFinalize")

    def dropped_records(self) -> int:
        """Records CUPTI dropped since the last call (``cuptiActivityGetNumDroppedRecords``; 0 on error)."""
        dropped = SIZE_T()
        if self.try_call("cuptiActivityGetNumDroppedRecords", None, 0, ctypes.byref(dropped)) != SUCCESS:
            return 0
        return int(dropped.value)

    def record_offsets(self, address: int, valid: int):
        """Yield the byte offset of each record of a completed buffer, up to its end or the
        first record CUPTI cannot read (``cuptiActivityGetNextRecord``)."""
        get_next = self.lib.cuptiActivityGetNextRecord
        record = VOIDP(None)
        ref = ctypes.byref(record)
        for _ in range(valid // RECORD_ALIGNMENT):  # no record is shorter than the alignment
            if get_next(address, valid, ref) != SUCCESS:  # MAX_LIMIT_REACHED: the end of the buffer
                return
            yield record.value - address

    def timestamp(self) -> int:
        """``cuptiGetTimestamp``: CUPTI's clock in ns."""
        stamp = U64()
        code = self.lib.cuptiGetTimestamp(ctypes.byref(stamp))
        if code:
            self.check("cuptiGetTimestamp", code)
        return stamp.value

    def push_external(self, kind: int, external_id: int) -> None:
        """Push ``external_id`` on this thread's external-correlation stack of ``kind``."""
        code = self._push(kind, external_id)
        if code:
            self.check("cuptiActivityPushExternalCorrelationId", code)

    def pop_external(self, kind: int) -> int:
        """Pop this thread's innermost external-correlation id of ``kind`` and return it."""
        out = U64()
        code = self._pop(kind, ctypes.byref(out))
        if code:
            self.check("cuptiActivityPopExternalCorrelationId", code)
        return int(out.value)

    # ------------------------------------------------------------------ callback API
    def subscribe(self, callback) -> VOIDP:
        """``cuptiSubscribe`` with ``callback`` (a :data:`CALLBACK_FUNC`); returns the subscriber handle."""
        handle = VOIDP()
        self.call("cuptiSubscribe", ctypes.byref(handle), callback, None)
        return handle

    def unsubscribe(self, subscriber) -> None:
        """``cuptiUnsubscribe``, errors ignored (teardown)."""
        self.try_call("cuptiUnsubscribe", subscriber)

    def enable_callback(self, subscriber, domain: int, cbid: int) -> None:
        """``cuptiEnableCallback(1, ...)`` for one callback id."""
        self.call("cuptiEnableCallback", 1, subscriber, domain, cbid)

    def disable_callback(self, subscriber, domain: int, cbid: int) -> None:
        """``cuptiEnableCallback(0, ...)`` for one callback id, errors ignored (teardown)."""
        self.try_call("cuptiEnableCallback", 0, subscriber, domain, cbid)

    def graph_node_id(self, node_handle) -> Optional[int]:
        """``cuptiGetGraphNodeId`` of a ``CUgraphNode``, None when CUPTI does not know it."""
        out = U64()
        if self._node_id(node_handle, ctypes.byref(out)) != SUCCESS:
            return None
        return int(out.value)

    @property
    def has_graph_ids(self) -> bool:
        """Whether this CUPTI has ``cuptiGetGraphExecId`` and ``cuptiGetGraphId``."""
        return self._exec_id is not None and self._graph_id is not None

    def graph_exec_id(self, exec_handle) -> Optional[int]:
        """``cuptiGetGraphExecId`` of a ``CUgraphExec``, None when unknown to CUPTI or unavailable."""
        return self._small_id(self._exec_id, exec_handle)

    def graph_id(self, graph_handle) -> Optional[int]:
        """``cuptiGetGraphId`` of a ``CUgraph``, None when unknown to CUPTI or unavailable."""
        return self._small_id(self._graph_id, graph_handle)

    @staticmethod
    def _small_id(fn, handle) -> Optional[int]:
        if fn is None or not handle:
            return None
        out = U32()
        if fn(handle, ctypes.byref(out)) != SUCCESS:
            return None
        return int(out.value)

    def enable_nvtx_callbacks(self, subscriber) -> None:
        """``cuptiEnableCallback(1, ..., CUPTI_CB_DOMAIN_NVTX, ...)`` for nvtxRangePushA and nvtxRangePop."""
        for cbid in NVTX_CBIDS:
            self.enable_callback(subscriber, CB_DOMAIN_NVTX, cbid)

    def disable_nvtx_callbacks(self, subscriber) -> None:
        """The NVTX range callbacks off again, errors ignored (teardown)."""
        for cbid in NVTX_CBIDS:
            self.disable_callback(subscriber, CB_DOMAIN_NVTX, cbid)

    # ------------------------------------------------------------------ PC sampling API
    # Each takes its ``CUpti_*Params`` structure (pcsampling_layout.py), filled by the caller.
    def pc_sampling_num_stall_reasons(self, params) -> None:
        self.call("cuptiPCSamplingGetNumStallReasons", ctypes.byref(params))

    def pc_sampling_stall_reasons(self, params) -> None:
        self.call("cuptiPCSamplingGetStallReasons", ctypes.byref(params))

    def pc_sampling_configure(self, params) -> None:
        self.call("cuptiPCSamplingSetConfigurationAttribute", ctypes.byref(params))

    def pc_sampling_enable(self, params) -> None:
        self.call("cuptiPCSamplingEnable", ctypes.byref(params))

    def pc_sampling_disable(self, params) -> None:
        """``cuptiPCSamplingDisable``, errors ignored (teardown)."""
        self.try_call("cuptiPCSamplingDisable", ctypes.byref(params))

    def pc_sampling_start(self, params) -> None:
        self.call("cuptiPCSamplingStart", ctypes.byref(params))

    def pc_sampling_stop(self, params) -> None:
        self.call("cuptiPCSamplingStop", ctypes.byref(params))

    def pc_sampling_get_data(self, params) -> None:
        self.call("cuptiPCSamplingGetData", ctypes.byref(params))

    def sass_to_source(self, params) -> bool:
        """``cuptiGetSassToSourceCorrelation``; False when the cubin has no line info."""
        return self.try_call("cuptiGetSassToSourceCorrelation", ctypes.byref(params)) == SUCCESS

    def cubin_crc(self, params) -> None:
        self.call("cuptiGetCubinCrc", ctypes.byref(params))


def load_cupti(lib=None, path: Optional[str] = None) -> CuptiLib:
    """Load libcupti (or wrap ``lib``, an object with the CUPTI function names) as a :class:`CuptiLib`.

    ``path`` forces a file; otherwise :func:`find_cupti` picks one.  A real library is
    opened with ``RTLD_GLOBAL`` (dlopen of an already mapped path returns the same handle)
    and gets its declarations from :data:`PROTOTYPES`.
    """
    if lib is not None:
        return CuptiLib(lib, "injected", None)
    source = "explicit"
    if path is None:
        source, path = find_cupti()
    try:
        handle = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    except OSError as e:
        raise RuntimeError(f"proton_ctypes: could not load libcupti from {path} ({source}): {e}") from e
    missing = [name for name in PROTOTYPES if not hasattr(handle, name)]
    if missing:
        raise RuntimeError(f"proton_ctypes: {path} lacks CUPTI functions {missing}")
    declare(handle)
    return CuptiLib(handle, source, path)
