"""Diagnostic (not a test): where ``finalize`` of a tree session spends its time on a GPU.

Run on a GPU: ``python tests/gpu/profile_finalize.py``; 10 500 tiny Triton launches under one
scope, then ``finalize``, three times; prints the wall time of each finalize and the CUPTI
backend's cumulative phase timings (``time_*``: collector stop, device sync, CUPTI disable +
unsubscribe, forced flush, parse, join, sink), and a cProfile of the last finalize.
"""
import cProfile
import os
import pstats
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

import proton_ctypes as proton  # noqa: E402
from proton_ctypes.backends import select  # noqa: E402


@triton.jit
def tiny(x_ptr, size, BLOCK: tl.constexpr):
    off = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = off < size
    tl.store(x_ptr + off, tl.load(x_ptr + off, mask=m) + 1, mask=m)


x = torch.zeros(1024, device="cuda")
for _ in range(200):
    tiny[(1,)](x, 1024, BLOCK=1024)
torch.cuda.synchronize()
tmp = tempfile.mkdtemp()
for i in range(3):
    proton.start(os.path.join(tmp, f"f{i}"))
    with proton.scope("run"):
        for _ in range(10500):
            tiny[(1,)](x, 1024, BLOCK=1024)
    torch.cuda.synchronize()
    pr = cProfile.Profile() if i == 2 else None
    t0 = time.perf_counter()
    if pr:
        pr.enable()
    proton.finalize()
    if pr:
        pr.disable()
    print(f"finalize {i}: {time.perf_counter() - t0:.4f} s")
stats = select._instances["cupti"].stats
print({k: v for k, v in stats.items() if k.startswith("time_")})
pstats.Stats(pr).sort_stats("cumtime").print_stats(22)
