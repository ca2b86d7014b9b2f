"""The profile-buffer decoder against hand-built and random buffers (no GPU, no libproton).

Layout and parser rules are those of :mod:`proton_ctypes.backends.instrumentation.decode`; the
random tests compare the numpy decoder with a line-by-line Python port of libproton's
``CircularLayoutParser`` (``reference_parse`` below).  The same rules are checked against
the real libproton in ``test_instrumentation_oracle.py``.
"""
import random
import struct

import numpy as np
import pytest

from proton_ctypes.backends.instrumentation.decode import DecodeError, decode
from proton_ctypes.backends.instrumentation.layout import (build_block, build_buffer, encode_entry,
                                                           host_buffer_bytes, scratch_size)

A = 1  # marks an async entry in build_block's tuples


def events(dec):
    """Sync events as (block index, uid, scope, start, end)."""
    return list(zip(dec.ev_blk.tolist(), dec.ev_uid.tolist(), dec.ev_scope.tolist(), dec.ev_start.tolist(),
                    dec.ev_end.tolist()))


def links(dec):
    """Async events as (block index, uid start, uid end, scope, start, end)."""
    return list(zip(dec.as_blk.tolist(), dec.as_uid_start.tolist(), dec.as_uid_end.tolist(), dec.as_scope.tolist(),
                    dec.as_start.tolist(), dec.as_end.tolist()))


def one(warps, num_warps=2, buf_size=256, uids=None, **kw):
    scratch = scratch_size(num_warps, buf_size)
    blk = build_block(0, 5, num_warps, buf_size, warps, uids=uids, scratch=scratch, **kw)
    return build_buffer([blk], scratch), scratch


# ----------------------------------------------------------------------------------- layout
def test_header_fields_and_nested_scopes():
    scratch = scratch_size(2, 256)
    blocks = [build_block(b, 10 + b, 2, 256, {0: [(0, 0, 100), (0, 1, 110), (1, 1, 150), (1, 0, 200)],
                                              1: [(0, 0, 105), (1, 0, 305)]}, times=(1000 + b, 1500, 1600),
                          scratch=scratch) for b in range(3)]
    dec = decode(build_buffer(blocks, scratch), scratch, 2)
    assert dec.num_blocks == 3
    assert dec.blk_id.tolist() == [0, 1, 2]
    assert dec.blk_proc.tolist() == [10, 11, 12]
    assert dec.blk_init.tolist() == [1000, 1001, 1002]
    assert dec.blk_prefinal.tolist() == [1500] * 3 and dec.blk_postfinal.tolist() == [1600] * 3
    # libproton's order: per CTA, per warp, by end entry (inner scope first)
    assert events(dec)[:3] == [(0, 0, 1, 110, 150), (0, 0, 0, 100, 200), (0, 1, 0, 105, 305)]
    assert len(events(dec)) == 9


def test_64_bit_clock_uses_the_upper_bits_of_the_tag():
    big = (5 << 32) + 7
    buf, scratch = one({0: [(0, 0, big), (1, 0, big + (1 << 32) + 3)]})
    assert events(decode(buf, scratch, 2)) == [(0, 0, 0, big, big + (1 << 32) + 3)]
    tag, lo = encode_entry(True, 3, (0x7FF << 32) | 9)
    assert tag == 0x80000000 | (3 << 23) | 0x7FF and lo == 9


def test_clock32_entries_have_no_upper_bits():
    tag, lo = encode_entry(False, 2, (3 << 32) | 11, clock32=True)
    assert tag == 2 << 23 and lo == 11


def test_selective_sampling_reads_one_segment_per_sampled_warp():
    scratch = scratch_size(4, 240)
    blk = build_block(0, 0, 4, 240, {1: [(0, 0, 10), (1, 0, 30)], 3: [(0, 0, 10), (1, 0, 50)]}, uids=[1, 3],
                      scratch=scratch)
    dec = decode(build_buffer([blk], scratch), scratch, 4, uids=[1, 3])
    assert [(u, e - s) for _b, u, _sc, s, e in events(dec)] == [(1, 20), (3, 40)]


def test_unaligned_segments_are_read_bytewise():
    # 3 sampled warps share 200 bytes: 66-byte segments, entries off 4-byte alignment
    scratch = scratch_size(3, 200)
    blk = build_block(0, 0, 3, 200, {w: [(0, 0, 10 * w), (1, 0, 10 * w + 7)] for w in range(3)}, scratch=scratch)
    dec = decode(build_buffer([blk], scratch), scratch, 3)
    assert [e - s for *_x, s, e in events(dec)] == [7, 7, 7]


def test_bad_preamble_blocks_are_skipped_but_count_in_normalisation():
    scratch = scratch_size(1, 64)
    good = build_block(0, 0, 1, 64, {0: [(0, 0, 1), (1, 0, 9)]}, scratch=scratch)
    bad = build_block(1, 0, 1, 64, {0: [(0, 0, 1), (1, 0, 9)]}, scratch=scratch, preamble=0)
    dec = decode(build_buffer([good, bad], scratch), scratch, 1)
    assert dec.num_blocks == 2 and dec.blk_id.tolist() == [0] and len(events(dec)) == 1


def test_partial_trailing_block_and_empty_buffers():
    buf, scratch = one({0: [(0, 0, 1), (1, 0, 2)]})
    assert decode(buf[: scratch - 1], scratch, 2).num_events == 0
    assert decode(np.zeros(0, np.uint8), scratch, 2).num_events == 0
    assert decode(buf, 0, 2).num_events == 0


# ----------------------------------------------------------------------------------- parser rules
def test_mismatched_entries_are_skipped_like_libproton():
    # start after start keeps the first start; end after end and an end first are dropped
    buf, scratch = one({0: [(1, 0, 5), (0, 0, 100), (0, 0, 150), (1, 0, 300), (1, 0, 400), (0, 0, 500),
                            (1, 0, 600)]})
    assert [(s, e) for *_x, s, e in events(decode(buf, scratch, 2))] == [(100, 300), (500, 600)]


def test_scopes_are_matched_independently():
    buf, scratch = one({0: [(0, 0, 10), (0, 1, 20), (1, 0, 30), (1, 1, 40)]})
    assert sorted((sc, s, e) for _b, _u, sc, s, e in events(decode(buf, scratch, 2))) == [(0, 10, 30), (1, 20, 40)]


def test_clock_overflow_is_protons_error_with_offset(capsys):
    buf, scratch = one({0: [(0, 0, 300), (1, 0, 100)]})
    with pytest.raises(DecodeError) as ei:
        decode(buf, scratch, 2)
    assert str(ei.value) == "[PROTON] Clock overflow"
    assert ei.value.offset == 40 + 4 * 2 + 16  # after the end entry
    assert isinstance(ei.value.to_exception(), RuntimeError)


def test_circular_overflow_warns_like_libproton_and_reads_the_segment():
    # 64 bytes for 2 warps: 4 entries per warp; warp 0 writes 10 entries (20 words)
    ents = [(0, 0, 100 * i) if i % 2 == 0 else (1, 0, 100 * i - 50) for i in range(10)]
    buf, scratch = one({0: ents, 1: [(0, 0, 1), (1, 0, 2)]}, buf_size=64)
    got = []
    dec = decode(buf, scratch, 2, warn=got.append)
    assert got == ["Warning (cta0, warp0): first 6 events are dropped due to insufficient buffer size (4/10)"]
    assert dec.warnings == got
    # the wrapped segment holds entries 8, 9, 6, 7 (circular): pairs (800, 850) and (600, 650)
    assert sorted((s, e) for _b, u, _sc, s, e in events(dec) if u == 0) == [(600, 650), (800, 850)]


def test_warnings_stop_at_the_parse_error():
    scratch = scratch_size(1, 32)
    many = [(0, 0, 10 * i) if i % 2 == 0 else (1, 0, 10 * i) for i in range(12)]
    b0 = build_block(0, 0, 1, 32, {0: [(0, 0, 9), (1, 0, 1)]}, scratch=scratch)   # overflow in CTA 0
    b1 = build_block(1, 0, 1, 32, {0: many}, scratch=scratch)                      # would warn
    got = []
    with pytest.raises(DecodeError):
        decode(build_buffer([b0, b1], scratch), scratch, 1, warn=got.append)
    assert got == []


# ----------------------------------------------------------------------------------- async events
def test_async_same_warp_pairs_first():
    # warp 0: end 150, start 120; warp 1: start 100, end 300 -> two same-warp events
    buf, scratch = one({0: [(1, 1, 150, A), (0, 1, 120, A)], 1: [(0, 1, 100, A), (1, 1, 300, A)]})
    assert sorted(links(decode(buf, scratch, 2))) == [(0, 0, 0, 1, 120, 150), (0, 1, 1, 1, 100, 300)]


def test_async_cross_warp_takes_the_oldest_open_start():
    buf, scratch = one({0: [(0, 1, 120, A)], 1: [(0, 1, 100, A)], 2: [(1, 1, 200, A)], 3: [(1, 1, 210, A)]},
                       num_warps=4)
    assert links(decode(buf, scratch, 4)) == [(0, 1, 2, 1, 100, 200), (0, 0, 3, 1, 120, 210)]


def test_async_one_open_start_per_warp_and_clock_order():
    # two starts in one warp: the second is dropped; the first end pairs, the second end is dropped
    buf, scratch = one({0: [(0, 1, 100, A), (0, 1, 120, A), (1, 1, 150, A), (1, 1, 300, A)]})
    assert links(decode(buf, scratch, 2)) == [(0, 0, 0, 1, 100, 150)]
    # equal clocks: buffer order decides (end first: nothing pairs)
    buf, scratch = one({0: [(1, 1, 100, A)], 1: [(0, 1, 100, A)]})
    assert links(decode(buf, scratch, 2)) == []


def test_async_entries_do_not_disturb_scopes_of_the_same_id():
    buf, scratch = one({0: [(0, 1, 100), (0, 1, 110, A), (1, 1, 150), (1, 1, 170, A)]})
    dec = decode(buf, scratch, 2)
    assert events(dec) == [(0, 0, 1, 100, 150)] and links(dec) == [(0, 0, 0, 1, 110, 170)]


def test_attribution_order_puts_a_ctas_async_events_after_its_scopes():
    scratch = scratch_size(1, 64)
    b0 = build_block(0, 0, 1, 64, {0: [(0, 2, 1, A), (1, 2, 5, A)]}, scratch=scratch)
    b1 = build_block(1, 0, 1, 64, {0: [(0, 0, 1), (1, 0, 5)]}, scratch=scratch)
    scope, start, end, blk = decode(build_buffer([b0, b1], scratch), scratch, 1).attribution_order()
    assert scope.tolist() == [2, 0] and blk.tolist() == [0, 1]


# ----------------------------------------------------------------------------------- against a reference
def reference_parse(buf: bytes, scratch: int, total: int, uids):
    """libproton 3.9's CircularLayoutParser, entry by entry (sync events; errors as DecodeError)."""
    evs = []
    nb = len(buf) // scratch
    for b in range(nb):
        p = b * scratch
        pre, bid, proc, size = struct.unpack_from("<IIIi", buf, p)
        if pre != 0xDEADBEEF:
            continue
        counts = struct.unpack_from(f"<{total}I", buf, p + 40)
        seg = size // len(uids)
        base = p + 40 + 4 * total
        for si, uid in enumerate(uids):
            n = min(counts[uid] * 4, seg) // 8
            state, first = {}, {}
            for k in range(n):
                q = base + si * seg + 8 * k
                tag, lo = struct.unpack_from("<II", buf, q)
                if tag & (1 << 22):
                    continue
                sc = (tag >> 23) & 0xFF
                cyc = ((tag & 0x7FF) << 32) | lo
                prev = state.get(sc, "init")
                if not tag & 0x80000000:
                    if prev in ("init", "end"):
                        first[sc], state[sc] = cyc, "start"
                elif prev == "start":
                    state[sc] = "end"
                    if first[sc] > cyc:
                        raise DecodeError("[PROTON] Clock overflow", q + 8)
                    evs.append((uid, sc, first[sc], cyc))
    return evs


@pytest.mark.parametrize("seed", range(40))
def test_random_buffers_match_the_reference_parser(seed):
    rng = random.Random(seed)
    num_warps = rng.choice([1, 2, 3, 4, 8])
    uids = sorted(rng.sample(range(num_warps), rng.randint(1, num_warps))) if rng.random() < 0.3 \
        else list(range(num_warps))
    buf_size = rng.choice([64, 96, 200, 256, 1024])
    scratch = scratch_size(num_warps, buf_size)
    blocks = []
    for b in range(rng.randint(1, 5)):
        warps = {}
        for u in uids:
            ents, c = [], rng.randint(0, 1 << 42)
            for _ in range(rng.randint(0, 40)):
                ents.append((rng.randint(0, 1), rng.randint(0, 5), c) + ((A,) if rng.random() < 0.05 else ()))
                c += rng.randint(0, 100) if rng.random() < 0.97 else -rng.randint(1, 50)
                c = max(c, 0)
            warps[u] = ents
        blocks.append(build_block(b, b, num_warps, buf_size, warps, uids=uids, scratch=scratch,
                                  preamble=0 if rng.random() < 0.05 else 0xDEADBEEF))
    buf = build_buffer(blocks, scratch)
    try:
        ref = reference_parse(buf.tobytes(), scratch, num_warps, uids)
    except DecodeError as e:
        with pytest.raises(DecodeError) as ei:
            decode(buf, scratch, num_warps, uids, warn=lambda m: None)
        assert ei.value.offset == e.offset
        return
    dec = decode(buf, scratch, num_warps, uids, warn=lambda m: None)
    assert [(u, sc, s, e) for _b, u, sc, s, e in events(dec)] == ref


# ----------------------------------------------------------------------------------- host buffer
def test_host_buffer_header_matches_protons_layout():
    from proton_ctypes.backends.instrumentation.metadata import make_info
    from proton_ctypes.backends.instrumentation.modes import interpret_mode
    info = make_info("k", 4, 256, [], [], target={"backend": "cuda", "arch": 90, "warp_size": 32})
    raw = np.arange(512, dtype=np.uint8)
    out = host_buffer_bytes(info, raw, interpret_mode(None))
    vals = struct.unpack_from("<14I", out, 0)
    assert vals == (1, 4, 56, 56, 512, 1, 2, 4, 256, 4, 0, 1, 2, 3)
    assert out[56:] == raw.tobytes()
    sel = host_buffer_bytes(info, raw, interpret_mode("default:sampling_strategy=selective:sampling_options=1,3"))
    assert struct.unpack_from("<12I", sel, 0)[9:] == (2, 1, 3)
