"""A real CUPTI 13.0 kernel record from the H200 (gpu-probe run 1) decodes with the backend's dtype."""
import os

import numpy as np

from proton_ctypes.backends.nvidia import layout as L
from proton_ctypes.backends.nvidia.parse import BufferParser

RECORD = os.path.join(os.path.dirname(__file__), "data", "cupti13_kernel_record0.bin")


def test_h200_kernel_record_decodes():
    raw = open(RECORD, "rb").read()
    assert len(raw) == L.expected_kernel_stride(130001) == 216
    rec = np.frombuffer(raw, L.kernel_dtype(216), count=1)[0]
    assert rec["kind"] == L.KIND_CONCURRENT_KERNEL
    assert rec["blockX"] == 128 and rec["gridX"] == 1
    assert rec["end"] > rec["start"] and rec["end"] - rec["start"] < 10**6
    assert rec["name"] != 0 and rec["correlationId"] == 1 and rec["streamId"] == 7


def test_h200_kernel_record_goes_through_the_fast_path():
    raw = np.frombuffer(open(RECORD, "rb").read() * 3, np.uint8).copy()
    start = int(np.frombuffer(raw[16:24].tobytes(), "<u8")[0])
    parser = BufferParser(216, ts_lo=start - 10**12, ts_hi=start + 10**12)
    out = parser.parse(raw, raw.size)
    assert parser.stats["single"] == 1
    assert out[L.KIND_CONCURRENT_KERNEL]["start"].tolist() == [start] * 3
