"""Peak FLOP/s and bandwidth of devices, from the fields of the device-info block."""
from __future__ import annotations

_CUDA_FLOPS = {
    "80": lambda width, **kw: 624e12 / (width / 8),
    "89": lambda width, **kw: (330.3 * 1e12) / (width / 8),
    "90": lambda width, num_sms, clock_rate, **kw: ((num_sms / 114 * clock_rate / (1755 * 1e3) * 1513) * 1e12)
    / (width / 8),
    "100": lambda width, num_sms, clock_rate, **kw: (num_sms * 16384 * (clock_rate / 1e3) * 1e6) / (width / 8),
}
flops_by_device = {"CUDA": _CUDA_FLOPS}

amd_bps_by_arch = {"gfx90a": 3.2 * 1e12, "gfx942": 5.3 * 1e12, "gfx950": 8.0 * 1e12}
#: FP8 matrix FLOPs per clock per CU (gfx90a: INT8)
amd_fp8_flops_by_arch = {"gfx90a": 1024, "gfx942": 4096, "gfx950": 8192}


def max_flops(device_type, arch, width, num_sms, clock_rate):
    """Peak FLOP/s of a device for operands of ``width`` bits.

    Args:
        device_type: ``"CUDA"`` or ``"HIP"``.
        arch: ``"80"``, ``"89"``, ``"90"``, ``"100"`` or a gfx name.
        width: operand width in bits (8, 16, 32, 64).
        num_sms: number of SMs / CUs.
        clock_rate: clock in kHz, as in the device block.
    """
    if device_type == "HIP":
        return amd_fp8_flops_by_arch[arch] * num_sms * clock_rate * 1e3 / (width / 8)
    if device_type not in flops_by_device:
        raise ValueError(f"Unsupported device type: {device_type}")
    if arch not in flops_by_device[device_type]:
        raise ValueError(f"Unsupported architecture: {arch}")
    return flops_by_device[device_type][arch](width, num_sms=num_sms, clock_rate=clock_rate)


def max_bps(device_type, arch, bus_width, memory_clock_rate):
    """Peak memory bandwidth in bytes/s (CUDA from bus width and memory clock in kHz)."""
    if device_type == "CUDA":
        return 2 * bus_width * memory_clock_rate * 1e3 / 8
    assert device_type == "HIP"
    return amd_bps_by_arch[arch]
