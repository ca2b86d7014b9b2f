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
* ``graph replay with device-tensor metrics`` (issue 21): a CUDA graph of 20 Triton kernels in 4
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
"""
from __future__ import annotations

import argparse
import datetime
import functools
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from proton_overlay import command_prefix, real_proton  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IMPLS = ("bare", "proton", "proton_ctypes", "torch.profiler")
#: Diagnostic implementations (``--impls``), each with a no-op sink: the CUPTI backend alone,
#: parsing every completed buffer at once (eager) or only at flush (lazy); the same backend with
#: kernel records only (no launch-API records); and a bare ``cuptiSubscribe`` with nothing
#: enabled (what merely attaching a CUPTI subscriber costs the driver's launch path).  Each
#: is started before and stopped after every timed loop, like the profilers' sessions.
#: The hook diagnostics measure, on the launch_metadata case, what any Python launch hook pays
#: before doing its own work: Triton's hook chain with an empty hook, with a hook that only
#: evaluates the metadata, and that hook under the CUPTI backend (lazy) -- the floor of ``hook="triton"``.
HOOK_DIAGNOSTIC_IMPLS = ("hook_empty", "hook_metadata", "cupti_hook_metadata")
DIAGNOSTIC_IMPLS = ("cupti_eager", "cupti_lazy", "cupti_kernel_only", "cupti_subscribe_only") + HOOK_DIAGNOSTIC_IMPLS
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
    # issue 7: the launch-metadata hook and device-tensor metrics
    'hook="triton", launch_metadata': dict(kernel="triton_meta", start=dict(hook="triton")),
    'hook="triton", kernel excluded by name': dict(kernel="triton_meta", start=dict(hook="triton"),
                                                  exclude="tiny.*"),
    "scope with a device-tensor metric": dict(kernel="triton", per_launch="tensor_metric"),
    # issue 21: metrics captured in a CUDA graph, replayed
    GRAPH_CASE: dict(kernel="graph", n=GRAPH_REPLAYS, warm=100),
}
TORCH_PROFILER_CASES = ("triton launch, one scope", "torch x.add_(1), one scope")
BASIC_CASES = TORCH_PROFILER_CASES
FINALIZE_CASES = {"finalize of the tree": "triton launch, one scope",
                  'finalize, data="trace"': 'data="trace" (triton)'}


# ============================================================================ worker
def worker(impl: str, n: int, warm: int, reps: int) -> dict:
    """Run every case ``reps`` times under ``impl`` in this process; return ``{case: {...}}`` (medians)."""
    sel = os.environ.get("PROTON_CTYPES_BENCH_CASES")
    if sel:
        for c in list(CASES):
            if not any(k.strip() and k.strip() in c for k in sel.split(",")):
                del CASES[c]
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def tiny(x_ptr, size, BLOCK: tl.constexpr):
        off = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = off < size
        tl.store(x_ptr + off, tl.load(x_ptr + off, mask=m) + 1, mask=m)

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
    if impl in HOOK_DIAGNOSTIC_IMPLS:
        cases = tuple(c for c in (HOOK_CASE,) if c in CASES)
    elif impl == "torch.profiler" or impl in DIAGNOSTIC_IMPLS:
        cases = tuple(c for c in BASIC_CASES if c in CASES)
    else:
        cases = tuple(CASES)
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
        return _bare_graph(launch_triton).replay
    return {"triton": launch_triton, "torch": launch_torch,
            "triton_meta": getattr(launch_triton, "meta", launch_triton)}[spec["kernel"]]


def _capture(launch_triton, proton=None):
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
def _bare_graph(launch_triton):
    return _capture(launch_triton)


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


def _diagnostic_backend(impl, delivered):
    """Start the diagnostic CUPTI configuration ``impl`` (see DIAGNOSTIC_IMPLS); ``stop()`` ends it."""
    import ctypes
    from proton_ctypes.backends.nvidia import layout as L
    from proton_ctypes.backends.cupti import CuptiBackend
    from proton_ctypes.backends.nvidia.lib import CALLBACK_FUNC, load_cupti

    def sink(batch):
        delivered[0] += len(batch)
    if impl in HOOK_DIAGNOSTIC_IMPLS:
        return _diagnostic_hook(impl, delivered)
    if impl == "cupti_subscribe_only":
        lib = load_cupti()
        handle, cb = ctypes.c_void_p(), CALLBACK_FUNC(lambda *a: None)
        lib.call("cuptiSubscribe", ctypes.byref(handle), cb, None)

        class Subscribed:
            def stop(self):
                lib.call("cuptiUnsubscribe", handle)
            keep = cb
        return Subscribed()
    backend = CuptiBackend(parse_batch_buffers=1 if impl == "cupti_eager" else 10**6)
    if impl == "cupti_kernel_only":
        def kernel_only(lib):
            lib.call("cuptiActivityEnable", L.KIND_CONCURRENT_KERNEL)
            backend._enabled_kinds.append(L.KIND_CONCURRENT_KERNEL)
        backend._enable_activity = kernel_only
    backend.start(sink)
    return backend


def _diagnostic_hook(impl, delivered):
    """Install the diagnostic launch hook ``impl`` in Triton's chain (with CUPTI for cupti_*)."""
    import triton
    chain = triton.knobs.runtime.launch_enter_hook
    fn = (lambda md: None) if impl == "hook_empty" else (lambda md: md.get())
    backend = _diagnostic_backend("cupti_lazy", delivered) if impl.startswith("cupti_") else None
    chain.add(fn)

    class Hooked:
        def stop(self):
            chain.remove(fn)
            if backend is not None:
                backend.stop()
    return Hooked()


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
        backend = _diagnostic_backend(impl, delivered)
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
            if impl not in ("cupti_subscribe_only", "hook_empty", "hook_metadata"):
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
                launch = _capture(launch_triton, proton).replay
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


def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def _pooled(collected, impl, case):
    """Median of every (profiled - own bare) pair of ``impl`` in ``case`` over all rounds."""
    pairs = [x for r in collected.get(impl, []) for x in r.get(case, {}).get("self_pairs_us", [])]
    return round(statistics.median(pairs), 3) if pairs else None


def summarize(collected):
    """Rows of the results table (medians over rounds)."""
    def med(impl, case, key):
        return _median([r.get(case, {}).get(key) for r in collected.get(impl, [])])

    rows = []
    for case in CASES:
        bare = med("bare", case, "us")
        proton_over = None
        for impl in IMPLS + DIAGNOSTIC_IMPLS:
            if impl in HOOK_DIAGNOSTIC_IMPLS:
                if case != HOOK_CASE:
                    continue
            elif impl in ("torch.profiler",) + DIAGNOSTIC_IMPLS and case not in BASIC_CASES:
                continue
            us = med(impl, case, "us")
            if us is None:
                continue
            cross = None if bare is None or impl == "bare" else us - bare
            own = _pooled(collected, impl, case)
            over = own if own is not None else cross
            if impl == "proton":
                proton_over = over
            row = {"case": case, "impl": impl, "us_per_op": round(us, 3),
                   "overhead_us": None if over is None else round(over, 3), "ratio_to_proton": None,
                   "finalize_s": None,
                   "overhead_cross_process_us": None if cross is None else round(cross, 3),
                   "rounds_us": [round(r[case]["us"], 3) for r in collected[impl]
                                             if case in r and r[case]["us"] is not None],
                   "reps_us": [r[case].get("us_reps") for r in collected[impl] if case in r]}
            if impl not in ("bare", "torch.profiler"):
                row["kernels_recorded"] = [r[case].get("kernels") for r in collected[impl] if case in r]
                row["kernels_expected"] = next((r[case].get("expected_kernels") for r in collected[impl]
                                                if case in r), None)
            rows.append(row)
        for row in rows:
            if row["case"] == case and row["overhead_us"] is not None and proton_over:
                row["ratio_to_proton"] = round(row["overhead_us"] / proton_over, 3)
    for fcase, source in FINALIZE_CASES.items():
        proton_f = med("proton", source, "finalize_s")
        for impl in ("proton", "proton_ctypes", "torch.profiler") + DIAGNOSTIC_IMPLS:
            f = med(impl, source, "finalize_s")
            if f is None:
                continue
            rows.append({"case": fcase, "impl": impl, "us_per_op": None, "overhead_us": None,
                         "ratio_to_proton": round(f / proton_f, 3) if proton_f else None,
                         "finalize_s": round(f, 5)})
    return rows


def print_table(rows, out=sys.stdout):
    """The printed table: µs per op, overhead over bare, ratio to Proton, finalize seconds."""
    head = (f"{'case':30s} {'impl':20s} {'us/op':>8s} {'overhead':>9s} {'vs Proton':>9s} {'x-process':>9s} "
            f"{'finalize s':>10s}")
    print(head, file=out)
    print("-" * len(head), file=out)

    def fmt(v, spec):
        return format(v, spec) if v is not None else "-"
    for r in rows:
        print(f"{r['case'][:30]:30s} {r['impl']:20s} {fmt(r['us_per_op'], '8.2f'):>8s} "
              f"{fmt(r['overhead_us'], '+9.2f'):>9s} {fmt(r['ratio_to_proton'], '9.2f'):>9s} "
              f"{fmt(r.get('overhead_cross_process_us'), '+9.2f'):>9s} "
              f"{fmt(r['finalize_s'], '10.4f'):>10s}", file=out)


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
    impls = tuple(i for i in a.impls.split(",") if i)

    def log(msg):
        print(msg, file=sys.stderr, flush=True)
    def save(collected):
        if not a.json:
            return
        rows = summarize(collected)
        doc = {"machine": _machine(), "date": datetime.datetime.now().isoformat(timespec="seconds"),
               "command": command_prefix() + "python " + " ".join(sys.argv), "n": a.n, "warm": a.warm,
               "rounds": len(next(iter(collected.values()), [])), "reps": a.reps, "rows": rows,
               "proton_ctypes_stats": [r.get(c, {}).get("stats") for r in collected.get("proton_ctypes", [])
                                       for c in list(CASES)[:1]]}
        os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=1)

    collected = run_rounds(impls, a.rounds, a.n, a.warm, a.reps, log, after_round=save)
    print_table(summarize(collected))


@functools.lru_cache(maxsize=None)
def _machine() -> str:
    gpu = "?"
    try:
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception:
        pass
    versions = {}
    for mod in ("torch", "triton", "numpy"):
        try:
            versions[mod] = __import__(mod).__version__
        except Exception:
            pass
    return f"{platform.node()} | {gpu} | Python {platform.python_version()} | " + \
        ", ".join(f"{k} {v}" for k, v in versions.items())


if __name__ == "__main__":
    main()
