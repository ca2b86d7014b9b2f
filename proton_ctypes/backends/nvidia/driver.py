"""libcuda through ctypes: the driver calls the device-tensor metrics make per metric.

Only what :mod:`proton_ctypes.core.metric_launch` needs: launch a compiled kernel, read its
parameter layout, ask whether a stream is capturing.  Every function is declared once
here with its argument and result types; failures raise :class:`CudaError` carrying the
driver's own error string.
"""
from __future__ import annotations

import ctypes
from typing import Optional

c_void_p, c_uint, c_int, c_size_t = ctypes.c_void_p, ctypes.c_uint, ctypes.c_int, ctypes.c_size_t

#: name -> (restype, argtypes), as in cuda.h (CUresult is an int enum)
PROTOTYPES = {
    "cuLaunchKernel": (c_int, [c_void_p, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_void_p,
                               ctypes.POINTER(c_void_p), ctypes.POINTER(c_void_p)]),
    "cuFuncGetParamInfo": (c_int, [c_void_p, c_size_t, ctypes.POINTER(c_size_t), ctypes.POINTER(c_size_t)]),
    "cuStreamIsCapturing": (c_int, [c_void_p, ctypes.POINTER(c_int)]),
    "cuGetErrorString": (c_int, [c_int, ctypes.POINTER(ctypes.c_char_p)]),
}
CUDA_SUCCESS = 0
CUDA_ERROR_INVALID_VALUE = 1
#: CUstreamCaptureStatus
CAPTURE_STATUS_NONE, CAPTURE_STATUS_ACTIVE, CAPTURE_STATUS_INVALIDATED = 0, 1, 2


class CudaError(RuntimeError):
    """A CUDA driver call failed; the message carries the driver's error string."""

    def __init__(self, func: str, code: int, text: str):
        super().__init__(f"{func} failed: CUDA error {code}: {text}")
        self.code = code


class CudaDriver:
    """A loaded libcuda (or an injected object with the same function names)."""

    def __init__(self, lib):
        self.lib = lib

    def error_string(self, code: int) -> str:
        """The driver's text for ``code`` (``cuGetErrorString``)."""
        text = ctypes.c_char_p()
        try:
            if self.lib.cuGetErrorString(code, ctypes.byref(text)) == CUDA_SUCCESS and text.value:
                return text.value.decode("utf-8", "replace")
        except Exception:
            pass
        return "unknown error"

    def check(self, func: str, code: int) -> None:
        """Raise :class:`CudaError` unless ``code`` is CUDA_SUCCESS."""
        if code != CUDA_SUCCESS:
            raise CudaError(func, code, self.error_string(code))

    def param_layout(self, function: int) -> list:
        """``[(offset, size), ...]`` of every kernel parameter of ``function`` (``cuFuncGetParamInfo``)."""
        out = []
        offset, size = c_size_t(), c_size_t()
        while True:
            rc = self.lib.cuFuncGetParamInfo(function, len(out), ctypes.byref(offset), ctypes.byref(size))
            if rc == CUDA_ERROR_INVALID_VALUE and out:
                return out  # one past the last parameter
            self.check("cuFuncGetParamInfo", rc)
            out.append((offset.value, size.value))

    def is_capturing(self, stream: int) -> bool:
        """Whether ``stream`` is being captured into a CUDA graph (``cuStreamIsCapturing``)."""
        status = c_int()
        self.check("cuStreamIsCapturing", self.lib.cuStreamIsCapturing(stream, ctypes.byref(status)))
        return status.value != CAPTURE_STATUS_NONE


_driver: list = []


def driver(lib=None) -> Optional[CudaDriver]:
    """The process's :class:`CudaDriver` (libcuda loaded once), or None when there is no libcuda.

    ``lib`` injects a stand-in (tests) and replaces the cached one.
    """
    if lib is not None:
        _driver[:] = [CudaDriver(lib)]
        return _driver[0]
    if not _driver:
        try:
            handle = ctypes.CDLL("libcuda.so.1")
            for name, (restype, argtypes) in PROTOTYPES.items():
                fn = getattr(handle, name)
                fn.restype, fn.argtypes = restype, argtypes
            _driver.append(CudaDriver(handle))
        except (OSError, AttributeError):
            _driver.append(None)
    return _driver[0]
