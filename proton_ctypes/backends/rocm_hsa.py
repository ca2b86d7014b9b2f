"""The HSA runtime through ctypes, for one fact: the smallest KFD node id of a GPU agent.

roctracer's HIP_OPS records carry the HSA driver node id as ``device_id``; Proton's
RoctracerProfiler subtracts the smallest GPU node id to get the HIP device index
(``DeviceInfo::mapDeviceId``). The library comes from ``TRITON_HSA_RUNTIME_PATH`` /
``TRITON_HSA_RUNTIME_LIBRARY``, a mapped copy or the ROCm install (see :mod:`.rocm_lib`).
"""
from __future__ import annotations

import ctypes

from . import rocm_lib

HSA_STATUS_SUCCESS = 0
HSA_AGENT_INFO_DEVICE = 17               # hsa.h
HSA_AMD_AGENT_INFO_DRIVER_NODE_ID = 0xA004  # hsa_ext_amd.h
HSA_DEVICE_TYPE_GPU = 1
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
    if isinstance(loaded.lib, ctypes.CDLL):
        for name, (restype, argtypes) in PROTOTYPES.items():
            fn = getattr(loaded.lib, name)
            fn.restype, fn.argtypes = restype, argtypes
    return loaded.lib


def min_gpu_node_id(hsa) -> int:
    """Smallest ``HSA_AMD_AGENT_INFO_DRIVER_NODE_ID`` among GPU agents (0 when none)."""
    found = []

    def visit(agent, data):
        node, dev = ctypes.c_uint32(), ctypes.c_uint32()
        if hsa.hsa_agent_get_info(agent, HSA_AGENT_INFO_DEVICE, ctypes.byref(dev)) == HSA_STATUS_SUCCESS and \
                dev.value == HSA_DEVICE_TYPE_GPU and \
                hsa.hsa_agent_get_info(agent, HSA_AMD_AGENT_INFO_DRIVER_NODE_ID,
                                       ctypes.byref(node)) == HSA_STATUS_SUCCESS:
            found.append(node.value)
        return HSA_STATUS_SUCCESS

    cb = ITERATE_AGENTS_CALLBACK(visit)
    inited = hsa.hsa_init() == HSA_STATUS_SUCCESS
    try:
        hsa.hsa_iterate_agents(cb, None)
    finally:
        if inited:
            hsa.hsa_shut_down()
    return min(found) if found else 0
