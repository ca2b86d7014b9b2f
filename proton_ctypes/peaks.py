"""Peak FLOP/s and memory bandwidth of a device, from the fields of its device-info block.

The one table behind ``proton_ctypes.specs`` (Proton's ``triton.profiler.specs``) and the
viewer's ``util`` metrics.  It imports nothing of the package, so the viewer (which never
imports the profiler) and the profiler's public face may both use it.  The expressions keep
Proton's operation order, so the floats come out bit-identical.
"""
from __future__ import annotations

#: operand widths (bits) the viewer derives a ``flop<width>/s`` utilisation for
FLOPS_WIDTHS = (8, 16, 32, 64)

#: CUDA: peak FLOP/s by architecture, for operands ``width`` bits wide (clock rates in kHz)
flops_by_device = {"CUDA": {
    "80": lambda width, **kw: 624e12 / (width / 8),
    "89": lambda width, **kw: (330.3 * 1e12) / (width / 8),
    "90": lambda width, num_sms, clock_rate, **kw: ((num_sms / 114 * clock_rate / (1755 * 1e3) * 1513) * 1e12)
    / (width / 8),
    "100": lambda width, num_sms, clock_rate, **kw: (num_sms * 16384 * (clock_rate / 1e3) * 1e6) / (width / 8),
}}

#: HIP: peak HBM bandwidth in bytes/s
amd_bps_by_arch = {"gfx90a": 3.2 * 1e12, "gfx942": 5.3 * 1e12, "gfx950": 8.0 * 1e12}
#: HIP: dense FP8 matrix FLOPs per clock per compute unit (gfx90a: INT8, it has no FP8 matrix ops)
amd_fp8_flops_by_arch = {"gfx90a": 1024, "gfx942": 4096, "gfx950": 8192}


def max_flops(device_type, arch, width, num_sms, clock_rate):
    """Peak FLOP/s of a device for operands of ``width`` bits.

    Args:
        device_type: ``"CUDA"`` or ``"HIP"``.
        arch: ``"80"``, ``"89"``, ``"90"``, ``"100"`` or a gfx name.
        width: operand width in bits (8, 16, 32, 64).
        num_sms: number of SMs / CUs.
        clock_rate: clock in kHz, as in the device block.

    Raises:
        ValueError: an unknown device type or CUDA architecture (Proton's messages).
        KeyError: an unknown HIP architecture.
    """
    if device_type == "HIP":
        return amd_fp8_flops_by_arch[arch] * num_sms * clock_rate * 1e3 / (width / 8)
    if device_type not in flops_by_device:
        raise ValueError(f"Unsupported device type: {device_type}")
    if arch not in flops_by_device[device_type]:
        raise ValueError(f"Unsupported architecture: {arch}")
    return flops_by_device[device_type][arch](width, num_sms=num_sms, clock_rate=clock_rate)


def max_bps(device_type, arch, bus_width, memory_clock_rate):
    """Peak memory bandwidth in bytes/s (CUDA from ``bus_width`` in bits and the memory clock
    in kHz, HIP from the table).

    Raises:
        AssertionError: a device type other than CUDA or HIP (Proton asserts; we name it).
        KeyError: an unknown HIP architecture.
    """
    if device_type == "CUDA":
        return 2 * bus_width * memory_clock_rate * 1e3 / 8
    if device_type != "HIP":
        raise AssertionError(f"Unsupported device type: {device_type}")
    return amd_bps_by_arch[arch]
