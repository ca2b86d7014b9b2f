"""librocprofiler-sdk through ctypes: one declaration per function, checked calls, the C
structures passed to and from it, and the enum values used.

Written from the rocprofiler-sdk 0.5.0 headers (``source/include/rocprofiler-sdk/``:
``fwd.h``, ``registration.h``, ``context.h``, ``buffer.h``, ``buffer_tracing.h``,
``callback_tracing.h``, ``external_correlation.h``, ``agent.h``, ``rocprofiler.h``) and
checked against the ROCm 7 (SDK 1.x) headers where they differ (the ``ancestor`` field of
``rocprofiler_correlation_id_t``, see :mod:`.layout`).

:class:`SdkLib` is the shared :class:`~.lib.VendorLib` with this library's prototypes:
``sdk.call("rocprofiler_x", ...)`` raises :class:`RocprofilerError`, whose message carries
``rocprofiler_get_status_string`` and the function name, for any status but SUCCESS.
"""
from __future__ import annotations

import ctypes

from .lib import ROCPROFILER_SDK_SONAME, VendorError, VendorLib, c_string

U32, U64, I32, SIZE_T, VOIDP = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_int32, ctypes.c_size_t, ctypes.c_void_p
P = ctypes.POINTER

# ------------------------------------------------------------------ enum values (fwd.h & co, SDK 0.5.0; unchanged in 1.x)
STATUS_SUCCESS = 0
BUFFER_CATEGORY_TRACING = 1
AGENT_TYPE_GPU = 2
AGENT_INFO_VERSION_0 = 1
CALLBACK_PHASE_LOAD = 1
CALLBACK_TRACING_CODE_OBJECT = 10
CODE_OBJECT_LOAD = 1
CODE_OBJECT_DEVICE_KERNEL_SYMBOL_REGISTER = 2
BUFFER_TRACING_HIP_RUNTIME_API = 5
BUFFER_TRACING_KERNEL_DISPATCH = 11
BUFFER_POLICY_LOSSLESS = 2
EXTERNAL_CORRELATION_REQUEST_HIP_RUNTIME_API = 5
EXTERNAL_CORRELATION_REQUEST_KERNEL_DISPATCH = 11

#: HIP runtime operations traced for the launch-time join (Proton's kTracedHipOps plus graph launches).
HIP_LAUNCH_OPERATIONS = (
    "hipLaunchKernel", "hipLaunchKernel_spt", "hipExtLaunchKernel", "hipExtLaunchMultiKernelMultiDevice",
    "hipExtModuleLaunchKernel", "hipHccModuleLaunchKernel", "hipLaunchCooperativeKernel",
    "hipLaunchCooperativeKernel_spt", "hipLaunchCooperativeKernelMultiDevice", "hipModuleLaunchKernel",
    "hipModuleLaunchCooperativeKernel", "hipModuleLaunchCooperativeKernelMultiDevice",
    "hipModuleLaunchKernelEx", "hipLaunchKernelExC", "hipDrvLaunchKernelEx",
    "hipGraphLaunch", "hipGraphLaunch_spt",
)

#: ``rocprofiler_hip_runtime_api_id_t`` values of those operations in the SDK 0.5.0 header
#: (hip/runtime_api_id.h); used only when the SDK cannot enumerate its operations by name.
HIP_LAUNCH_OPERATION_IDS_0_5 = {
    "hipExtLaunchKernel": 84, "hipExtLaunchMultiKernelMultiDevice": 85, "hipGraphLaunch": 166,
    "hipLaunchCooperativeKernel": 211, "hipLaunchCooperativeKernelMultiDevice": 212, "hipLaunchKernel": 214,
    "hipModuleLaunchCooperativeKernel": 306, "hipModuleLaunchCooperativeKernelMultiDevice": 307,
    "hipModuleLaunchKernel": 308, "hipExtModuleLaunchKernel": 388, "hipHccModuleLaunchKernel": 389,
    "hipLaunchCooperativeKernel_spt": 418, "hipLaunchKernel_spt": 419, "hipGraphLaunch_spt": 420,
}


# ------------------------------------------------------------------ structures
class ContextId(ctypes.Structure):
    """``rocprofiler_context_id_t`` (zero-initialised, as 0.5+ require before create)."""
    _fields_ = [("handle", U64)]


class BufferId(ctypes.Structure):
    """``rocprofiler_buffer_id_t``."""
    _fields_ = [("handle", U64)]


class ClientId(ctypes.Structure):
    """``rocprofiler_client_id_t {const char* name; const uint32_t handle;}``."""
    _fields_ = [("name", ctypes.c_char_p), ("handle", U32)]


class CallbackRecordRaw(ctypes.Structure):
    """``rocprofiler_callback_tracing_record_t`` received by value: 56 B (SDK 0.x) or 64 B
    (1.x, with ``correlation_id.ancestor``). Declared as the larger size: the record is
    passed in memory on the stack (> 16 B), so reading 8 B more than a 0.x caller wrote is
    harmless; :func:`~.layout.callback_record_fields` decodes either layout."""
    _fields_ = [("words", U64 * 8)]


#: ``int (*rocprofiler_tool_initialize_t)(rocprofiler_client_finalize_t, void* tool_data)``
TOOL_INITIALIZE = ctypes.CFUNCTYPE(ctypes.c_int, VOIDP, VOIDP)
#: ``void (*rocprofiler_tool_finalize_t)(void* tool_data)``
TOOL_FINALIZE = ctypes.CFUNCTYPE(None, VOIDP)


class ToolConfigureResult(ctypes.Structure):
    """``rocprofiler_tool_configure_result_t {size_t size; initialize; finalize; void* tool_data;}``."""
    _fields_ = [("size", SIZE_T), ("initialize", TOOL_INITIALIZE), ("finalize", TOOL_FINALIZE),
                ("tool_data", VOIDP)]


#: ``rocprofiler_tool_configure_result_t* (*)(uint32_t version, const char* runtime_version,
#: uint32_t priority, rocprofiler_client_id_t* client_id)``
CONFIGURE_FUNC = ctypes.CFUNCTYPE(VOIDP, U32, ctypes.c_char_p, U32, P(ClientId))
#: ``void (*)(context, buffer_id, rocprofiler_record_header_t** headers, size_t n, void* data,
#: uint64_t drop_count)`` -- the one-u64 handle structs are passed as their u64 (same ABI).
BUFFER_CALLBACK = ctypes.CFUNCTYPE(None, U64, U64, VOIDP, SIZE_T, VOIDP, U64)
#: ``void (*)(rocprofiler_callback_tracing_record_t record, rocprofiler_user_data_t* user_data,
#: void* callback_data)``
TRACING_CALLBACK = ctypes.CFUNCTYPE(None, CallbackRecordRaw, VOIDP, VOIDP)
#: ``int (*)(thread_id, context_id, kind, operation, uint64_t internal_corr_id,
#: rocprofiler_user_data_t* external, void* data)``
EXTERNAL_CORRELATION_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, U64, U64, U32, I32, U64, P(U64), VOIDP)
#: ``rocprofiler_status_t (*)(rocprofiler_agent_version_t, const void** agents, size_t n, void* data)``
AGENTS_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, U32, P(VOIDP), SIZE_T, VOIDP)
#: ``int (*)(rocprofiler_buffer_tracing_kind_t kind, rocprofiler_tracing_operation_t op, void* data)``
OPERATION_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, U32, I32, VOIDP)

#: One declaration per function used: name -> (restype, argtypes). All but the two string
#: getters return ``rocprofiler_status_t``.
PROTOTYPES = {
    "rocprofiler_get_version": (ctypes.c_int, [P(U32), P(U32), P(U32)]),
    "rocprofiler_get_status_string": (ctypes.c_char_p, [ctypes.c_int]),
    "rocprofiler_get_status_name": (ctypes.c_char_p, [ctypes.c_int]),
    "rocprofiler_is_initialized": (ctypes.c_int, [P(ctypes.c_int)]),
    "rocprofiler_force_configure": (ctypes.c_int, [CONFIGURE_FUNC]),
    "rocprofiler_get_timestamp": (ctypes.c_int, [P(U64)]),
    "rocprofiler_create_context": (ctypes.c_int, [P(ContextId)]),
    "rocprofiler_start_context": (ctypes.c_int, [ContextId]),
    "rocprofiler_stop_context": (ctypes.c_int, [ContextId]),
    "rocprofiler_create_buffer": (ctypes.c_int, [ContextId, SIZE_T, SIZE_T, ctypes.c_int, BUFFER_CALLBACK,
                                                 VOIDP, P(BufferId)]),
    "rocprofiler_flush_buffer": (ctypes.c_int, [BufferId]),
    "rocprofiler_configure_buffer_tracing_service": (ctypes.c_int, [ContextId, ctypes.c_int, P(I32), SIZE_T,
                                                                    BufferId]),
    "rocprofiler_configure_callback_tracing_service": (ctypes.c_int, [ContextId, ctypes.c_int, P(I32), SIZE_T,
                                                                      TRACING_CALLBACK, VOIDP]),
    "rocprofiler_configure_external_correlation_id_request_service": (
        ctypes.c_int, [ContextId, P(ctypes.c_int), SIZE_T, EXTERNAL_CORRELATION_CALLBACK, VOIDP]),
    "rocprofiler_query_available_agents": (ctypes.c_int, [ctypes.c_int, AGENTS_CALLBACK, SIZE_T, VOIDP]),
    "rocprofiler_iterate_buffer_tracing_kind_operations": (ctypes.c_int, [ctypes.c_int, OPERATION_CALLBACK,
                                                                          VOIDP]),
    "rocprofiler_query_buffer_tracing_kind_operation_name": (ctypes.c_int, [ctypes.c_int, I32,
                                                                            P(ctypes.c_char_p), P(U64)]),
}


class RocprofilerError(VendorError):
    """A rocprofiler-sdk call returned a status other than SUCCESS."""


class SdkLib(VendorLib):
    """librocprofiler-sdk (or a fake exposing the same names): see :class:`~.lib.VendorLib`."""

    SONAME = ROCPROFILER_SDK_SONAME
    PROTOTYPES = PROTOTYPES
    ERROR = RocprofilerError
    SUCCESS = STATUS_SUCCESS

    def error_text(self, status: int) -> str:
        """``rocprofiler_get_status_string(status)`` (falls back to the status name or number)."""
        for getter in ("rocprofiler_get_status_string", "rocprofiler_get_status_name"):
            if self.has(getter):
                text = c_string(self.raw(getter, status))
                if text:
                    return text
        return f"rocprofiler status {status}"

    def version(self) -> tuple:
        """``(major, minor, patch)`` from ``rocprofiler_get_version`` (``(0, 0, 0)`` if absent)."""
        if not self.has("rocprofiler_get_version"):
            return (0, 0, 0)
        v = [U32(), U32(), U32()]
        self.call("rocprofiler_get_version", *(ctypes.byref(x) for x in v))
        return tuple(int(x.value) for x in v)

    def timestamp(self) -> int:
        """``rocprofiler_get_timestamp`` in ns (the SDK's clock, CLOCK_BOOTTIME)."""
        ts = U64()
        self.call("rocprofiler_get_timestamp", ctypes.byref(ts))
        return ts.value
