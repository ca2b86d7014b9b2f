"""The metric kernel's direct cuLaunchKernel path and its libcuda binding, against a fake driver."""
import ctypes
from types import SimpleNamespace

import pytest

from proton_ctypes.backends.nvidia import driver as cuda_driver
from proton_ctypes.backends.nvidia.driver import CudaDriver, CudaError
from proton_ctypes.core.metric_launch import DirectLauncher

#: the metric kernel as triton 3.6 compiles it: 6 parameters, then global and profile scratch
LAYOUT = [(0, 8), (8, 8), (16, 4), (20, 4), (24, 8), (32, 4), (40, 8), (48, 8)]


class FakeDriver:
    """libcuda's calls as the metric launcher makes them (ctypes.byref arguments)."""

    def __init__(self, layout=LAYOUT, launch_rc=0, capturing=0):
        self.layout, self.launch_rc, self.capturing = layout, launch_rc, capturing
        self.launches = []

    def cuFuncGetParamInfo(self, function, index, offset, size):
        if index >= len(self.layout):
            return cuda_driver.CUDA_ERROR_INVALID_VALUE
        offset._obj.value, size._obj.value = self.layout[index]
        return 0

    def cuLaunchKernel(self, f, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        values = []
        for i, (_off, size) in enumerate(self.layout):
            ctype = ctypes.c_int64 if size == 8 else ctypes.c_int32
            values.append(ctypes.cast(params[i], ctypes.POINTER(ctype)).contents.value)
        self.launches.append(dict(f=f.value, grid=(gx, gy, gz), block=(bx, by, bz), shared=shared,
                                  stream=stream, params=values, extra=extra))
        return self.launch_rc

    def cuStreamIsCapturing(self, stream, status):
        status._obj.value = self.capturing
        return 0

    def cuGetErrorString(self, code, text):
        text._obj.value = {201: b"invalid device context"}.get(code, b"unknown error")
        return 0


def compiled(**metadata):
    md = dict(num_warps=1, shared=0, global_scratch_size=0, profile_scratch_size=0, num_ctas=1,
              cluster_dims=(1, 1, 1), launch_cooperative_grid=False, launch_pdl=False)
    md.update(metadata)
    return SimpleNamespace(function=0x1234, metadata=SimpleNamespace(**md))


def test_each_launch_rewrites_only_sequence_value_and_count():
    fake = FakeDriver()
    d = DirectLauncher.create(CudaDriver(fake), compiled(), ring_ptr=0x7000, offset_ptr=0x8000, ring_size=1 << 20)
    d.launch(stream=55, seq=3, value_ptr=0x9000, count=1)
    d.launch(stream=56, seq=4, value_ptr=0x9100, count=5)
    first, second = fake.launches
    assert first == dict(f=0x1234, grid=(1, 1, 1), block=(32, 1, 1), shared=0, stream=55,
                         params=[0x7000, 0x8000, 1 << 20, 3, 0x9000, 1, 0, 0], extra=None)
    assert second["params"] == [0x7000, 0x8000, 1 << 20, 4, 0x9100, 5, 0, 0] and second["stream"] == 56


def test_block_size_and_shared_memory_come_from_the_compiled_kernel():
    fake = FakeDriver()
    d = DirectLauncher.create(CudaDriver(fake), compiled(num_warps=4, shared=512), 1, 2, 3)
    d.launch(0, 1, 4, 1)
    assert fake.launches[0]["block"] == (128, 1, 1) and fake.launches[0]["shared"] == 512


@pytest.mark.parametrize("metadata", [dict(global_scratch_size=64), dict(profile_scratch_size=8),
                                      dict(num_ctas=2), dict(cluster_dims=(2, 1, 1)),
                                      dict(launch_cooperative_grid=True), dict(launch_pdl=True)])
def test_kernels_needing_more_than_a_plain_launch_keep_tritons_launcher(metadata):
    assert DirectLauncher.create(CudaDriver(FakeDriver()), compiled(**metadata), 1, 2, 3) is None


@pytest.mark.parametrize("layout", [LAYOUT[:5], [(0, 4)] + LAYOUT[1:], LAYOUT + [(56, 16)]])
def test_an_unexpected_parameter_layout_keeps_tritons_launcher(layout):
    assert DirectLauncher.create(CudaDriver(FakeDriver(layout)), compiled(), 1, 2, 3) is None


def test_no_libcuda_keeps_tritons_launcher():
    assert DirectLauncher.create(None, compiled(), 1, 2, 3) is None


def test_a_failed_launch_raises_with_the_drivers_error_string():
    d = DirectLauncher.create(CudaDriver(FakeDriver(launch_rc=201)), compiled(), 1, 2, 3)
    with pytest.raises(CudaError, match="cuLaunchKernel failed: CUDA error 201: invalid device context"):
        d.launch(0, 1, 2, 1)


@pytest.mark.parametrize("status,expected", [(0, False), (1, True), (2, True)])
def test_stream_capture_status_is_read_from_the_driver(status, expected):
    assert CudaDriver(FakeDriver(capturing=status)).is_capturing(0) is expected


def test_every_declared_function_has_a_prototype_matching_cuda_h():
    assert set(cuda_driver.PROTOTYPES) == {"cuLaunchKernel", "cuFuncGetParamInfo", "cuStreamIsCapturing",
                                           "cuGetErrorString", "cuStreamGetCaptureInfo_v2", "cuMemsetD32Async",
                                           "cuEventCreate", "cuEventRecord", "cuStreamWaitEvent"}
    # cuda.h (compatibility section, CUDA 12 and 13): stream, status*, id*, graph*, deps**, numDeps*
    assert len(cuda_driver.PROTOTYPES["cuStreamGetCaptureInfo_v2"][1]) == 6
    restype, argtypes = cuda_driver.PROTOTYPES["cuLaunchKernel"]
    assert restype is ctypes.c_int and len(argtypes) == 11
    # CUdeviceptr is 64 bits wide (cuMemsetD32Async's dstDevice, unsigned int value, size_t N, stream)
    assert cuda_driver.PROTOTYPES["cuMemsetD32Async"][1] == [ctypes.c_uint64, ctypes.c_uint, ctypes.c_size_t,
                                                             ctypes.c_void_p]
    assert len(cuda_driver.PROTOTYPES["cuStreamWaitEvent"][1]) == 3


def test_launches_from_several_threads_keep_their_own_parameters():
    import threading
    import time

    class Yielding(FakeDriver):
        def cuLaunchKernel(self, *args):
            time.sleep(1e-4)  # the real call releases the GIL while the driver reads the block
            return super().cuLaunchKernel(*args)
    fake = Yielding()
    d = DirectLauncher.create(CudaDriver(fake), compiled(), 1, 2, 3)

    def worker(base):
        for i in range(50):
            d.launch(0, base + i, 10 * (base + i), 1)
    threads = [threading.Thread(target=worker, args=(k * 1000,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(fake.launches) == 200
    assert sorted(x["params"][3] for x in fake.launches) == [k * 1000 + i for k in range(4) for i in range(50)]
    assert all(x["params"][4] == 10 * x["params"][3] for x in fake.launches)
