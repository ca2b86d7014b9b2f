"""CUDA driver handles through cuda-python (``cuda.bindings.driver``), imported lazily.

Only two things are needed from the driver: synchronising the devices before a flush,
and the device attributes of the hatchet device-info block.  Tests pass a stand-in
object with the same two methods.
"""
from __future__ import annotations


def _driver():
    try:
        from cuda.bindings import driver
    except ImportError:  # older cuda-python layout
        from cuda import cuda as driver  # type: ignore
    return driver


def _ok(result):
    """Unpack a cuda-python result tuple, raising RuntimeError on a non-success CUresult."""
    err, *rest = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:
        raise RuntimeError(f"[PROTON] CUDA driver call failed: {err}")
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else tuple(rest)


class CudaDriver:
    """The CUDA driver as the CUPTI backend uses it."""

    def __init__(self):
        self._cuda = None
        self._attributes = {}

    def _init(self):
        if self._cuda is None:
            cuda = _driver()
            _ok(cuda.cuInit(0))
            self._cuda = cuda
        return self._cuda

    def synchronize(self) -> None:
        """Wait for every kernel launched so far: the current context, then each active primary context."""
        cuda = self._init()
        current = _ok(cuda.cuCtxGetCurrent())
        if current is not None and int(current) != 0:
            _ok(cuda.cuCtxSynchronize())
        for index in range(_ok(cuda.cuDeviceGetCount())):
            device = _ok(cuda.cuDeviceGet(index))
            _flags, active = _ok(cuda.cuDevicePrimaryCtxGetState(device))
            if not active:
                continue
            ctx = _ok(cuda.cuDevicePrimaryCtxRetain(device))
            try:
                _ok(cuda.cuCtxPushCurrent(ctx))
                try:
                    _ok(cuda.cuCtxSynchronize())
                finally:
                    _ok(cuda.cuCtxPopCurrent())
            finally:
                _ok(cuda.cuDevicePrimaryCtxRelease(device))

    def device_attributes(self, index: int) -> dict:
        """Proton's device-info entry for device ``index``: arch, bus_width, clock rates (kHz), num_sms."""
        if index in self._attributes:
            return self._attributes[index]
        cuda = self._init()
        device = _ok(cuda.cuDeviceGet(int(index)))
        attr = cuda.CUdevice_attribute

        def get(name):
            return int(_ok(cuda.cuDeviceGetAttribute(getattr(attr, name), device)))
        major = get("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR")
        minor = get("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR")
        info = {
            "arch": str(major * 10 + minor),
            "bus_width": get("CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH"),
            "clock_rate": get("CU_DEVICE_ATTRIBUTE_CLOCK_RATE"),
            "memory_clock_rate": get("CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE"),
            "num_sms": get("CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT"),
        }
        self._attributes[index] = info
        return info
