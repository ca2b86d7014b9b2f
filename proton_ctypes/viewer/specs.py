"""Peak FLOP/s and memory bandwidth of a device (spec §6.2), used by the ``util`` metric."""

FLOPS_WIDTHS = (8, 16, 32, 64)

# HIP: dense FP8 matrix FLOPs per clock per compute unit (gfx90a: INT8, it has no FP8 matrix ops).
_HIP_FP8_FLOPS_PER_CLOCK_PER_CU = {"gfx90a": 1024, "gfx942": 4096, "gfx950": 8192}
# HIP: peak HBM bandwidth in bytes/s.
_HIP_PEAK_BPS = {"gfx90a": 3.2e12, "gfx942": 5.3e12, "gfx950": 8.0e12}


def _cuda_peak_flops(arch, width, num_sms, clock_rate):
    # The expressions keep Proton's operation order so the floats come out bit-identical.
    if arch == "80":
        return 624e12 / (width / 8)
    if arch == "89":
        return (330.3 * 1e12) / (width / 8)
    if arch == "90":
        return ((num_sms / 114 * clock_rate / (1755 * 1e3) * 1513) * 1e12) / (width / 8)
    if arch == "100":
        return (num_sms * 16384 * (clock_rate / 1e3) * 1e6) / (width / 8)
    raise ValueError(f"Unsupported architecture: {arch}")


def max_flops(device_type, arch, width, num_sms, clock_rate):
    """Peak FLOP/s of a device for operands ``width`` bits wide (clock rates in kHz)."""
    if device_type == "HIP":
        return _HIP_FP8_FLOPS_PER_CLOCK_PER_CU[arch] * num_sms * clock_rate * 1e3 / (width / 8)
    if device_type != "CUDA":
        raise ValueError(f"Unsupported device type: {device_type}")
    return _cuda_peak_flops(arch, width, num_sms, clock_rate)


def max_bps(device_type, arch, bus_width, memory_clock_rate):
    """Peak memory bandwidth in bytes/s (``bus_width`` in bits, ``memory_clock_rate`` in kHz)."""
    if device_type == "CUDA":
        return 2 * bus_width * memory_clock_rate * 1e3 / 8
    if device_type != "HIP":
        raise AssertionError(f"Unsupported device type: {device_type}")
    return _HIP_PEAK_BPS[arch]
