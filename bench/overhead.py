"""Per-launch overhead on a GPU: bare launches, real Proton, proton_ctypes, torch.profiler.

Run on the H200 (one invocation does everything)::

    python bench/overhead.py --rounds 5 --json bench/results/overhead-h200.json

Each implementation runs in its own process (``--worker IMPL``), the processes alternate
round by round (the order rotates), and every figure is the median over rounds.  Cases:

* ``triton launch, one scope``: a tiny Triton kernel, 20 000 launches inside one scope;
* ``torch x.add_(1), one scope``;
* ``scope around every launch`` / ``state around every launch`` (Triton);
* ``context="python"`` (torch ``x.add_(1)``, as in Proton's reference figure);
* ``data="trace"`` (Triton, one scope): per launch, and its ``finalize``;
* the ``finalize`` of the tree of the first case;
* ``graph replay with device-tensor metrics``: a CUDA graph of 20 Triton kernels in 4
  scopes that each carry a device-tensor metric, captured while profiling, replayed 10 000 times
  in one scope; one op = one replay (docs/graph-metrics.md); the expected kernels are the
  graph's own (each replay adds 4 ``<metric>`` kernels on top).  ``--cases graph`` runs it alone.

``overhead_us`` = µs per op minus the µs per op of a bare loop run in the profiled process
itself just before each profiled run (the previous run's profiler already finalized): the
median of all those pairs over every round, immune to the process-to-process drift of
several µs seen on the H200.  ``overhead_cross_process_us`` (column ``x-process``) is the
older figure: median µs per op minus the bare process's median;
``ratio_to_proton``
= overhead / Proton's overhead (for finalize rows: finalize_s / Proton's finalize_s).
Every profiled run also counts the kernels in its output file, so a profiler that loses
kernels cannot look fast.

``--impls`` may add the CUPTI floors ``floor:kernels``, ``floor:per_thread`` and ``floor:ours``
(``bench/cupti_floor.py``; the per-launch cases only): what CUPTI alone charges a launch in
each configuration, beside the profilers in the same run.  Their rows are ``bare`` rows with a
``floor`` key.
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import results_file  # noqa: E402
from proton_overlay import real_proton  # noqa: E402
from overhead_cases import (BASIC_CASES, CASES, FINALIZE_CASES, GRAPH_KERNELS, GRAPH_METRICS_ENV,  # noqa: E402
                            GRAPH_SCOPES, HOOK_CASE, IMPLS)
from overhead_diagnostics import DIAGNOSTIC_IMPLS, FLOOR_IMPLS, HOOK_DIAGNOSTIC_IMPLS  # noqa: E402
from overhead_diagnostics import start as start_diagnostic  # noqa: E402
from overhead_table import print_table, summarize  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ============================================================================ worker
def tiny_kernel():
    """The cases' Triton kernel: adds 1 to ``size`` floats from ``x_ptr`` (``tiny[(1,)](x, 1024, BLOCK=1024)``)."""
    import triton
    import triton.language as tl

    @triton.jit
    def tiny(x_ptr, size, BLOCK: tl.constexpr):
        off = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = off < size
        tl.store(x_ptr + off, tl.load(x_ptr + off, mask=m) + 1, mask=m)
    return tiny


def cases_of(impl: str) -> tuple:
    """The cases (of those selected, :data:`CASES`) an implementation runs: the hook diagnostics
    only the launch-hook case, ``torch.profiler`` and the other diagnostics the basic ones."""
    if impl in HOOK_DIAGNOSTIC_IMPLS:
        return tuple(c for c in (HOOK_CASE,) if c in CASES)
    if impl == "torch.profiler" or impl in DIAGNOSTIC_IMPLS:
        return tuple(c for c in BASIC_CASES if c in CASES)
    return tuple(CASES)


def worker(impl: str, n: int, warm: int, reps: int) -> dict:
    """Run every case ``reps`` times under ``impl`` in this process; return ``{case: {...}}`` (medians)."""
    sel = os.environ.get("PROTON_CTYPES_BENCH_CASES")
    if sel:
        for c in list(CASES):
            if not any(k.strip() and k.strip() in c for k in sel.split(",")):
                del CASES[c]
    import torch
    import triton

    tiny = tiny_kernel()
    x = torch.zeros(1024, device="cuda")

    def meta(grid, metadata, args):
        return {"name": "tiny_meta", "flops32": 1024.0, "bytes": 8192}

    tiny_meta = triton.jit(launch_metadata=meta)(tiny.fn)

    def launch_triton():
        tiny[(1,)](x, 1024, BLOCK=1024)

    def launch_triton_meta():
        tiny_meta[(1,)](x, 1024, BLOCK=1024)
    launch_triton.meta = launch_triton_meta

    def launch_torch():
        x.add_(1)

    for fn in (launch_triton, launch_torch, launch_triton_meta):
        for _ in range(200):
            fn()
    torch.cuda.synchronize()

    proton = None
    delivered = [0]
    if impl == "proton":
        proton = real_proton()   # the installed Proton, or a newer one's (proton_overlay)
    elif impl == "proton_ctypes":
        sys.path.insert(0, ROOT)
        os.environ.setdefault(GRAPH_METRICS_ENV, "1")   # metrics captured with graphs (off by default)
        import proton_ctypes as proton
    elif impl in DIAGNOSTIC_IMPLS:
        sys.path.insert(0, ROOT)
    tmp = tempfile.mkdtemp()
    cases = cases_of(impl)
    runs = {case: [] for case in cases}
    for rep in range(reps):
        order = cases[rep % len(cases):] + cases[:rep % len(cases)]
        for case in order:
            runs[case].append(_one_case(impl, case, n, warm, proton, delivered, tmp, torch,
                                        launch_triton, launch_torch, len(runs[case])))
    results = {}
    for case, outs in runs.items():
        us = [o["us"] for o in outs if o["us"] is not None]
        merged = {"us": statistics.median(us) if us else None, "us_reps": [round(u, 3) for u in us]}
        pairs = [o["us"] - o["bare_us"] for o in outs if o["us"] is not None and o.get("bare_us") is not None]
        if pairs:
            merged["self_pairs_us"] = [round(x, 3) for x in pairs]
            merged["self_overhead_us"] = statistics.median(pairs)
        for key in ("finalize_s",):
            if outs[0].get(key) is not None:
                merged[key] = statistics.median(o[key] for o in outs)
        for key in ("kernels", "expected_kernels", "stats"):
            if key in outs[-1]:
                merged[key] = outs[-1][key]
        results[case] = merged
    return results


def _launcher(spec, launch_triton, launch_torch):
    if spec["kernel"] == "graph":
        return bare_graph(launch_triton).replay
    return {"triton": launch_triton, "torch": launch_torch,
            "triton_meta": getattr(launch_triton, "meta", launch_triton)}[spec["kernel"]]


def capture_graph(launch_triton, proton=None):
    """The graph case's CUDA graph: GRAPH_KERNELS launches in GRAPH_SCOPES scopes, each scope
    with a device-tensor metric when ``proton`` is given (captured while it profiles)."""
    import torch
    values = [torch.full((), float(j + 1), device="cuda") for j in range(GRAPH_SCOPES)]
    per = GRAPH_KERNELS // GRAPH_SCOPES
    for _ in range(3):
        launch_triton()   # compiled and warm before the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for j in range(GRAPH_SCOPES):
            if proton is None:
                for _ in range(per):
                    launch_triton()
            else:
                with proton.scope(f"m{j}", {"value": values[j]}):
                    for _ in range(per):
                        launch_triton()
    graph.keep = values
    return graph


@functools.lru_cache(maxsize=None)
def bare_graph(launch_triton):
    """The graph case's CUDA graph without metrics, captured once per launcher."""
    return capture_graph(launch_triton)


def _bare_loop(spec, n, warm, torch, launch_triton, launch_torch) -> float:
    """µs per op of the case's kernel launched ``n`` times with no profiler code around it."""
    launch = _launcher(spec, launch_triton, launch_torch)
    n, warm = spec.get("n", n), spec.get("warm", warm)
    for _ in range(warm):
        launch()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        launch()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / n * 1e6


def _one_case(impl, case, n, warm, proton, delivered, tmp, torch, launch_triton, launch_torch, rep):
    """One timed loop of ``case`` under ``impl``: µs per op, finalize seconds, kernels recorded."""
    spec = CASES[case]
    launch = _launcher(spec, launch_triton, launch_torch)
    graph_case = spec["kernel"] == "graph"
    n, warm = spec.get("n", n), spec.get("warm", warm)
    per = spec.get("per_launch")
    metric = torch.ones((), device="cuda") if per == "tensor_metric" else None
    if spec.get("exclude") and proton is not None:
        hook_cls = proton.hooks.LaunchHook
        if not hasattr(hook_cls, "configure"):
            return {"us": None, "skipped": "LaunchHook.configure does not exist in this triton"}
        hook_cls().configure(exclude=spec["exclude"])

    def loop(count):
        if proton is None or per is None:
            for _ in range(count):
                launch()
        elif per == "scope":
            scope = proton.scope
            for _ in range(count):
                with scope("s"):
                    launch()
        elif per == "tensor_metric":
            scope = proton.scope
            for _ in range(count):
                with scope("s", {"loss": metric}):
                    launch()
        else:
            state = proton.state
            for _ in range(count):
                with state("s"):
                    launch()
        torch.cuda.synchronize()

    out = {}
    backend = None
    if impl != "bare":
        # this process's own bare loop, just before the profiler starts (the previous run's
        # profiler was finalized): the reference for ``overhead_us``
        out["bare_us"] = _bare_loop(spec, n, warm, torch, launch_triton, launch_torch)
    if impl in DIAGNOSTIC_IMPLS:
        backend = start_diagnostic(impl, delivered)
    if impl == "bare" or impl in DIAGNOSTIC_IMPLS:
        before = delivered[0]
        loop(warm)
        t0 = time.perf_counter()
        loop(n)
        out["us"] = (time.perf_counter() - t0) / n * 1e6
        if backend is not None:
            t0 = time.perf_counter()
            backend.stop()
            out["finalize_s"] = time.perf_counter() - t0
            if impl not in ("cupti_subscribe_only", "hook_empty", "hook_metadata") + FLOOR_IMPLS:
                out["kernels"], out["expected_kernels"] = delivered[0] - before, n + warm
    elif impl == "torch.profiler":
        prof = torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                                  torch.profiler.ProfilerActivity.CUDA])
        prof.__enter__()
        loop(warm)
        t0 = time.perf_counter()
        loop(n)
        out["us"] = (time.perf_counter() - t0) / n * 1e6
        t0 = time.perf_counter()
        prof.__exit__(None, None, None)
        out["finalize_s"] = time.perf_counter() - t0
    else:
        name = os.path.join(tmp, f"{impl}_{list(CASES).index(case)}_{rep}")
        proton.start(name, **spec.get("start", {}))
        if graph_case:   # captured while profiling, so the metric kernels are in the graph
            try:
                launch = capture_graph(launch_triton, proton).replay
            except Exception as e:  # a profiler whose metrics cannot be captured (no tensor metrics)
                proton.finalize()
                return {"us": None, "skipped": f"capture failed: {type(e).__name__}: {e}"[:200]}
        with proton.scope("run"):
            loop(warm)
            t0 = time.perf_counter()
            loop(n)
            out["us"] = (time.perf_counter() - t0) / n * 1e6
        t0 = time.perf_counter()
        proton.finalize()
        out["finalize_s"] = time.perf_counter() - t0
        out["kernels"] = _count_kernels(name, spec.get("start", {}).get("data", "tree"))
        out["expected_kernels"] = (n + warm) * (GRAPH_KERNELS if graph_case else 1)
        if spec.get("exclude"):
            proton.hooks.LaunchHook().configure()
        if impl == "proton_ctypes":
            from proton_ctypes.backends import select
            cupti = select._instances.get("cupti")
            if cupti is not None:
                out["stats"] = {k: v for k, v in cupti.stats.items() if isinstance(v, (int, float, str))}
    return out


def _count_kernels(name: str, data: str) -> int:
    """Kernels recorded in the output file (tree: sum of kernel counts; trace: kernel events)."""
    if data == "trace":
        with open(name + ".chrome_trace") as f:
            return sum(1 for e in json.load(f)["traceEvents"] if e.get("cat") == "kernel")
    with open(name + ".hatchet") as f:
        root = json.load(f)[0]
    total, stack = 0, [root]
    while stack:
        node = stack.pop()
        if "device_id" in node.get("metrics", {}):
            total += int(node["metrics"].get("count", 0))
        stack.extend(node.get("children", []))
    return total


# ============================================================================ parent
def run_rounds(impls, rounds, n, warm, reps, log, after_round=None):
    """Spawn one worker per (round, impl), rotating the order; return ``{impl: [results...]}``.

    ``after_round(collected)`` is called after every round (partial results survive a timeout)."""
    collected = {impl: [] for impl in impls}
    for r in range(rounds):
        order = list(impls[r % len(impls):]) + list(impls[:r % len(impls)])
        for impl in order:
            cmd = [sys.executable, os.path.abspath(__file__), "--worker", impl, "--n", str(n), "--warm", str(warm),
                   "--reps", str(reps)]
            t0 = time.time()
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
            line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
            if proc.returncode != 0 or not line:
                log(f"round {r} {impl}: FAILED rc={proc.returncode}\n{proc.stderr[-3000:]}")
                continue
            collected[impl].append(json.loads(line[-1][len("RESULT "):]))
            log(f"round {r} {impl}: {time.time() - t0:.1f} s")
        if after_round is not None:
            after_round(collected)
    return collected


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worker", choices=IMPLS + DIAGNOSTIC_IMPLS)
    ap.add_argument("--n", type=int, default=20000, help="launches per timed loop")
    ap.add_argument("--warm", type=int, default=500, help="launches before timing, in the same session")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=2, help="timed loops per case inside each worker (median)")
    ap.add_argument("--impls", default=",".join(IMPLS))
    ap.add_argument("--json", default=None, help="write the results here")
    ap.add_argument("--cases", default=None, help="comma-separated substrings: run only matching cases")
    a = ap.parse_args()
    if a.cases:
        keep = [c for c in CASES if any(k.strip() and k.strip() in c for k in a.cases.split(","))]
        for c in list(CASES):
            if c not in keep:
                del CASES[c]
        for fc, src in list(FINALIZE_CASES.items()):
            if src not in CASES:
                del FINALIZE_CASES[fc]
        os.environ["PROTON_CTYPES_BENCH_CASES"] = a.cases
    if a.worker:
        print("RESULT " + json.dumps(worker(a.worker, a.n, a.warm, a.reps)), flush=True)
        return
    # an implementation none of the selected cases applies to is not started (--cases graph: no
    # torch.profiler, which cannot take metrics inside a CUDA graph)
    impls = tuple(i for i in a.impls.split(",") if i and cases_of(i))

    def log(msg):
        print(msg, file=sys.stderr, flush=True)
    def save(collected):
        if not a.json:
            return
        results_file.write(a.json, summarize(collected), n=a.n, warm=a.warm,
                           rounds=len(next(iter(collected.values()), [])), reps=a.reps,
                           proton_ctypes_stats=[r.get(c, {}).get("stats") for r in collected.get("proton_ctypes", [])
                                                for c in list(CASES)[:1]])

    collected = run_rounds(impls, a.rounds, a.n, a.warm, a.reps, log, after_round=save)
    print_table(summarize(collected))


if __name__ == "__main__":
    main()
