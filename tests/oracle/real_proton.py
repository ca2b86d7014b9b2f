"""Load the real ``triton.profiler`` (triton 3.9) host-only on a machine with no GPU.

The recipe: a stub libcupti and a stub libcuda built with the
system C compiler, a fake active Triton driver claiming an sm_90 device, and no metric
kernels.  ``load()`` returns the real profiler module, or raises ``OracleUnavailable``
saying why (no compiler, triton missing); tests skip on that.
"""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
#: stub libcuda source -> folder of the built stubs
_STUB_DIRS: dict = {}


class OracleUnavailable(RuntimeError):
    """The real profiler cannot be started here."""


def build_stubs(cuda_stub: str = None) -> str:
    """Compile the stub libcupti and a stub libcuda (``cuda_stub``: a C file, by default
    ``libcuda_stub.c`` here) once per process and source; return their folder."""
    cuda_stub = os.path.abspath(cuda_stub or os.path.join(HERE, "libcuda_stub.c"))
    if cuda_stub in _STUB_DIRS:
        return _STUB_DIRS[cuda_stub]
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise OracleUnavailable("no C compiler to build the stub libcupti/libcuda")
    d = tempfile.mkdtemp(prefix="proton-oracle-")
    subprocess.run([cc, "-shared", "-fPIC", "-o", os.path.join(d, "libcupti.so"),
                    os.path.join(HERE, "libcupti_stub.c")], check=True)
    subprocess.run([cc, "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", os.path.join(d, "libcuda.so.1"),
                    cuda_stub], check=True)
    _STUB_DIRS[cuda_stub] = d
    return d


def sm90_driver(utils=None):
    """A Triton driver object claiming an sm_90 device 0 on stream 0 (``utils`` optional)."""
    from triton.backends.compiler import GPUTarget

    class HostOnlyDriver:
        def get_current_target(self):
            return GPUTarget("cuda", 90, 32)

        def get_current_device(self):
            return 0

        def get_current_stream(self, device=None):
            return 0

    driver = HostOnlyDriver()
    if utils is not None:
        driver.utils = utils
    return driver


def start_host_only(stub_dir: str) -> None:
    """Point libproton at the stubs in ``stub_dir`` and make :func:`sm90_driver` Triton's active driver."""
    os.environ["TRITON_CUPTI_LIB_PATH"] = stub_dir
    ctypes.CDLL(os.path.join(stub_dir, "libcuda.so.1"), mode=ctypes.RTLD_GLOBAL)
    import triton
    triton.runtime.driver.set_active(sm90_driver())


def load():
    """Return the real ``triton.profiler`` running host-only (see module docstring)."""
    try:
        import importlib.util
        if importlib.util.find_spec("triton") is None:
            raise OracleUnavailable("triton is not installed")
    except ValueError:
        pass
    start_host_only(build_stubs())
    import triton.profiler as proton
    sys.modules["triton.profiler.scope"].set_metric_kernels = lambda: None
    launch = sys.modules.get("triton.profiler.hooks.launch")
    if launch is not None:
        launch.set_metric_kernels = lambda: None
    return proton
