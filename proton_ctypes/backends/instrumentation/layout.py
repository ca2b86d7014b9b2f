"""The profile buffer an instrumented kernel writes: its layout, and writers of it.

Layout (written by Triton's proton lowering; identical in triton 3.6 and 3.9), one record of
``profile_scratch_size`` bytes per CTA, CTAs in launch order; all fields little-endian::

    +0   u32  preamble 0xdeadbeef                        PREAMBLE_OFFSET
    +4   u32  block id (linear CTA index)                BLOCK_ID_OFFSET
    +8   u32  processor (SM) id                          PROC_ID_OFFSET
    +12  u32  buffer size in bytes (the event area)      BUFFER_SIZE_OFFSET
    +16  u64  init time (globaltimer at kernel start)    INIT_TIME_OFFSET
    +24  u64  pre-final time (before the copy-out)       PRE_FINAL_TIME_OFFSET
    +32  u64  post-final time                            POST_FINAL_TIME_OFFSET
    +40  u32 x num_warps   words written by each warp    HEADER_BYTES (its circular index)
    +40+4*num_warps        event area: one segment of size/len(uids) bytes per recorded
                           warp, each a sequence of ENTRY_BYTES-byte entries

An entry is two u32 words, ``tag, clock_lo``: bit 31 of the tag is *end* (``END_BIT``), bits
23..30 the scope id (``SCOPE_SHIFT``, ``SCOPE_MASK``), bit 22 *async* (``ASYNC_BIT``;
``proton.language`` events, triton >= 3.7), bits 0..10 the upper bits of a 43-bit clock
(``CLOCK_HI_MASK``; zero with ``clock32``).

:func:`build_buffer` produces this layout from a description of each CTA's events, so the
decoder (:mod:`.decode`) can be exercised without a GPU.  :func:`host_buffer_bytes` is the
binary trace 3.9's ``InstrumentationHook`` exposes as ``host_buffer`` when
``enable_host_buffer`` is set (a header for external parsers, then the raw buffer).
"""
from __future__ import annotations

import struct
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from .modes import enum_name

# ---- the CTA record (module docstring)
PREAMBLE = 0xDEADBEEF
PREAMBLE_OFFSET = 0
BLOCK_ID_OFFSET = 4
PROC_ID_OFFSET = 8
BUFFER_SIZE_OFFSET = 12
INIT_TIME_OFFSET = 16
PRE_FINAL_TIME_OFFSET = 24
POST_FINAL_TIME_OFFSET = 32
#: the fixed header; the per-warp word counts follow it
HEADER_BYTES = 40
#: one word count per warp, after the header
COUNT_BYTES = 4
# ---- one entry of the event area
ENTRY_BYTES = 8
END_BIT = 0x80000000
ASYNC_BIT = 1 << 22
SCOPE_SHIFT = 23
SCOPE_MASK = 0xFF
CLOCK_HI_MASK = 0x7FF

VERSION = 1
#: 3.9's host-buffer header: ten u32 (version, header offset, header size, payload offset,
#: payload size, device type, blocks, warps, scratch size, uid count), then the uids
DEVICE_TYPE_CODES = {"cuda": 1, "hip": 2}
U32_BYTES = 4
HOST_HEADER_BYTES = 10 * U32_BYTES
#: the header starts right after the version word
HOST_HEADER_OFFSET = U32_BYTES
#: Triton aligns each CTA's profile scratch to this many bytes
SCRATCH_ALIGNMENT = 128

#: one entry: (is_end, scope_id, cycle) or (is_end, scope_id, cycle, is_async)
Entry = Tuple


def encode_entry(is_end: bool, scope: int, cycle: int, is_async: bool = False, clock32: bool = False):
    """The two 32-bit words of one record."""
    tag = (END_BIT if is_end else 0) | ((scope & SCOPE_MASK) << SCOPE_SHIFT) | (ASYNC_BIT if is_async else 0)
    if not clock32:
        tag |= (cycle >> 32) & CLOCK_HI_MASK
    return tag, cycle & 0xFFFFFFFF


def build_block(block_id: int, proc_id: int, num_warps: int, buf_size: int,
                warps: Dict[int, Sequence[Entry]], times=(1000, 1500, 1600), uids: Optional[Sequence[int]] = None,
                counts: Optional[Sequence[int]] = None, scratch: Optional[int] = None, preamble: int = PREAMBLE,
                circular: bool = True) -> bytes:
    """One CTA record.  ``warps`` maps a warp id to its entries in write order.

    With ``circular`` (the device's behaviour) a warp writing more entries than its
    segment holds wraps around; ``counts`` overrides the written word counts.
    """
    uids = list(range(num_warps)) if uids is None else list(uids)
    seg = buf_size // len(uids)
    cap = seg // ENTRY_BYTES
    words = {u: [] for u in uids}
    for u, ents in warps.items():
        for e in ents:
            words[u].extend(encode_entry(e[0], e[1], e[2], bool(e[3]) if len(e) > 3 else False))
    cnt = [0] * num_warps
    for u in uids:
        cnt[u] = len(words.get(u, []))
    if counts is not None:
        cnt = list(counts)
    head = struct.pack("<IIII", preamble, block_id, proc_id, buf_size) + struct.pack("<QQQ", *times)
    head += struct.pack(f"<{num_warps}I", *cnt)
    payload = bytearray()
    for u in uids:
        w = words.get(u, [])
        segw = [0] * (cap * 2)
        for i in range(0, len(w), 2):
            slot = (i // 2) % cap if (circular and cap) else i // 2
            if slot < cap:
                segw[2 * slot], segw[2 * slot + 1] = w[i], w[i + 1]
        chunk = struct.pack(f"<{len(segw)}I", *segw)
        payload += chunk.ljust(seg, b"\0")[:seg]
    rec = head + bytes(payload)
    if scratch is not None:
        rec = rec.ljust(scratch, b"\0")
    return rec


def build_buffer(blocks: Iterable[bytes], scratch: int) -> np.ndarray:
    """Concatenate CTA records, each padded to ``scratch`` bytes, as a uint8 array."""
    out = b"".join(b.ljust(scratch, b"\0")[:scratch] for b in blocks)
    return np.frombuffer(bytearray(out), dtype=np.uint8)


def scratch_size(num_warps: int, buf_size: int, align: int = SCRATCH_ALIGNMENT) -> int:
    """The ``profile_scratch_size`` Triton reserves: header, counts (a u32 per warp) and events, aligned."""
    need = HEADER_BYTES + COUNT_BYTES * num_warps + buf_size
    return (need + align - 1) // align * align


def host_buffer_bytes(info, raw, mode_obj) -> bytes:
    """3.9's ``InstrumentationHook.host_buffer``: header fields, uid list, raw buffer."""
    raw = np.asarray(raw, dtype=np.uint8).reshape(-1)
    target = info.target or {}
    backend = target.get("backend") if isinstance(target, dict) else None
    device_type = DEVICE_TYPE_CODES.get(backend, 0)
    scratch = info.scratch
    total = info.num_warps
    sampled = mode_obj.sampling_options.strip().split(",")
    uid_num = total if enum_name(mode_obj.sampling_strategy) == "NONE" else len(sampled)
    alloc = len(raw)
    block_num = alloc // scratch if scratch else 0
    if mode_obj.sampling_options == "" and enum_name(mode_obj.granularity) == "WARP":
        uid_vec: List[int] = list(range(total))
    else:
        uid_vec = [int(i) for i in sampled]
    header_size = HOST_HEADER_BYTES + uid_num * U32_BYTES
    values = [VERSION, HOST_HEADER_OFFSET, header_size, header_size, alloc, device_type, block_num, total, scratch, uid_num, *uid_vec]
    return struct.pack("I" * len(values), *values) + raw.tobytes()
