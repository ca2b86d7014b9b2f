"""libroctracer64 through ctypes: one declaration per function used, checked calls.

Written from the roctracer 4.1 headers (``inc/roctracer.h``, ``inc/roctracer_ext.h``,
``inc/ext/prof_protocol.h``). :class:`TracerLib` wraps the library (or a fake with the
same function names; the shared :class:`~.lib.VendorLib`): ``lib.call("roctracer_x", ...)``
raises :class:`RoctracerError` carrying ``roctracer_error_string()`` and the function name
for any non-zero status.
"""
from __future__ import annotations

import ctypes

from .lib import ROCTRACER_SONAME, VendorError, VendorLib, c_string

U32, U64, SIZE_T, VOIDP = ctypes.c_uint32, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p
P = ctypes.POINTER

ACTIVITY_DOMAIN_HIP_OPS = 2
ACTIVITY_DOMAIN_HIP_API = 3
ACTIVITY_API_PHASE_ENTER = 0
STATUS_SUCCESS = 0

#: HIP API operations traced for the launch-time join (Proton's matchKernelCbId list,
#: without the capture/instantiate calls, which only matter to its graph bookkeeping).
HIP_LAUNCH_OPERATIONS = (
    "hipLaunchKernel", "hipExtLaunchKernel", "hipExtLaunchMultiKernelMultiDevice", "hipExtModuleLaunchKernel",
    "hipHccModuleLaunchKernel", "hipLaunchCooperativeKernel", "hipLaunchCooperativeKernelMultiDevice",
    "hipModuleLaunchKernel", "hipModuleLaunchCooperativeKernel", "hipModuleLaunchCooperativeKernelMultiDevice",
    "hipGraphLaunch",
)

#: ``void (*roctracer_buffer_callback_t)(const char* begin, const char* end, void* arg)``
BUFFER_CALLBACK = ctypes.CFUNCTYPE(None, VOIDP, VOIDP, VOIDP)
#: ``void (*activity_rtapi_callback_t)(uint32_t domain, uint32_t cid, const void* data, void* arg)``
API_CALLBACK = ctypes.CFUNCTYPE(None, U32, U32, VOIDP, VOIDP)
#: ``void (*roctracer_allocator_t)(char** ptr, size_t size, void* arg)``
ALLOCATOR = ctypes.CFUNCTYPE(None, P(VOIDP), SIZE_T, VOIDP)


class Properties(ctypes.Structure):
    """``roctracer_properties_t`` (48 B): mode, buffer size, allocator, buffer callback."""
    _fields_ = [("mode", U32), ("buffer_size", SIZE_T), ("alloc_fun", ALLOCATOR), ("alloc_arg", VOIDP),
                ("buffer_callback_fun", BUFFER_CALLBACK), ("buffer_callback_arg", VOIDP)]


#: name -> (restype, argtypes); statuses are ``roctracer_status_t`` (int).
PROTOTYPES = {
    "roctracer_version_major": (U32, []),
    "roctracer_version_minor": (U32, []),
    "roctracer_error_string": (ctypes.c_char_p, []),
    "roctracer_op_code": (ctypes.c_int, [U32, ctypes.c_char_p, P(U32), P(U32)]),
    "roctracer_open_pool": (ctypes.c_int, [P(Properties)]),
    "roctracer_close_pool": (ctypes.c_int, []),
    "roctracer_enable_op_activity": (ctypes.c_int, [ctypes.c_int, U32]),
    "roctracer_disable_op_activity": (ctypes.c_int, [ctypes.c_int, U32]),
    "roctracer_enable_domain_activity": (ctypes.c_int, [ctypes.c_int]),
    "roctracer_disable_domain_activity": (ctypes.c_int, [ctypes.c_int]),
    "roctracer_enable_op_callback": (ctypes.c_int, [ctypes.c_int, U32, API_CALLBACK, VOIDP]),
    "roctracer_disable_op_callback": (ctypes.c_int, [ctypes.c_int, U32]),
    "roctracer_flush_activity": (ctypes.c_int, []),
    "roctracer_get_timestamp": (ctypes.c_int, [P(U64)]),
    "roctracer_start": (None, []),
    "roctracer_stop": (None, []),
}


class RoctracerError(VendorError):
    """A roctracer call returned a non-zero status."""


class TracerLib(VendorLib):
    """libroctracer64 (or a fake exposing the same names): see :class:`~.lib.VendorLib`."""

    SONAME = ROCTRACER_SONAME
    PROTOTYPES = PROTOTYPES
    ERROR = RoctracerError
    SUCCESS = STATUS_SUCCESS

    def error_text(self, status: int) -> str:
        """``roctracer_error_string()`` (the calling thread's last error)."""
        text = c_string(self.raw("roctracer_error_string")) if self.has("roctracer_error_string") else None
        return text or "unknown roctracer error"

    def timestamp(self) -> int:
        """``roctracer_get_timestamp`` in ns (the HSA system clock)."""
        ts = U64()
        self.call("roctracer_get_timestamp", ctypes.byref(ts))
        return ts.value

    def op_code(self, domain: int, name: str):
        """``roctracer_op_code``: the operation id of API ``name``, None when unknown."""
        op, kind = U32(), U32()
        if self.raw("roctracer_op_code", domain, name.encode(), ctypes.byref(op), ctypes.byref(kind)) != 0:
            return None
        return int(op.value)

    def version(self) -> tuple:
        """``(major, minor)`` of the roctracer API."""
        if not self.has("roctracer_version_major"):
            return (0, 0)
        return (int(self.raw("roctracer_version_major")), int(self.raw("roctracer_version_minor")))
