"""CUPTI's callback domains and the callback ids the CUPTI backend enables or keeps
(``cupti_callbacks.h``, ``cupti_driver_cbid.h``, ``cupti_runtime_cbid.h``, ``cupti_nvtx_cbid.h``;
``tests/test_cupti_layout_headers.py`` checks them against the headers).

A table of numbers only: :mod:`.lib` (the deny loop, the NVTX callbacks), the callback hub, the
PC sampler and the collector read it.
"""
from __future__ import annotations

CB_DOMAIN_DRIVER_API = 1
CB_DOMAIN_RUNTIME_API = 2
CB_DOMAIN_RESOURCE = 3
CB_DOMAIN_NVTX = 5
CB_SITE_ENTER = 0

RESOURCE_GRAPH_CREATED = 9
RESOURCE_GRAPHNODE_CREATED = 13
RESOURCE_GRAPHEXEC_CREATED = 18
RESOURCE_GRAPHNODE_CLONED = 20

#: NVTX callback ids (cupti_nvtx_cbid.h) of the ranges that become scopes, as Proton enables them.
NVTX_RANGE_PUSH_A = 8
NVTX_RANGE_POP = 11
NVTX_CBIDS = (NVTX_RANGE_PUSH_A, NVTX_RANGE_POP)

#: Driver launch callback ids kept by the deny-list (cupti_driver_cbid.h).
DRIVER_LAUNCH_CBIDS = {
    "cuLaunchKernel": 307, "cuLaunchKernel_ptsz": 442, "cuLaunchKernelEx": 652, "cuLaunchKernelEx_ptsz": 653,
    "cuLaunchCooperativeKernel": 477, "cuLaunchCooperativeKernel_ptsz": 478,
    "cuGraphLaunch": 514, "cuGraphLaunch_ptsz": 515,
}
#: Runtime launch callback ids kept by the deny-list (cupti_runtime_cbid.h).
RUNTIME_LAUNCH_CBIDS = {
    "cudaLaunchKernel_v7000": 211, "cudaLaunchKernel_ptsz_v7000": 214,
    "cudaLaunchKernelExC_v11060": 430, "cudaLaunchKernelExC_ptsz_v11060": 431,
    "cudaLaunchCooperativeKernel_v9000": 269, "cudaLaunchCooperativeKernel_ptsz_v9000": 270,
    "cudaGraphLaunch_v10000": 311, "cudaGraphLaunch_ptsz_v10000": 312,
}
#: Graph-launch ids among them (their kernels carry the graph launch's correlation id).
DRIVER_GRAPH_LAUNCH_CBIDS = (DRIVER_LAUNCH_CBIDS["cuGraphLaunch"], DRIVER_LAUNCH_CBIDS["cuGraphLaunch_ptsz"])
RUNTIME_GRAPH_LAUNCH_CBIDS = (RUNTIME_LAUNCH_CBIDS["cudaGraphLaunch_v10000"],
                              RUNTIME_LAUNCH_CBIDS["cudaGraphLaunch_ptsz_v10000"])
GRAPH_LAUNCH_CBIDS = frozenset(DRIVER_GRAPH_LAUNCH_CBIDS + RUNTIME_GRAPH_LAUNCH_CBIDS)
#: Driver stream-capture ids (cupti_driver_cbid.h): cuStreamBeginCapture (and _ptsz, _v2,
#: _v2_ptsz, ToGraph, ToGraph_ptsz), cuStreamEndCapture (and _ptsz); the runtime's calls nest them.
DRIVER_CAPTURE_BEGIN_CBIDS = (495, 496, 539, 540, 720, 721)
DRIVER_CAPTURE_END_CBIDS = (497, 498)
#: Callback ids probed by the deny loop (ids that do not exist fail harmlessly).
MAX_CBID = 1000
