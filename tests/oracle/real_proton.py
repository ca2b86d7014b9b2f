"""Load the real ``triton.profiler`` (triton 3.9) host-only on a machine with no GPU.

The recipe of proton-spec §0.1: a stub libcupti and a stub libcuda built with the
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
_STUB_DIR = None


class OracleUnavailable(RuntimeError):
    """The real profiler cannot be started here."""


def build_stubs() -> str:
    """Compile the two stub libraries once per process; return their folder."""
    global _STUB_DIR
    if _STUB_DIR:
        return _STUB_DIR
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        raise OracleUnavailable("no C compiler to build the stub libcupti/libcuda")
    d = tempfile.mkdtemp(prefix="proton-oracle-")
    subprocess.run([cc, "-shared", "-fPIC", "-o", os.path.join(d, "libcupti.so"),
                    os.path.join(HERE, "libcupti_stub.c")], check=True)
    subprocess.run([cc, "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", os.path.join(d, "libcuda.so.1"),
                    os.path.join(HERE, "libcuda_stub.c")], check=True)
    _STUB_DIR = d
    return d


def load():
    """Return the real ``triton.profiler`` running host-only (see module docstring)."""
    try:
        import importlib.util
        if importlib.util.find_spec("triton") is None:
            raise OracleUnavailable("triton is not installed")
    except ValueError:
        pass
    d = build_stubs()
    os.environ["TRITON_CUPTI_LIB_PATH"] = d
    ctypes.CDLL(os.path.join(d, "libcuda.so.1"), mode=ctypes.RTLD_GLOBAL)
    import triton
    from triton.backends.compiler import GPUTarget

    class HostOnlyDriver:
        def get_current_target(self):
            return GPUTarget("cuda", 90, 32)

        def get_current_device(self):
            return 0

        def get_current_stream(self, device=None):
            return 0

    triton.runtime.driver.set_active(HostOnlyDriver())
    import triton.profiler as proton
    sys.modules["triton.profiler.scope"].set_metric_kernels = lambda: None
    launch = sys.modules.get("triton.profiler.hooks.launch")
    if launch is not None:
        launch.set_metric_kernels = lambda: None
    return proton
