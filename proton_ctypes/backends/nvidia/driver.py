"""libcuda through ctypes: the one owner of the CUDA driver API in this package.

Two users, one loaded library:

* the device-tensor metrics (:mod:`proton_ctypes.core.metric_launch`): launch a compiled
  kernel, read its parameter layout, ask whether a stream is capturing, and write a graph's
  current metric bank in the order of its replays (:data:`PROTOTYPES`);
* the CUPTI backend: synchronise every device before a flush, and the device attributes of
  the hatchet device-info block (:data:`DEVICE_PROTOTYPES`).

Every function is declared once here with its argument and result types (the symbol names
are the ones ``cuda.h`` maps its API names to: ``cuCtxPushCurrent`` is ``cuCtxPushCurrent_v2``);
failures raise :class:`CudaError` carrying the driver's own error string.  Tests inject an
object with the same function names (``driver(lib=fake)`` or ``CudaDriver(fake)``).
"""
from __future__ import annotations

import ctypes
import threading
from typing import Optional

c_void_p, c_uint, c_int, c_size_t = ctypes.c_void_p, ctypes.c_uint, ctypes.c_int, ctypes.c_size_t
P = ctypes.POINTER

LIBCUDA = "libcuda.so.1"

#: the metric launcher's functions: name -> (restype, argtypes), as in cuda.h (CUresult is an int enum)
PROTOTYPES = {
    "cuLaunchKernel": (c_int, [c_void_p, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_uint, c_void_p,
                               P(c_void_p), P(c_void_p)]),
    "cuFuncGetParamInfo": (c_int, [c_void_p, c_size_t, P(c_size_t), P(c_size_t)]),
    "cuStreamIsCapturing": (c_int, [c_void_p, P(c_int)]),
    "cuStreamGetCaptureInfo_v2": (c_int, [c_void_p, P(c_int), P(ctypes.c_uint64), P(c_void_p), P(c_void_p),
                                          P(c_size_t)]),
    "cuGetErrorString": (c_int, [c_int, P(ctypes.c_char_p)]),
    "cuMemsetD32Async": (c_int, [ctypes.c_uint64, c_uint, c_size_t, c_void_p]),
    "cuEventCreate": (c_int, [P(c_void_p), c_uint]),
    "cuEventRecord": (c_int, [c_void_p, c_void_p]),
    "cuStreamWaitEvent": (c_int, [c_void_p, c_void_p, c_uint]),
}
#: the CUPTI backend's functions (device synchronisation and attributes); ``CUdevice`` is an int
DEVICE_PROTOTYPES = {
    "cuInit": (c_int, [c_uint]),
    "cuDeviceGetCount": (c_int, [P(c_int)]),
    "cuDeviceGet": (c_int, [P(c_int), c_int]),
    "cuDeviceGetAttribute": (c_int, [P(c_int), c_int, c_int]),
    "cuCtxGetCurrent": (c_int, [P(c_void_p)]),
    "cuCtxSynchronize": (c_int, []),
    "cuCtxPushCurrent_v2": (c_int, [c_void_p]),
    "cuCtxPopCurrent_v2": (c_int, [P(c_void_p)]),
    "cuDevicePrimaryCtxGetState": (c_int, [c_int, P(c_uint), P(c_int)]),
    "cuDevicePrimaryCtxRetain": (c_int, [P(c_void_p), c_int]),
    "cuDevicePrimaryCtxRelease_v2": (c_int, [c_int]),
}

CUDA_SUCCESS = 0
CUDA_ERROR_INVALID_VALUE = 1
CUDA_ERROR_NOT_FOUND = 500
#: CUevent_flags: an event only for ordering (no timestamps to take)
EVENT_DISABLE_TIMING = 0x2
#: CUstreamCaptureStatus
CAPTURE_STATUS_NONE, CAPTURE_STATUS_ACTIVE, CAPTURE_STATUS_INVALIDATED = 0, 1, 2
#: CUdevice_attribute values (cuda.h) of the device-info block
ATTRIBUTE_CLOCK_RATE = 13                  # kHz
ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
ATTRIBUTE_MEMORY_CLOCK_RATE = 36           # kHz
ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH = 37     # bits
ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76


class CudaError(RuntimeError):
    """A CUDA driver call failed; the message carries the driver's error string."""

    def __init__(self, func: str, code: int, text: str):
        super().__init__(f"{func} failed: CUDA error {code}: {text}")
        self.func = func
        self.code = code


class CudaDriver:
    """A loaded libcuda (or an injected object with the same function names)."""

    def __init__(self, lib):
        self.lib = lib
        self._attributes = {}
        self._initialized = False
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ checked calls
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

    def call(self, func: str, *args) -> None:
        """Call ``func(*args)``; raise :class:`CudaError` unless it returns CUDA_SUCCESS (or is missing)."""
        fn = getattr(self.lib, func, None)
        if fn is None:
            raise CudaError(func, CUDA_ERROR_NOT_FOUND, f"{func} is not exported by this libcuda")
        self.check(func, fn(*args))

    # ------------------------------------------------------------------ the metric launcher
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

    def capture_graph(self, stream: int) -> Optional[int]:
        """The CUgraph handle ``stream`` is being captured into, or None when it is not capturing
        (``cuStreamGetCaptureInfo_v2``)."""
        status, graph = c_int(), c_void_p()
        rc = self.lib.cuStreamGetCaptureInfo_v2(stream, ctypes.byref(status), None, ctypes.byref(graph), None, None)
        self.check("cuStreamGetCaptureInfo_v2", rc)
        return graph.value if status.value == CAPTURE_STATUS_ACTIVE and graph.value else None

    def write32_async(self, address: int, value: int, stream: int, after: Optional[tuple] = None) -> None:
        """Write the 32-bit ``value`` at device ``address`` once the work queued on ``stream`` so far
        has run (``cuMemsetD32Async``: a memset, not a kernel, so no kernel of ours shows in the
        profile).  ``after`` = ``(event, other stream)``: first make ``stream`` wait for what is
        queued on the other stream too, unless that one is being captured (a wait on a capture
        would join it) or is gone (destroyed since: the write is still made, unordered)."""
        if after is not None:
            event, other = after
            try:
                unordered = self.is_capturing(other)
            except CudaError:   # the other stream is gone
                unordered = True
            if not unordered:
                self.check("cuEventRecord", self.lib.cuEventRecord(event, other))
                self.check("cuStreamWaitEvent", self.lib.cuStreamWaitEvent(stream, event, 0))
        self.check("cuMemsetD32Async", self.lib.cuMemsetD32Async(address, value, 1, stream))

    def ordering_event(self) -> int:
        """A new event of the current context that only orders streams (no timing)."""
        event = c_void_p()
        self.check("cuEventCreate", self.lib.cuEventCreate(ctypes.byref(event), EVENT_DISABLE_TIMING))
        return event.value

    # ------------------------------------------------------------------ the CUPTI backend
    def _init(self) -> None:
        if not self._initialized:
            self.call("cuInit", 0)
            self._initialized = True

    def synchronize(self) -> None:
        """Wait for every kernel launched so far: the current context, then each active primary context."""
        self._init()
        current = c_void_p()
        self.call("cuCtxGetCurrent", ctypes.byref(current))
        if current.value:
            self.call("cuCtxSynchronize")
        count = c_int()
        self.call("cuDeviceGetCount", ctypes.byref(count))
        for index in range(count.value):
            device = self._device(index)
            flags, active = c_uint(), c_int()
            self.call("cuDevicePrimaryCtxGetState", device, ctypes.byref(flags), ctypes.byref(active))
            if not active.value:
                continue
            ctx, popped = c_void_p(), c_void_p()
            self.call("cuDevicePrimaryCtxRetain", ctypes.byref(ctx), device)
            try:
                self.call("cuCtxPushCurrent_v2", ctx)
                try:
                    self.call("cuCtxSynchronize")
                finally:
                    self.call("cuCtxPopCurrent_v2", ctypes.byref(popped))
            finally:
                self.call("cuDevicePrimaryCtxRelease_v2", device)

    def device_attributes(self, index: int) -> dict:
        """Proton's device-info entry for device ``index``: arch, bus_width, clock rates (kHz), num_sms."""
        info = self._attributes.get(index)
        if info is not None:
            return info
        self._init()
        device = self._device(index)

        def get(attribute: int) -> int:
            value = c_int()
            self.call("cuDeviceGetAttribute", ctypes.byref(value), attribute, device)
            return int(value.value)
        major = get(ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
        minor = get(ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
        info = {
            "arch": str(major * 10 + minor),
            "bus_width": get(ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH),
            "clock_rate": get(ATTRIBUTE_CLOCK_RATE),
            "memory_clock_rate": get(ATTRIBUTE_MEMORY_CLOCK_RATE),
            "num_sms": get(ATTRIBUTE_MULTIPROCESSOR_COUNT),
        }
        with self._lock:
            self._attributes[index] = info
        return info

    def _device(self, index: int) -> int:
        device = c_int()
        self.call("cuDeviceGet", ctypes.byref(device), int(index))
        return device.value


def declare(handle) -> None:
    """Give every exported function of both tables its result and argument types (real libcuda only)."""
    for name, (restype, argtypes) in {**PROTOTYPES, **DEVICE_PROTOTYPES}.items():
        fn = getattr(handle, name, None)
        if fn is not None:  # cuFuncGetParamInfo is CUDA 12.4+: its absence only disables the launcher
            fn.restype, fn.argtypes = restype, argtypes


_driver: list = []
_load_error: list = []


def driver(lib=None) -> Optional[CudaDriver]:
    """The process's :class:`CudaDriver` (libcuda loaded once), or None when there is no libcuda.

    ``lib`` injects a stand-in (tests) and replaces the cached one.
    """
    if lib is not None:
        _driver[:] = [CudaDriver(lib)]
        return _driver[0]
    if not _driver:
        try:
            handle = ctypes.CDLL(LIBCUDA)
        except OSError as e:
            _load_error[:] = [str(e)]
            _driver.append(None)
        else:
            declare(handle)
            _driver.append(CudaDriver(handle))
    return _driver[0]


def required_driver() -> CudaDriver:
    """:func:`driver`, or a ``RuntimeError`` naming why libcuda could not be loaded."""
    drv = driver()
    if drv is None:
        why = _load_error[0] if _load_error else "not loaded"
        raise RuntimeError(f"[PROTON] the CUDA driver ({LIBCUDA}) could not be loaded: {why}")
    return drv
