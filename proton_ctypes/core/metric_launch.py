"""Launching the compiled metric kernel straight through ``cuLaunchKernel``.

Triton's own launcher runs several µs of Python per launch (argument packing, scratch
allocation, hooks).  The metric kernel is tiny and fixed: six parameters (ring pointer,
offset pointer, ring size, sequence id, value pointer, element count) and, in recent
triton versions, trailing scratch pointers that stay null when the kernel needs no
scratch.  So its parameter block is built once per (kernel, ring) and each launch only
rewrites the sequence id, the value pointer and the count, then makes one ctypes call.
Proton launches its metric kernels from C++ in the same way.

:meth:`DirectLauncher.create` returns None whenever the kernel is not of that shape
(scratch memory, clusters, cooperative or PDL launches, another parameter count), and
the caller keeps Triton's launcher.
"""
from __future__ import annotations

import ctypes
import threading
from typing import Optional

from ..backends.nvidia.driver import CudaDriver

#: the metric kernel's runtime parameters before any trailing scratch pointers
USER_PARAMS = 6
_INT_OF_SIZE = {4: ctypes.c_int32, 8: ctypes.c_int64}


def _launchable(metadata) -> bool:
    """Whether a compiled kernel with ``metadata`` can go through a plain ``cuLaunchKernel``."""
    g = getattr
    if g(metadata, "global_scratch_size", 0) or g(metadata, "profile_scratch_size", 0):
        return False
    if g(metadata, "num_ctas", 1) != 1 or g(metadata, "launch_cooperative_grid", False) \
            or g(metadata, "launch_pdl", False):
        return False
    cluster = g(metadata, "cluster_dims", None)
    return cluster is None or all(int(c) == 1 for c in cluster)


class DirectLauncher:
    """One compiled metric kernel bound to one ring, launched on a 1x1x1 grid."""

    def __init__(self, drv: CudaDriver, function: int, block_x: int, shared: int, params: list):
        self.drv = drv
        self.function = ctypes.c_void_p(function)
        self.block_x = block_x
        self.shared = shared
        self.params = params
        self.array = (ctypes.c_void_p * len(params))(*[ctypes.addressof(p) for p in params])
        self.launch_fn = drv.lib.cuLaunchKernel
        self.seq, self.value, self.count = params[3], params[4], params[5]
        #: the parameter block is shared: one launch at a time writes and launches it
        #: (ctypes releases the GIL during the call, while the driver reads the block)
        self.lock = threading.Lock()

    @classmethod
    def create(cls, drv: Optional[CudaDriver], ck, ring_ptr: int, offset_ptr: int, ring_size: int):
        """A launcher for compiled kernel ``ck`` writing into the ring, or None (use Triton's)."""
        if drv is None:
            return None
        try:
            metadata = ck.metadata
            if not _launchable(metadata):
                return None
            layout = drv.param_layout(ck.function)
        except Exception:
            return None
        if len(layout) < USER_PARAMS or any(size not in _INT_OF_SIZE for _off, size in layout):
            return None
        if any(size != 8 for _off, size in layout[USER_PARAMS:]) or layout[0][1] != 8 or layout[1][1] != 8 \
                or layout[4][1] != 8:
            return None  # pointers are 8 bytes; anything else is not the kernel we know
        params = [_INT_OF_SIZE[size]() for _off, size in layout]
        params[0].value, params[1].value, params[2].value = ring_ptr, offset_ptr, ring_size
        return cls(drv, ck.function, 32 * int(getattr(metadata, "num_warps", 1)),
                   int(getattr(metadata, "shared", 0)), params)

    def launch(self, stream: int, seq: int, value_ptr: int, count: int) -> None:
        """Launch one record write on ``stream``; raises CudaError on failure."""
        with self.lock:
            self.seq.value = seq
            self.value.value = value_ptr
            self.count.value = count
            rc = self.launch_fn(self.function, 1, 1, 1, self.block_x, 1, 1, self.shared, stream, self.array, None)
        if rc:
            self.drv.check("cuLaunchKernel", rc)
