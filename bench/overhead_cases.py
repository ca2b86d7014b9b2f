"""The cases and implementations of ``bench/overhead.py`` (its docstring says what each case runs).

``CASES`` and ``FINALIZE_CASES`` are the tables ``--cases`` narrows in place (one dict each,
shared by the worker and the results table).
"""
from __future__ import annotations

IMPLS = ("bare", "proton", "proton_ctypes", "torch.profiler")
HOOK_CASE = 'hook="triton", launch_metadata'
GRAPH_CASE = "graph replay with device-tensor metrics"
#: proton_ctypes' switch for metrics captured with CUDA graphs (core/graph_metrics.py)
GRAPH_METRICS_ENV = "PROTON_CTYPES_GRAPH_METRICS"
#: the graph case: kernels, metric scopes (the kernels spread over them), replays
GRAPH_KERNELS, GRAPH_SCOPES, GRAPH_REPLAYS = 20, 4, 10_000
CASES = {
    "triton launch, one scope": dict(kernel="triton"),
    "torch x.add_(1), one scope": dict(kernel="torch"),
    "scope around every launch": dict(kernel="triton", per_launch="scope"),
    "state around every launch": dict(kernel="triton", per_launch="state"),
    'context="python" (torch)': dict(kernel="torch", start=dict(context="python")),
    'data="trace" (triton)': dict(kernel="triton", start=dict(data="trace")),
    # the launch-metadata hook and device-tensor metrics
    'hook="triton", launch_metadata': dict(kernel="triton_meta", start=dict(hook="triton")),
    'hook="triton", kernel excluded by name': dict(kernel="triton_meta", start=dict(hook="triton"),
                                                  exclude="tiny.*"),
    "scope with a device-tensor metric": dict(kernel="triton", per_launch="tensor_metric"),
    # metrics captured in a CUDA graph, replayed
    GRAPH_CASE: dict(kernel="graph", n=GRAPH_REPLAYS, warm=100),
}
TORCH_PROFILER_CASES = ("triton launch, one scope", "torch x.add_(1), one scope")
BASIC_CASES = TORCH_PROFILER_CASES
FINALIZE_CASES = {"finalize of the tree": "triton launch, one scope",
                  'finalize, data="trace"': 'data="trace" (triton)'}
