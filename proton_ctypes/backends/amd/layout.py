"""Record layouts of rocprofiler-sdk and roctracer as numpy structured dtypes.

Offsets are those of the C headers on x86-64 / aarch64 Linux (LP64), checked by
``tests/test_rocprof_layout.py`` (``offsetof``/``sizeof`` probes compiled against the
headers, and sizes pinned from the header text). The CPU tests' fakes write records
with their own ``struct`` formats and never import this module, so a wrong offset here
cannot pass both sides.

rocprofiler-sdk 0.5.0 (ROCm 6.3) is the reference; later SDKs keep every prefix read
here and only append (``pipe_id`` after the kernel dispatch record, agent fields after
``logical_node_type_id``), except one ABI change handled at run time: 1.x added
``uint64_t ancestor`` to ``rocprofiler_correlation_id_t``, which shifts the HIP API
record (56 -> 64 B) and the callback tracing record (56 -> 64 B). The HIP API layout is
chosen per record from its leading ``size`` field; the callback record is decoded by
:func:`callback_record_fields`. Kernel dispatch records use
``rocprofiler_async_correlation_id_t`` (16 B) in 1.x, so they did not move.
"""
from __future__ import annotations

import numpy as np


def _dtype(fields, itemsize):
    names, formats, offsets = zip(*fields)
    return np.dtype({"names": list(names), "formats": list(formats), "offsets": list(offsets),
                     "itemsize": itemsize})


#: ``rocprofiler_record_header_t {uint32 category; uint32 kind; void* payload;}``
RECORD_HEADER = _dtype([("category", "<u4", 0), ("kind", "<u4", 4), ("payload", "<u8", 8)], 16)

#: ``rocprofiler_buffer_tracing_kernel_dispatch_record_t`` (184 B in 0.5.0; 192 B with 1.x's pipe_id)
KERNEL_DISPATCH = _dtype([
    ("size", "<u8", 0), ("kind", "<u4", 8), ("operation", "<u4", 12),
    ("corr_internal", "<u8", 16), ("corr_external", "<u8", 24),
    ("thread_id", "<u8", 32), ("start", "<u8", 40), ("end", "<u8", 48),
    # rocprofiler_kernel_dispatch_info_t at 56 (128 B)
    ("info_size", "<u8", 56), ("agent_id", "<u8", 64), ("queue_id", "<u8", 72),
    ("kernel_id", "<u8", 80), ("dispatch_id", "<u8", 88),
    ("private_segment_size", "<u4", 96), ("group_segment_size", "<u4", 100),
    ("workgroup_x", "<u4", 104), ("workgroup_y", "<u4", 108), ("workgroup_z", "<u4", 112),
    ("grid_x", "<u4", 116), ("grid_y", "<u4", 120), ("grid_z", "<u4", 124),
], 184)
KERNEL_DISPATCH_INFO_SIZE = 128

#: ``rocprofiler_buffer_tracing_hip_api_record_t`` with the 0.x correlation id (56 B)
HIP_API_V0 = _dtype([
    ("size", "<u8", 0), ("kind", "<u4", 8), ("operation", "<i4", 12),
    ("corr_internal", "<u8", 16), ("corr_external", "<u8", 24),
    ("start", "<u8", 32), ("end", "<u8", 40), ("thread_id", "<u8", 48),
], 56)

#: the same record with 1.x's ``correlation_id.ancestor`` (64 B)
HIP_API_V1 = _dtype([
    ("size", "<u8", 0), ("kind", "<u4", 8), ("operation", "<i4", 12),
    ("corr_internal", "<u8", 16), ("corr_external", "<u8", 24), ("corr_ancestor", "<u8", 32),
    ("start", "<u8", 40), ("end", "<u8", 48), ("thread_id", "<u8", 56),
], 64)

#: ``rocprofiler_callback_tracing_code_object_kernel_symbol_register_data_t`` prefix (72 B in 0.5.0)
KERNEL_SYMBOL = _dtype([
    ("size", "<u8", 0), ("kernel_id", "<u8", 8), ("code_object_id", "<u8", 16),
    ("kernel_name", "<u8", 24), ("kernel_object", "<u8", 32),
], 72)

#: ``rocprofiler_agent_v0_t`` prefix (296 B in 0.5.0; 1.x appends visibility, uuid, firmware)
AGENT_V0 = _dtype([
    ("size", "<u8", 0), ("id", "<u8", 8), ("type", "<u4", 16),
    ("simd_count", "<u4", 24), ("wave_front_size", "<u4", 64), ("num_xcc", "<u4", 68),
    ("cu_count", "<u4", 72), ("gfx_target_version", "<u4", 100),
    ("vendor_id", "<u2", 104), ("device_id", "<u2", 106), ("location_id", "<u4", 108),
    ("max_engine_clk_fcompute", "<u4", 140), ("local_mem_size", "<u8", 176), ("gpu_id", "<u8", 192),
    ("mem_banks_count", "<u4", 28), ("mem_banks", "<u8", 224),
    ("name", "<u8", 248), ("vendor_name", "<u8", 256), ("product_name", "<u8", 264),
    ("model_name", "<u8", 272), ("node_id", "<u4", 280), ("logical_node_id", "<i4", 284),
    ("logical_node_type_id", "<i4", 288),
], 296)

#: ``rocprofiler_agent_mem_bank_t`` (24 B): heap type, flags, width (bits), mem_clk_max (MHz), size
AGENT_MEM_BANK = _dtype([("heap_type", "<u4", 0), ("flags", "<u4", 4), ("width", "<u4", 8),
                         ("mem_clk_max", "<u4", 12), ("size_in_bytes", "<u8", 16)], 24)
HEAPTYPE_FRAME_BUFFER_PUBLIC, HEAPTYPE_FRAME_BUFFER_PRIVATE = 1, 2

#: ``rocprofiler_callback_tracing_record_t`` as 64-bit words, per layout:
#: 0.x: context 0, thread 8, internal 16, external 24, kind 32, operation 36, phase 40, payload 48 (56 B)
#: 1.x: context 0, thread 8, internal 16, external 24, ancestor 32, kind 40, operation 44, phase 48, payload 56
CALLBACK_RECORD_SIZES = {"v0": 56, "v1": 64}


def callback_record_fields(words, expect_kind: int, prefer_v1: bool = False):
    """Decode a callback tracing record given as eight u64 words.

    Returns ``(layout, kind, operation, phase, payload)``; the layout is the one whose
    ``kind`` equals ``expect_kind`` (the only kind the callback was registered for),
    ``prefer_v1`` breaking the tie when both could (an ``ancestor`` equal to the kind).
    """
    w = [int(x) for x in words]

    def v0():
        return "v0", w[4] & 0xFFFFFFFF, _i32(w[4] >> 32), w[5] & 0xFFFFFFFF, w[6]

    def v1():
        return "v1", w[5] & 0xFFFFFFFF, _i32(w[5] >> 32), w[6] & 0xFFFFFFFF, w[7]

    a, b = v0(), v1()
    ok_a, ok_b = a[1] == expect_kind, b[1] == expect_kind
    if ok_a and ok_b:
        return b if prefer_v1 else a
    if ok_b:
        return b
    return a


def _i32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x & 0x80000000 else x


# ------------------------------------------------------------------ roctracer (inc/ext/prof_protocol.h)
#: ``activity_record_t`` (= ``roctracer_record_t``, 64 B). Unions: at 40 either
#: ``{int device_id; uint64_t queue_id}`` (HIP_OPS) or ``{uint32 process_id; uint32 thread_id}``
#: (HIP_API); at 56 ``kernel_name`` / ``bytes``.
ROCTRACER_RECORD = _dtype([
    ("domain", "<u4", 0), ("kind", "<u4", 4), ("op", "<u4", 8),
    ("correlation_id", "<u8", 16), ("begin_ns", "<u8", 24), ("end_ns", "<u8", 32),
    ("device_id", "<i4", 40), ("thread_id", "<u4", 44), ("queue_id", "<u8", 48),
    ("kernel_name", "<u8", 56),
], 64)
ROCTRACER_DOMAIN_HIP_OPS = 2
ROCTRACER_DOMAIN_HIP_API = 3
ROCTRACER_DOMAIN_EXT_API = 5
#: ``HipVdiCommandKind`` (hip/amd_detail/hip_runtime_prof.h): kernel and task commands
ROCTRACER_KIND_KERNEL, ROCTRACER_KIND_TASK = 0x11F0, 0x11F1
#: ``hip_api_data_t``: correlation_id at 0 (u64), phase at 8 (u32; ENTER = 0)
HIP_API_DATA_CORRELATION, HIP_API_DATA_PHASE = 0, 8
