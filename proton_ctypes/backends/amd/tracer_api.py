"""libroctracer64 through ctypes: one declaration per function used, checked calls.

Written from the roctracer 4.1 headers (``inc/roctracer.h``, ``inc/roctracer_ext.h``,
``inc/ext/prof_protocol.h``). :class:`TracerLib` wraps the library (or a fake with the
same function names): ``lib.call("roctracer_x", ...)`` raises :class:`RoctracerError`
carrying ``roctracer_error_string()`` and the function name for any non-zero status.
"""
from __future__ import annotations

import ctypes

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


class RoctracerError(RuntimeError):
    """A roctracer call returned a non-zero status."""

    def __init__(self, func: str, status: int, text: str):
        super().__init__(f"[PROTON] {func} failed: {text} (status {status})")
        self.func, self.status, self.text = func, status, text


class TracerLib:
    """A declared, checked view of libroctracer64 (or of a fake exposing the same names)."""

    def __init__(self, lib, path: str = "", source: str = ""):
        self.lib, self.path, self.source = lib, path, source
        self._fn = {}
        for name, (restype, argtypes) in PROTOTYPES.items():
            fn = getattr(lib, name, None)
            if fn is None:
                continue
            if isinstance(lib, ctypes.CDLL):
                fn.restype, fn.argtypes = restype, argtypes
            self._fn[name] = fn

    def raw(self, name: str, *args):
        """Call ``name`` unchecked."""
        try:
            fn = self._fn[name]
        except KeyError:
            raise RoctracerError(name, -1, "function not exported by this libroctracer64") from None
        return fn(*args)

    def error_string(self) -> str:
        """``roctracer_error_string()`` (the calling thread's last error)."""
        s = self._fn["roctracer_error_string"]() if "roctracer_error_string" in self._fn else None
        if isinstance(s, int):
            s = ctypes.string_at(s) if s else None
        return s.decode(errors="replace") if s else "unknown roctracer error"

    def call(self, name: str, *args) -> None:
        """Call ``name``; raise :class:`RoctracerError` unless it returns 0."""
        status = self.raw(name, *args)
        if status:
            raise RoctracerError(name, int(status), self.error_string())

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
        if "roctracer_version_major" not in self._fn:
            return (0, 0)
        return (int(self.raw("roctracer_version_major")), int(self.raw("roctracer_version_minor")))
