"""The hatchet device-info block and the device synchronisation, from libcuda (a fake libcuda here)."""
import ctypes
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from fakes.fake_cupti import FakeCupti, FakeDriver  # noqa: E402

from proton_ctypes.backends.cupti import CuptiBackend  # noqa: E402
from proton_ctypes.backends.nvidia import driver as cuda_driver  # noqa: E402
from proton_ctypes.backends.nvidia.driver import CudaDriver, CudaError  # noqa: E402

H200 = {"arch": "90", "bus_width": 6016, "clock_rate": 1980000, "memory_clock_rate": 3201000, "num_sms": 132}
#: CUdevice_attribute values of cuda.h, written here independently of the driver module
H200_ATTRIBUTES = {75: 9, 76: 0, 37: 6016, 13: 1980000, 36: 3201000, 16: 132}


class FakeLibcuda:
    """libcuda's device functions as ctypes calls them (``byref`` arguments, int results)."""

    def __init__(self, devices=2, active=(1,), current=0, fail=None):
        self.devices, self.active, self.current = devices, set(active), current
        self.fail = dict(fail or {})
        self.calls = []

    def _result(self, name, *args):
        self.calls.append((name,) + args)
        return self.fail.get(name, 0)

    def cuInit(self, flags):
        return self._result("cuInit", flags)

    def cuDeviceGetCount(self, count):
        count._obj.value = self.devices
        return self._result("cuDeviceGetCount")

    def cuDeviceGet(self, device, ordinal):
        device._obj.value = 100 + ordinal
        return self._result("cuDeviceGet", ordinal)

    def cuDeviceGetAttribute(self, value, attribute, device):
        value._obj.value = H200_ATTRIBUTES[attribute]
        return self._result("cuDeviceGetAttribute", attribute, device)

    def cuCtxGetCurrent(self, ctx):
        ctx._obj.value = self.current or None
        return self._result("cuCtxGetCurrent")

    def cuCtxSynchronize(self):
        return self._result("cuCtxSynchronize")

    def cuDevicePrimaryCtxGetState(self, device, flags, active):
        active._obj.value = int(device - 100 in self.active)
        return self._result("cuDevicePrimaryCtxGetState", device)

    def cuDevicePrimaryCtxRetain(self, ctx, device):
        ctx._obj.value = 0xC0 + device
        return self._result("cuDevicePrimaryCtxRetain", device)

    def cuCtxPushCurrent_v2(self, ctx):
        return self._result("cuCtxPushCurrent_v2", ctx.value)

    def cuCtxPopCurrent_v2(self, ctx):
        return self._result("cuCtxPopCurrent_v2")

    def cuDevicePrimaryCtxRelease_v2(self, device):
        return self._result("cuDevicePrimaryCtxRelease_v2", device)

    def cuGetErrorString(self, code, text):
        text._obj.value = {100: b"no CUDA-capable device is detected"}.get(code, b"unknown error")
        return 0


def test_device_info_lists_each_device_like_proton():
    backend = CuptiBackend(lib=FakeCupti(), driver=FakeDriver())
    assert backend.device_info([0]) == {"CUDA": {"0": H200}}
    assert backend.device_info([1, 0, 1]) == {"CUDA": {"0": H200, "1": H200}}
    assert backend.device_info([]) == {}


def test_device_attributes_are_read_from_libcuda_once_per_device():
    fake = FakeLibcuda()
    drv = CudaDriver(fake)
    assert drv.device_attributes(0) == H200
    reads = len(fake.calls)
    assert drv.device_attributes(0) == H200 and len(fake.calls) == reads      # cached
    assert ("cuInit", 0) in fake.calls and ("cuDeviceGet", 0) in fake.calls
    assert {c[1] for c in fake.calls if c[0] == "cuDeviceGetAttribute"} == set(H200_ATTRIBUTES)


def test_synchronize_finishes_every_active_primary_context():
    fake = FakeLibcuda(devices=2, active=(1,))
    CudaDriver(fake).synchronize()
    after_count = [c for c in fake.calls if c[0] not in ("cuInit", "cuCtxGetCurrent", "cuDeviceGetCount",
                                                           "cuDeviceGet", "cuDevicePrimaryCtxGetState")]
    assert after_count == [("cuDevicePrimaryCtxRetain", 101), ("cuCtxPushCurrent_v2", 0xC0 + 101),
                           ("cuCtxSynchronize",), ("cuCtxPopCurrent_v2",), ("cuDevicePrimaryCtxRelease_v2", 101)]


def test_synchronize_also_finishes_the_current_context():
    fake = FakeLibcuda(devices=0, current=0x1234)
    CudaDriver(fake).synchronize()
    assert ("cuCtxSynchronize",) in fake.calls


def test_driver_errors_carry_the_drivers_error_string():
    drv = CudaDriver(FakeLibcuda(fail={"cuInit": 100}))
    with pytest.raises(CudaError, match="^cuInit failed: CUDA error 100: no CUDA-capable device is detected$") as e:
        drv.device_attributes(0)
    assert isinstance(e.value, RuntimeError) and e.value.code == 100


def test_a_function_missing_from_libcuda_is_a_cuda_error():
    class Old(FakeLibcuda):
        cuCtxPushCurrent_v2 = None
    with pytest.raises(CudaError, match="cuCtxPushCurrent_v2 is not exported"):
        CudaDriver(Old()).synchronize()


def test_every_libcuda_function_is_declared_once_with_its_cuda_h_types():
    assert not set(cuda_driver.PROTOTYPES) & set(cuda_driver.DEVICE_PROTOTYPES)
    restype, argtypes = cuda_driver.DEVICE_PROTOTYPES["cuDeviceGetAttribute"]
    assert restype is ctypes.c_int and argtypes[1:] == [ctypes.c_int, ctypes.c_int]
    assert {name for name in FakeLibcuda.__dict__ if name.startswith("cu")} == \
        set(cuda_driver.DEVICE_PROTOTYPES) | {"cuGetErrorString"}


def test_the_cupti_backend_and_the_metric_launcher_share_one_libcuda(monkeypatch):
    fake = FakeLibcuda()
    monkeypatch.setattr(cuda_driver, "_driver", [])
    shared = cuda_driver.driver(lib=fake)
    backend = CuptiBackend(lib=FakeCupti())
    assert backend._get_driver() is shared is cuda_driver.driver()
    assert backend.device_info([0]) == {"CUDA": {"0": H200}}


def test_no_libcuda_is_a_clear_error_at_first_use(monkeypatch):
    monkeypatch.setattr(cuda_driver, "_driver", [None])
    monkeypatch.setattr(cuda_driver, "_load_error", ["libcuda.so.1: cannot open shared object file"])
    with pytest.raises(RuntimeError, match=r"CUDA driver \(libcuda.so.1\) could not be loaded: libcuda.so.1: cannot"):
        CuptiBackend(lib=FakeCupti()).device_info([0])
