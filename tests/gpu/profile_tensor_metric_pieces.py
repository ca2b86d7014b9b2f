"""Diagnostic (not a test): host cost of each piece of a device-tensor metric, no other launches.

Run on a GPU: ``python tests/gpu/profile_tensor_metric_pieces.py``; µs per call, median of 3.
"""
import importlib
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import torch  # noqa: E402

import proton_ctypes as proton  # noqa: E402
from proton_ctypes.core import general_path  # noqa: E402
from proton_ctypes.core import tensor_metrics as tmod  # noqa: E402
from proton_ctypes.core.threads import thread_ctx  # noqa: E402
from proton_ctypes.metric import transform_tensor_metrics  # noqa: E402

S = importlib.import_module("proton_ctypes.scope")
loss = torch.ones((), device="cuda")
N = 20000


def timed(fn, n=N):
    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / n * 1e6


proton.start("/tmp/tm_pieces")
with proton.scope("warm", {"loss": loss}):
    pass
ctx = thread_ctx()
real_launch = tmod._launch
stream = tmod._raw_stream(loss.device)
_, tens = transform_tensor_metrics({"loss": loss})
direct = [d for d in tmod._launchers.values() if d]


def no_launch(fn):
    def run():
        tmod._launch = lambda *a: None
        try:
            fn()
        finally:
            tmod._launch = real_launch
    return run


def scope_host():
    with proton.scope("s", {"loss": 1.0}):
        pass


def scope_tensor():
    with proton.scope("s", {"loss": loss}):
        pass


with proton.scope("t"):
    targets = ctx.view and ((ctx.view, ctx.view.top),)
    pieces = {
        "empty call": lambda: None,
        "loss.device": lambda: loss.device,
        "transform_tensor_metrics": lambda: transform_tensor_metrics({"loss": loss}),
        "_raw_stream": lambda: tmod._raw_stream(loss.device),
        "_capturing (cuStreamIsCapturing)": lambda: tmod._capturing(stream),
        "torch.cuda.is_current_stream_capturing": torch.cuda.is_current_stream_capturing,
        "set_state pair": lambda: (general_path.set_state(ctx, "__proton_launch_metadata"),
                                   general_path.clear_state_after_metrics(ctx)),
        "add_tensor_metrics, no launch": no_launch(lambda: tmod.add_tensor_metrics(ctx, 1, targets, tens)),
        "_add_scope_metrics, no launch": no_launch(lambda: S._add_scope_metrics(ctx, 1, targets, {"loss": loss})),
        "scope, host metric": scope_host,
        "scope, tensor metric, no launch": no_launch(scope_tensor),
        "scope, tensor metric": scope_tensor,
    }
    if direct:
        pieces["direct metric-kernel launch"] = lambda: direct[0].launch(stream, 1, loss.data_ptr(), 1)
    res = {}
    for _ in range(3):
        for name, fn in pieces.items():
            res.setdefault(name, []).append(timed(fn))
proton.finalize()
for name, v in res.items():
    print(f"{name:45s} {statistics.median(v):8.2f}  {[round(u, 2) for u in v]}")
