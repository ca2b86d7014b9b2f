"""AMD device facts for the hatchet device block, and device synchronisation.

Proton writes, for every HIP device that ran kernels (``TreeData.cpp`` +
``Driver/GPU/HipApi.cpp``)::

    {"HIP": {"0": {"arch": "gfx942", "bus_width": 8192, "clock_rate": 2100000,
                   "memory_clock_rate": 1300000, "num_sms": 304}}}

with ``hipDeviceGetAttribute`` clock rates in kHz, the memory bus width in bits, the
multiprocessor (CU) count and ``gcnArchName``. Proton keeps the first 6 characters of
``gcnArchName`` (``"gfx942:sramecc+:xnack-"`` -> ``"gfx942"``), which truncates 7-letter
targets (``gfx1100`` -> ``gfx110``); proton_ctypes keeps the part before the first ``:``.

hip-python (the ``hip`` package of ``hip-python``, an optional dependency) supplies these
when installed; otherwise the rocprofiler-sdk agent table does (CU count, max engine
clock in MHz, the frame-buffer memory bank's width and clock).
"""
from __future__ import annotations

import ctypes
import os
from typing import Optional

from . import lib as rocm_lib

#: the device block's clock rates are in kHz (as CUDA's); ROCm agents report MHz
KHZ_PER_MHZ = 1000

_ATTRS = (("clock_rate", "hipDeviceAttributeClockRate"),
          ("memory_clock_rate", "hipDeviceAttributeMemoryClockRate"),
          ("bus_width", "hipDeviceAttributeMemoryBusWidth"),
          ("num_sms", "hipDeviceAttributeMultiprocessorCount"))


def hip_python(hip=None):
    """The hip-python ``hip`` module (or ``hip`` if given; ``False`` disables it), None when absent."""
    if hip is False:
        return None
    if hip is not None:
        return hip
    try:
        from hip import hip as mod  # hip-python, imported lazily: optional dependency
        return mod
    except Exception:
        return None


def _value(res):
    """hip-python returns ``(err, value)`` tuples (``(err,)`` for void calls); check err."""
    if isinstance(res, tuple):
        err = res[0]
        if int(getattr(err, "value", err)) != 0:
            raise RuntimeError(f"HIP error {err}")
        return res[1] if len(res) > 1 else None
    return res


def arch_name(gcn_arch) -> str:
    """``"gfx942:sramecc+:xnack-"`` -> ``"gfx942"``."""
    if isinstance(gcn_arch, (bytes, bytearray)):
        gcn_arch = bytes(gcn_arch).split(b"\0", 1)[0].decode(errors="replace")
    return str(gcn_arch).split(":", 1)[0]


def hip_device_info(index: int, hip=None) -> Optional[dict]:
    """The device block entry of HIP device ``index`` through hip-python, None if unavailable."""
    mod = hip_python(hip)
    if mod is None:
        return None
    try:
        out = {}
        enum = mod.hipDeviceAttribute_t
        for key, attr in _ATTRS:
            out[key] = int(_value(mod.hipDeviceGetAttribute(getattr(enum, attr), index)))
        props = mod.hipDeviceProp_t()
        _value(mod.hipGetDeviceProperties(props, index))
        out["arch"] = arch_name(props.gcnArchName)
        return {k: out[k] for k in ("arch", "bus_width", "clock_rate", "memory_clock_rate", "num_sms")}
    except Exception:
        return None


def agent_device_info(agent: dict) -> dict:
    """The device block entry from a rocprofiler-sdk agent (see :func:`read_agent` in rocprof)."""
    return {"arch": agent.get("arch", ""), "bus_width": int(agent.get("bus_width", 0)),
            "clock_rate": int(agent.get("clock_mhz", 0)) * KHZ_PER_MHZ,
            "memory_clock_rate": int(agent.get("mem_clock_mhz", 0)) * KHZ_PER_MHZ,
            "num_sms": int(agent.get("cu_count", 0))}


def device_synchronize(hip=None) -> bool:
    """``hipDeviceSynchronize()`` through hip-python, else through a libamdhip64 already
    mapped in this process (never loaded here: that would initialise HIP). True if done."""
    mod = hip_python(hip)
    if mod is not None:
        try:
            _value(mod.hipDeviceSynchronize())
            return True
        except Exception:
            pass
    paths = rocm_lib.mapped_paths("libamdhip64.so")
    override = os.environ.get("TRITON_LIBHIP_PATH", "")
    if override and override in paths:
        paths.insert(0, override)
    for path in paths:
        try:
            return ctypes.CDLL(path).hipDeviceSynchronize() == 0
        except (OSError, AttributeError):
            continue
    return False
