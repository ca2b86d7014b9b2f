"""Peak FLOP/s and bandwidth of devices (Proton's ``triton.profiler.specs``).

The table itself is :mod:`proton_ctypes.peaks`, shared with the viewer."""
from __future__ import annotations

from .peaks import amd_bps_by_arch, amd_fp8_flops_by_arch, flops_by_device, max_bps, max_flops

__all__ = ["flops_by_device", "amd_bps_by_arch", "amd_fp8_flops_by_arch", "max_flops", "max_bps"]
