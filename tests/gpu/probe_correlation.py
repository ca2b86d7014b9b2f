"""Probe (GPU): which correlation id a kernel record carries, and whose buffer holds it.

Two designs depend on it, and both are cheaper than what runs now:

* graph replays: the backend switches on the graph-launch callbacks of both the runtime
  (``cudaGraphLaunch``) and the driver (``cuGraphLaunch``): four callbacks into Python per
  torch replay (ENTER and EXIT of each).  If the replayed kernels carry the *driver* call's
  correlation id (as Proton, which subscribes the driver domain only, relies on), the runtime
  pair is not needed;
* ``context="python"``: the launch callback is on the driver's launch ids; a torch kernel
  (``cudaLaunchKernel`` -> ``cuLaunchKernel``) whose record carries the driver call's id is
  matched by correlation id (``py_by_corr``), else by thread and time, which needs CUPTI's
  latency timestamps (about a microsecond per launch).

The probe runs proton_ctypes's CUPTI backend (no engine, a sink that keeps the batches) with
``context="python"`` over torch launches, Triton launches and torch CUDA-graph replays on the
main thread and on a second thread, and reports:

* the joiner's counters (``py_by_corr`` / ``py_by_time``, ``api_matched`` / ``owner_matched``);
* per replay, the correlation ids of its runtime and driver graph-launch callbacks (in pairs,
  in order, per thread) and which of them the replayed kernels carry;
* per replay thread, the owner (buffer thread) of its replayed kernel records.

Run: ``python tests/gpu/probe_correlation.py`` on a GPU machine; prints one JSON document.
Not a test: CUPTI's behaviour is what it finds, whatever it is.
"""
import collections
import itertools
import json
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

#: launches per kind and replays per thread
LAUNCHES, REPLAYS = 2000, 200
#: kernels in the captured graph
GRAPH_KERNELS = 4


def main() -> dict:
    import numpy as np
    import torch
    import triton
    import triton.language as tl

    from proton_ctypes.backends import select
    from proton_ctypes.backends.cupti import CuptiBackend

    @triton.jit
    def bump(x_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)

    x = torch.zeros(1024, device="cuda")
    bump[(1,)](x, 1024, BLOCK=1024)
    x.add_(1)
    static = torch.zeros(1024, device="cuda")
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        static.add_(1)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(GRAPH_KERNELS):
            static.add_(1)
    torch.cuda.synchronize()

    batches, kernels, launches = [], [], []
    backend = CuptiBackend()
    node = itertools.count(1)
    backend.start(batches.append, select.parse_mode("cupti", ""), python_context=lambda: next(node))
    hub, joiner = backend._hub, backend.collector.joiner
    take, join = hub.take_graph_launches, joiner.join

    def keep_launches():
        got = take()
        launches.append(got.copy())
        return got

    def keep_kernels(cols, hold=False):
        if cols:
            kernels.append({k: np.asarray(cols[k]).copy() for k in ("correlationId", "owner", "graphNodeId")
                            if k in cols})
        return join(cols, hold=hold)
    hub.take_graph_launches, joiner.join = keep_launches, keep_kernels

    me = threading.get_native_id()
    for _ in range(LAUNCHES):
        x.add_(1)
    for _ in range(LAUNCHES):
        bump[(1,)](x, 1024, BLOCK=1024)
    for _ in range(REPLAYS):
        graph.replay()
    other = {}

    def replay_elsewhere():
        other["tid"] = threading.get_native_id()
        for _ in range(REPLAYS):
            graph.replay()
        torch.cuda.synchronize()
    worker = threading.Thread(target=replay_elsewhere)
    worker.start()
    worker.join()
    torch.cuda.synchronize()
    backend.stop()
    stats = dict(joiner.stats)
    entries = np.concatenate(launches) if launches else np.zeros((0, 3), np.int64)
    k = {f: np.concatenate([b[f] for b in kernels if f in b]) for f in ("correlationId", "owner", "graphNodeId")}
    return {"replays_per_thread": REPLAYS, "graph_kernels": GRAPH_KERNELS, "launches_per_kind": LAUNCHES,
            "join_stats": stats, "graph_launch_entries": _pairs(entries),
            "replayed_kernels": _replayed(k, entries, {"main": me, "other": other.get("tid")})}


def _pairs(entries) -> dict:
    """The graph-launch entries per thread, in order: the corr step from each entry to the next
    one of its thread (a runtime call and its nested driver call come one after the other)."""
    out = {}
    for tid in sorted(set(entries[:, 1].tolist())):
        corr = entries[entries[:, 1] == tid][:, 0].astype("int64")
        steps = collections.Counter((corr[1:] - corr[:-1]).tolist())
        out[str(tid)] = {"entries": int(corr.size), "corr_steps": dict(steps.most_common(6))}
    return out


def _replayed(k, entries, threads) -> dict:
    """For the replayed kernels (a graph node): how many carry an entry's corr, and whether that
    is the first (runtime) or second (driver) entry of each pair; their owners per thread."""
    import numpy as np
    graph = k["graphNodeId"] != 0
    corr, owner = k["correlationId"][graph].astype("int64"), k["owner"][graph]
    out = {"kernels": int(graph.sum())}
    by_tid = {}
    for tid in sorted(set(entries[:, 1].tolist())):
        c = entries[entries[:, 1] == tid][:, 0].astype("int64")
        by_tid[tid] = (c[0::2], c[1::2])
    first = np.concatenate([a for a, _ in by_tid.values()]) if by_tid else np.zeros(0, "int64")
    second = np.concatenate([b for _, b in by_tid.values()]) if by_tid else np.zeros(0, "int64")
    out["carry_first_of_pair"] = int(np.isin(corr, first).sum())
    out["carry_second_of_pair"] = int(np.isin(corr, second).sum())
    out["owners"] = {name: collections.Counter(owner[np.isin(corr, np.concatenate(by_tid.get(tid, ([], []))))]
                                               .tolist()).most_common(3)
                     for name, tid in threads.items() if tid is not None}
    out["thread_ids"] = threads
    return out


if __name__ == "__main__":
    print(json.dumps(main(), indent=1, default=str))
