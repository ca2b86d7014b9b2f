"""The HSA runtime through ctypes, for the roctracer backend's device facts.

roctracer's HIP_OPS records carry the HSA driver node id as ``device_id``; Proton's
RoctracerProfiler subtracts the smallest GPU node id to get the HIP device index
(``DeviceInfo::mapDeviceId``). The same agent walk gives the device block's facts when
hip-python is absent (name, CU count, clocks in MHz, memory width). The library comes
from ``TRITON_HSA_RUNTIME_PATH`` / ``TRITON_HSA_RUNTIME_LIBRARY``, a mapped copy or the
ROCm install (see :mod:`.lib`).
"""
from __future__ import annotations

import ctypes

from . import lib as rocm_lib

HSA_STATUS_SUCCESS = 0
HSA_AGENT_INFO_NAME, HSA_AGENT_INFO_DEVICE = 0, 17            # hsa.h (name: char[64])
HSA_AMD_AGENT_INFO_COMPUTE_UNIT_COUNT = 0xA002                # hsa_ext_amd.h, all uint32_t
HSA_AMD_AGENT_INFO_MAX_CLOCK_FREQUENCY = 0xA003               # MHz
HSA_AMD_AGENT_INFO_DRIVER_NODE_ID = 0xA004
HSA_AMD_AGENT_INFO_MEMORY_WIDTH = 0xA007                      # bits
HSA_AMD_AGENT_INFO_MEMORY_MAX_FREQUENCY = 0xA008              # MHz
HSA_DEVICE_TYPE_GPU = 1
_U32_FACTS = (("node_id", HSA_AMD_AGENT_INFO_DRIVER_NODE_ID), ("cu_count", HSA_AMD_AGENT_INFO_COMPUTE_UNIT_COUNT),
              ("clock_mhz", HSA_AMD_AGENT_INFO_MAX_CLOCK_FREQUENCY), ("bus_width", HSA_AMD_AGENT_INFO_MEMORY_WIDTH),
              ("mem_clock_mhz", HSA_AMD_AGENT_INFO_MEMORY_MAX_FREQUENCY))
#: ``hsa_status_t (*)(hsa_agent_t agent, void* data)``; ``hsa_agent_t`` is ``{uint64_t handle}`` by value
ITERATE_AGENTS_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_uint64, ctypes.c_void_p)

PROTOTYPES = {
    "hsa_init": (ctypes.c_int, []),
    "hsa_shut_down": (ctypes.c_int, []),
    "hsa_iterate_agents": (ctypes.c_int, [ITERATE_AGENTS_CALLBACK, ctypes.c_void_p]),
    "hsa_agent_get_info": (ctypes.c_int, [ctypes.c_uint64, ctypes.c_int, ctypes.c_void_p]),
}


def load_hsa(lib=None, environ=None):
    """The HSA runtime library (declared), or the object ``lib``; raises ``RuntimeError`` if absent."""
    loaded = rocm_lib.load_library(rocm_lib.HSA_SONAME, lib=lib, environ=environ)
    rocm_lib.declare(loaded.lib, PROTOTYPES)
    return loaded.lib


def gpu_agents(hsa) -> list:
    """GPU agents sorted by driver node id: ``{"node_id", "arch", "cu_count", "clock_mhz",
    "bus_width", "mem_clock_mhz"}`` (facts the runtime does not know are 0)."""
    found = []

    def visit(agent, data):
        dev = ctypes.c_uint32()
        if hsa.hsa_agent_get_info(agent, HSA_AGENT_INFO_DEVICE, ctypes.byref(dev)) != HSA_STATUS_SUCCESS or \
                dev.value != HSA_DEVICE_TYPE_GPU:
            return HSA_STATUS_SUCCESS
        facts = {}
        for key, attr in _U32_FACTS:
            v = ctypes.c_uint32()
            facts[key] = v.value if hsa.hsa_agent_get_info(agent, attr, ctypes.byref(v)) == HSA_STATUS_SUCCESS else 0
        name = ctypes.create_string_buffer(64)
        ok = hsa.hsa_agent_get_info(agent, HSA_AGENT_INFO_NAME, ctypes.byref(name)) == HSA_STATUS_SUCCESS
        facts["arch"] = name.value.decode(errors="replace") if ok else ""
        found.append(facts)
        return HSA_STATUS_SUCCESS

    cb = ITERATE_AGENTS_CALLBACK(visit)
    inited = hsa.hsa_init() == HSA_STATUS_SUCCESS
    try:
        hsa.hsa_iterate_agents(cb, None)
    finally:
        if inited:
            hsa.hsa_shut_down()
    return sorted(found, key=lambda a: a["node_id"])
