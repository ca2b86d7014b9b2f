"""Byte layouts of the CUPTI activity records the CUPTI backend reads.

Offsets come from ``offsetof`` on the CUPTI headers shipped in the triton wheel
(``CUPTI_API_VERSION`` 26, CUDA 12.8; ``../shared/gpu-probe/layout_check.c``) and are
checked against those headers by ``tests/test_cupti_layout_headers.py``.  The field
offsets we read are the same for ``CUpti_ActivityKernel5`` ... ``Kernel9`` and for the
CUPTI 13.0 record measured on the H200; only the record *size* (the stride between
records) differs between versions, so the kernel dtype is built for a given stride.

The fake libcupti used by the CPU tests packs its records with its own ``struct``
formats and never imports this module: a wrong offset here cannot pass both sides.
"""
from __future__ import annotations

import numpy as np

# ------------------------------------------------------------------ activity kinds
KIND_MEMCPY = 1
KIND_MEMSET = 2
KIND_KERNEL = 3
KIND_DRIVER = 4
KIND_RUNTIME = 5
KIND_CONCURRENT_KERNEL = 10
#: Kernel records of either kind have the same layout: ``KIND_KERNEL`` (kernels serialized) is
#: what ``mode="pcsampling"`` enables, as Proton does (continuous PC sampling is not compatible
#: with concurrent kernel tracing); the parser reports both as ``KIND_CONCURRENT_KERNEL``.
KERNEL_KINDS = (KIND_KERNEL, KIND_CONCURRENT_KERNEL)
KIND_EXTERNAL_CORRELATION = 39

# ------------------------------------------------------------------ field tables: (name, numpy type, offset)
#: Fields read from a kernel record (``CUpti_ActivityKernel5..9``; ``graphId`` from Kernel8 on;
#: ``queued`` is 0 (CUPTI_TIMESTAMP_UNKNOWN) unless latency timestamps are on, and for graph nodes).
KERNEL_FIELDS = (
    ("kind", "<u4", 0),
    ("start", "<u8", 16),
    ("end", "<u8", 24),
    ("completed", "<u8", 32),
    ("deviceId", "<u4", 40),
    ("contextId", "<u4", 44),
    ("streamId", "<u4", 48),
    ("gridX", "<i4", 52),
    ("gridY", "<i4", 56),
    ("gridZ", "<i4", 60),
    ("blockX", "<i4", 64),
    ("blockY", "<i4", 68),
    ("blockZ", "<i4", 72),
    ("correlationId", "<u4", 92),
    ("gridId", "<i8", 96),
    ("name", "<u8", 104),
    ("queued", "<u8", 120),
    ("graphNodeId", "<u8", 144),
    ("graphId", "<u4", 156),
)

#: ``CUpti_ActivityAPI`` (kinds DRIVER and RUNTIME), 40 bytes.
API_FIELDS = (
    ("kind", "<u4", 0),
    ("cbid", "<u4", 4),
    ("start", "<u8", 8),
    ("end", "<u8", 16),
    ("processId", "<u4", 24),
    ("threadId", "<u4", 28),
    ("correlationId", "<u4", 32),
    ("returnValue", "<u4", 36),
)
API_RECORD_SIZE = 40

#: ``CUpti_ActivityExternalCorrelation``, 24 bytes.
EXTCORR_FIELDS = (
    ("kind", "<u4", 0),
    ("externalKind", "<u4", 4),
    ("externalId", "<u8", 8),
    ("correlationId", "<u4", 16),
)
EXTCORR_RECORD_SIZE = 24

#: ``sizeof`` of the kernel structs in the 12.8 headers (Kernel4 ... Kernel9).
KERNEL_STRUCT_SIZES = {4: 144, 5: 160, 6: 168, 7: 176, 8: 200, 9: 208}

#: Smallest kernel record holding every field of :data:`KERNEL_FIELDS` (``graphId`` ends at 160).
MIN_KERNEL_RECORD_SIZE = 160

#: Record alignment CUPTI uses (``ACTIVITY_RECORD_ALIGNMENT``).
RECORD_ALIGNMENT = 8


def expected_kernel_stride(version: int) -> int:
    """Kernel record stride expected for a ``cuptiGetVersion`` value (the cross-check table).

    CUPTI 12.x (API versions below 130000; 12.8 is 26) writes ``CUpti_ActivityKernel9``,
    208 bytes; CUPTI 13.0 (API version 130001) was measured at 216 bytes on the H200.
    """
    if version >= 130000:
        return 216
    return KERNEL_STRUCT_SIZES[9]


def record_dtype(fields, itemsize: int) -> np.dtype:
    """A numpy structured dtype with ``fields`` at their offsets and the given ``itemsize``."""
    return np.dtype({"names": [f[0] for f in fields],
                     "formats": [f[1] for f in fields],
                     "offsets": [f[2] for f in fields],
                     "itemsize": itemsize})


def kernel_dtype(stride: int) -> np.dtype:
    """The structured dtype of one kernel record for a buffer whose kernel stride is ``stride``."""
    if stride < MIN_KERNEL_RECORD_SIZE or stride % RECORD_ALIGNMENT:
        raise ValueError(f"proton_ctypes: implausible CUPTI kernel record size {stride}")
    return record_dtype(KERNEL_FIELDS, stride)


API_DTYPE = record_dtype(API_FIELDS, API_RECORD_SIZE)


def record_sizes(kernel_stride: int) -> dict:
    """Map of activity kind -> record size for the kinds the backend enables."""
    return {KIND_KERNEL: kernel_stride,
            KIND_CONCURRENT_KERNEL: kernel_stride,
            KIND_DRIVER: API_RECORD_SIZE,
            KIND_RUNTIME: API_RECORD_SIZE,
            KIND_EXTERNAL_CORRELATION: EXTCORR_RECORD_SIZE}


# ------------------------------------------------------------------ callback-API structs (offsets, 64-bit)
#: ``CUpti_CallbackData``: ``callbackSite`` (0 = ENTER) and ``correlationId``.
CALLBACK_SITE_OFFSET = 0
CALLBACK_CORRELATION_OFFSET = 64
#: ``CUpti_CallbackData.functionParams``; ``cuGraphLaunch_params.hGraphExec`` is its first field.
CALLBACK_PARAMS_OFFSET = 16
#: ``CUpti_ResourceData.resourceDescriptor``.
RESOURCE_DESCRIPTOR_OFFSET = 16
#: ``CUpti_GraphData``: ``graph``, ``node``, ``originalNode``, ``graphExec``.
GRAPHDATA_GRAPH_OFFSET = 0
GRAPHDATA_ORIGINAL_GRAPH_OFFSET = 8
GRAPHDATA_NODE_OFFSET = 16
GRAPHDATA_ORIGINAL_NODE_OFFSET = 24
GRAPHDATA_GRAPH_EXEC_OFFSET = 48
#: ``CUpti_NvtxData.functionParams``; ``nvtxRangePushA_params.message`` (generated_nvtx_meta.h).
NVTXDATA_PARAMS_OFFSET = 8
NVTX_PUSH_A_MESSAGE_OFFSET = 0
