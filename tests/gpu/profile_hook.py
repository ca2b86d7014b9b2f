"""Diagnostic (not a test): where a hook="triton" launch spends its time under proton_ctypes.

Run on a GPU: ``python tests/gpu/profile_hook.py``; prints µs per launch with and without
the hook and the top functions of a cProfile of the hooked loop.
"""
import cProfile
import os
import pstats
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

import proton_ctypes as proton  # noqa: E402


@triton.jit
def tiny(x_ptr, size, BLOCK: tl.constexpr):
    off = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = off < size
    tl.store(x_ptr + off, tl.load(x_ptr + off, mask=m) + 1, mask=m)


def meta(grid, metadata, args):
    return {"name": "tiny_meta", "flops32": 1024.0, "bytes": 8192}


tiny_meta = triton.jit(launch_metadata=meta)(tiny.fn)
x = torch.zeros(1024, device="cuda")


def loop(n):
    t = time.perf_counter()
    for _ in range(n):
        tiny_meta[(1,)](x, 1024, BLOCK=1024)
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / n * 1e6


def _knob_hook(fn):
    """Install ``fn`` as Triton's launch_enter_hook (3.6: plain attribute; later: chain)."""
    rt = triton.knobs.runtime
    chain = rt.launch_enter_hook
    if hasattr(chain, "add"):
        chain.add(fn)
        return lambda: chain.remove(fn)
    rt.launch_enter_hook = fn
    return lambda: setattr(rt, "launch_enter_hook", None)


loop(200)
print("bare us/launch", [round(loop(5000), 2) for _ in range(3)])
# Triton's own share of a hooked launch: an empty hook, then one that only evaluates the metadata
undo = _knob_hook(lambda md: None)
loop(200)
print("triton empty hook, us/launch", [round(loop(5000), 2) for _ in range(3)])
undo()
undo = _knob_hook(lambda md: md.get())
loop(200)
print("triton hook evaluating metadata only, us/launch", [round(loop(5000), 2) for _ in range(3)])
undo()
# ours without CUPTI: the Python cost of the hook alone
proton.start("/tmp/hookhost", hook="triton", backend="host")
loop(200)
print("hooked, host backend (no CUPTI) us/launch", [round(loop(5000), 2) for _ in range(3)])
proton.finalize()
print("bare again us/launch", [round(loop(5000), 2) for _ in range(3)])
proton.start("/tmp/hookprof", hook="triton")
loop(200)
print("hooked us/launch", [round(loop(5000), 2) for _ in range(3)])
pr = cProfile.Profile()
pr.enable()
loop(3000)
pr.disable()
proton.finalize()
pstats.Stats(pr).sort_stats("tottime").print_stats(18)
t = torch.ones((), device="cuda")
proton.start("/tmp/tmprof")
with proton.scope("warm", {"loss": t}):
    pass
torch.cuda.synchronize()
pr = cProfile.Profile()
pr.enable()
t0 = time.perf_counter()
for _ in range(2000):
    with proton.scope("s", {"loss": t}):
        pass
torch.cuda.synchronize()
el = (time.perf_counter() - t0) / 2000 * 1e6
pr.disable()
proton.finalize()
print("tensor-metric scope us", round(el, 2))
pstats.Stats(pr).sort_stats("tottime").print_stats(14)
