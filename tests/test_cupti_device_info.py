"""The hatchet device-info block, from cuda-python device attributes (mocked here)."""
import os
import sys
import types

sys.path.insert(0, os.path.dirname(__file__))
from fakes.fake_cupti import FakeCupti, FakeDriver  # noqa: E402

from proton_ctypes.backends.nvidia import device as cupti_device  # noqa: E402
from proton_ctypes.backends.cupti import CuptiBackend  # noqa: E402

H200 = {"arch": "90", "bus_width": 6016, "clock_rate": 1980000, "memory_clock_rate": 3201000, "num_sms": 132}


def test_device_info_lists_each_device_like_proton():
    backend = CuptiBackend(lib=FakeCupti(), driver=FakeDriver())
    assert backend.device_info([0]) == {"CUDA": {"0": H200}}
    assert backend.device_info([1, 0, 1]) == {"CUDA": {"0": H200, "1": H200}}
    assert backend.device_info([]) == {}


def _fake_cuda_bindings():
    values = {"CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR": 9, "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR": 0,
              "CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH": 6016, "CU_DEVICE_ATTRIBUTE_CLOCK_RATE": 1980000,
              "CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE": 3201000, "CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT": 132}
    calls = []
    mod = types.SimpleNamespace(
        CUdevice_attribute=types.SimpleNamespace(**{k: k for k in values}),
        cuInit=lambda flags: (0,),
        cuDeviceGet=lambda i: (0, f"dev{i}"),
        cuDeviceGetAttribute=lambda attr, dev: (0, values[attr]),
        cuDeviceGetCount=lambda: (0, 2),
        cuCtxGetCurrent=lambda: (0, 0),
        cuDevicePrimaryCtxGetState=lambda dev: (0, 0, dev == "dev1"),
        cuDevicePrimaryCtxRetain=lambda dev: (0, f"ctx:{dev}"),
        cuCtxPushCurrent=lambda ctx: calls.append(("push", ctx)) or (0,),
        cuCtxSynchronize=lambda: calls.append(("sync",)) or (0,),
        cuCtxPopCurrent=lambda: calls.append(("pop",)) or (0, None),
        cuDevicePrimaryCtxRelease=lambda dev: calls.append(("release", dev)) or (0,),
    )
    return mod, calls


def test_cuda_driver_maps_attributes(monkeypatch):
    mod, _ = _fake_cuda_bindings()
    monkeypatch.setattr(cupti_device, "_driver", lambda: mod)
    assert cupti_device.CudaDriver().device_attributes(0) == H200


def test_cuda_driver_synchronizes_every_active_primary_context(monkeypatch):
    mod, calls = _fake_cuda_bindings()
    monkeypatch.setattr(cupti_device, "_driver", lambda: mod)
    cupti_device.CudaDriver().synchronize()
    assert calls == [("push", "ctx:dev1"), ("sync",), ("pop",), ("release", "dev1")]


def test_cuda_driver_errors_are_runtime_errors(monkeypatch):
    mod, _ = _fake_cuda_bindings()
    mod.cuInit = lambda flags: (100,)
    monkeypatch.setattr(cupti_device, "_driver", lambda: mod)
    try:
        cupti_device.CudaDriver().device_attributes(0)
    except RuntimeError as e:
        assert "CUDA driver call failed" in str(e)
    else:
        raise AssertionError("expected RuntimeError")
