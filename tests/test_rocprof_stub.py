"""The rocprofiler backend's ctypes declarations through a real C ABI: a C stub of the SDK
(tests/data/rocm/rocprofiler_sdk_stub.c) compiled with the system ``cc`` and loaded with
``ctypes.CDLL``, so argtypes, by-value handles and the by-value callback record are real."""
from __future__ import annotations

import ctypes
import pathlib
import shutil
import subprocess
import threading
import time

import pytest

from proton_ctypes.backends.modes import NO_MODE
from proton_ctypes.backends.amd import sdk_runtime as rocm_sdk_runtime
from proton_ctypes.backends.rocprof import RocprofilerBackend
from proton_ctypes.tree import strings

STUB = pathlib.Path(__file__).parent / "data" / "rocm" / "rocprofiler_sdk_stub.c"


@pytest.fixture(scope="module")
def stub_lib(tmp_path_factory):
    cc = shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler (cc) to build the rocprofiler-sdk stub")
    out = tmp_path_factory.mktemp("stub") / "librocprofiler-sdk.so"
    proc = subprocess.run([cc, "-shared", "-fPIC", "-O1", str(STUB), "-o", str(out)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    lib = ctypes.CDLL(str(out))
    lib.stub_launch.restype = ctypes.c_uint64
    lib.stub_launch.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int32]
    lib.stub_load_kernel.argtypes = [ctypes.c_char_p, ctypes.c_uint64]
    return lib


def test_rocprof_declarations_work_against_a_compiled_sdk(stub_lib):
    b = RocprofilerBackend(lib=stub_lib, environ={}, hip=False, synchronize=lambda: None)
    out = []
    try:
        b.start(out.append, NO_MODE)
        assert b.rt.ops == {"hipLaunchKernel": 214, "hipModuleLaunchKernel": 308}
        assert b.rt.agent_device == {0xA6E1: 0} and b.rt.agents[1]["arch"] == "gfx942"
        stub_lib.stub_load_kernel(b"stub_kernel", 77)
        t0 = time.time_ns()
        corr = stub_lib.stub_launch(77, 2000, 308)
        stub_lib.stub_launch(78, 2000, 214)        # never registered: "<unknown>"
        t1 = time.time_ns()
        b.flush()
        r = out[0]
        assert [strings.name_of(int(i)) for i in r["name_id"]] == ["stub_kernel", "<unknown>"]
        assert r["corr"][0] == corr and (r["tid"] == threading.get_native_id()).all()
        assert ((r["launch_ns"] >= t0) & (r["launch_ns"] <= t1)).all()
        assert (r["start_ns"] - r["launch_ns"] == 4000).all() and (r["end_ns"] - r["start_ns"] == 2000).all()
        assert b.device_info([0])["HIP"]["0"]["num_sms"] == 304
    finally:
        b.shutdown()
        if b.sdk is not None:
            rocm_sdk_runtime.forget(b.sdk)
