"""Diagnostic (not a test): where a scope with a device-tensor metric spends its time.

Run on a GPU: ``python tests/gpu/profile_tensor_metric.py``.  Every line is µs per loop
iteration (one tiny Triton launch plus what the line names), median of interleaved rounds.
"""
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

import proton_ctypes as proton  # noqa: E402
from proton_ctypes.core import tensor_metrics as tmod  # noqa: E402


@triton.jit
def tiny(x_ptr, size, BLOCK: tl.constexpr):
    off = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = off < size
    tl.store(x_ptr + off, tl.load(x_ptr + off, mask=m) + 1, mask=m)


x = torch.zeros(1024, device="cuda")
loss = torch.ones((), device="cuda")
N = 3000


def timed(body):
    for _ in range(200):
        body()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(N):
        body()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / N * 1e6


def launch():
    tiny[(1,)](x, 1024, BLOCK=1024)


def scope_host():
    with proton.scope("s", {"loss": 1.0}):
        launch()


def scope_tensor():
    with proton.scope("s", {"loss": loss}):
        launch()


def torch_op():
    loss.add_(0)
    launch()


real_launch = tmod._launch


def scope_tensor_no_launch():
    tmod._launch = lambda *a: None
    try:
        with proton.scope("s", {"loss": loss}):
            launch()
    finally:
        tmod._launch = real_launch


direct = []


def direct_launch():
    d = direct[0]
    d.launch(torch._C._cuda_getCurrentRawStream(0), 1, loss.data_ptr(), 1)
    launch()


def pieces():
    tmod._capturing(torch._C._cuda_getCurrentRawStream(0))
    launch()


cases = {"bare launch": launch}
res = {}
for r in range(3):
    res.setdefault("bare launch (no session)", []).append(timed(launch))
    proton.start("/tmp/tm_diag")
    scope_tensor()
    if not direct:
        direct.extend(d for d in tmod._launchers.values() if d)
    body = {"bare launch (CUPTI on)": launch, "scope, host metric": scope_host,
            "scope, tensor metric": scope_tensor, "scope, tensor metric, metric kernel not launched":
            scope_tensor_no_launch, "torch op + launch": torch_op, "capture check + launch": pieces}
    if direct:
        body["direct metric-kernel launch + launch"] = direct_launch
    for name, fn in body.items():
        res.setdefault(name, []).append(timed(fn))
    proton.finalize()
print("direct launcher in use:", bool(direct))
for name, v in res.items():
    print(f"{name:55s} {statistics.median(v):8.2f}  {[round(u, 2) for u in v]}")
