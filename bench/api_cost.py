"""What a profiler adds to each CUDA API call and each launch, measured in CPU time (GPU machine).

Run on the H200::

    python bench/api_cost.py --rounds 3 --json bench/results/api_cost-h200.json

A training step's wall time on the H200 is bimodal and GPU-bound, so a per-call cost of a
fraction of a microsecond drowns in it.  This bench measures the cost where it is paid: the
launching thread's CPU time (``time.thread_time_ns``) per operation, on four workloads --

* ``runtime call``: ``cudaGetDevice`` through ctypes (an API call that launches nothing);
* ``driver call``: ``cuCtxGetCurrent`` through ctypes;
* ``torch launch``: ``x.add_(1)`` on a one-element tensor (torch's own API calls + a launch);
* ``transformer step``: ``bench/models.py``'s training step, no scopes (main-thread CPU;
  autograd's launching thread is counted in ``other_cpu_us``).

Each implementation runs in its own process (``--worker``): it times every workload bare,
starts the profiler, times them again, and reports the difference.  Implementations: ``proton``
(``triton.profiler``), ``proton_ctypes`` (the package as users start it), ``proton_ctypes:api``
(the same with launch-API records as the launch source), and ``recipe:<name>``
-- the CUPTI backend alone with the activity kinds of one recipe of ``bench/attribution.py``,
plus ``extcorr_only`` (kernel + external-correlation records, no API kinds: does CUPTI write
an external-correlation record per launch without them?).  The order of processes rotates
round by round; the figure is the median over rounds.

``--context python`` starts ``proton`` and ``proton_ctypes`` with ``context="python"`` (a Python
walk per launch: on the launching thread, and on autograd's for the backward kernels, whose CPU
is in ``other_cpu_overhead_us``)::

    python bench/api_cost.py --impls proton,proton_ctypes --context python --json bench/results/api_cost-python-h200.json
"""
from __future__ import annotations

import argparse
import collections
import ctypes
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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_IMPLS = ("proton", "proton_ctypes", "proton_ctypes:api", "recipe:kernel_only", "recipe:api_deny",
                 "recipe:extcorr_only")
#: operations per timed loop of each workload
CALLS = {"runtime call": 200_000, "driver call": 200_000, "torch launch": 30_000, "transformer step": 60}
#: the external id (and its kind, CUPTI's CUSTOM0) pushed for the extcorr_only recipe
EXTERNAL_ID = 7
EXTERNAL_KIND = 3


def _loaded_library(fragment: str) -> str:
    """The path of the first mapped shared object whose name contains ``fragment``."""
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if fragment in os.path.basename(path) and ".so" in path:
                return path
    raise OSError(f"no {fragment} mapped")


def _workloads(torch):
    """name -> callable running ``n`` operations."""
    sys.path.insert(0, HERE)
    from model_steps import transformer_step
    out = {}
    try:
        cudart = ctypes.CDLL(_loaded_library("libcudart"))
        dev = ctypes.c_int()

        def runtime_call(n, f=cudart.cudaGetDevice, ref=ctypes.byref(dev)):
            for _ in range(n):
                f(ref)
        out["runtime call"] = runtime_call
    except OSError as e:
        print(f"runtime call skipped: {e}", file=sys.stderr)
    cuda = ctypes.CDLL("libcuda.so.1")
    ctx = ctypes.c_void_p()

    def driver_call(n, f=cuda.cuCtxGetCurrent, ref=ctypes.byref(ctx)):
        for _ in range(n):
            f(ref)
    out["driver call"] = driver_call
    x = torch.zeros(1, device="cuda")

    def torch_launch(n):
        for _ in range(n):
            x.add_(1)
    out["torch launch"] = torch_launch
    step, _ = transformer_step(torch)

    def transformer(n):
        for _ in range(n):
            step()
    out["transformer step"] = transformer
    return out


def _other_cpu_s() -> float:
    """CPU seconds of every thread of this process but the calling one (clock ticks)."""
    from attribution import thread_cpu_s
    import threading
    me = threading.get_native_id()
    return sum(v for t, v in thread_cpu_s().items() if t != me)


def _time_all(torch, loads: dict) -> dict:
    out = {}
    for name, fn in loads.items():
        n = CALLS[name]
        fn(max(1, n // 20))
        torch.cuda.synchronize()
        o0, c0, w0 = _other_cpu_s(), time.thread_time_ns(), time.perf_counter_ns()
        fn(n)
        c1 = time.thread_time_ns()
        torch.cuda.synchronize()
        w1, o1 = time.perf_counter_ns(), _other_cpu_s()
        out[name] = {"cpu_ns": (c1 - c0) / n, "wall_ns": (w1 - w0) / n, "other_cpu_ns": (o1 - o0) * 1e9 / n}
    return out


def _start(impl: str, path: str, context: str = "shadow"):
    """Start ``impl`` (``proton`` and ``proton_ctypes`` with ``context``); return ``(stop(), info())``."""
    if impl == "proton":
        proton = real_proton()   # the installed Proton, or a newer one's (proton_overlay)
        proton.start(path, data="tree", context=context)
        return proton.finalize, dict
    if impl in ("proton_ctypes", "proton_ctypes:api"):
        sys.path.insert(0, ROOT)
        if impl.endswith(":api"):
            os.environ["PROTON_CTYPES_LAUNCH_SOURCE"] = "api"
        import proton_ctypes as proton
        proton.start(path, data="tree", context=context)
        return proton.finalize, dict
    recipe = impl.split(":", 1)[1]
    os.environ["PROTON_CTYPES_LAUNCH_SOURCE"] = "api"      # the recipe alone: no latency timestamps
    sys.path.insert(0, ROOT)
    sys.path.insert(0, HERE)
    from attribution import enable
    from proton_ctypes.backends.cupti import CuptiBackend
    from proton_ctypes.backends.nvidia import layout as L
    from proton_ctypes.backends.nvidia import parse as P
    counts = collections.Counter()
    original = P.BufferParser.parse

    def counting_parse(self, buf, valid, copy=True):
        parts = original(self, buf, valid, copy)
        for kind, cols in parts.items():
            counts[int(kind)] += len(next(iter(cols.values()))) if cols else 0
        return parts
    P.BufferParser.parse = counting_parse
    backend = CuptiBackend()
    if recipe == "extcorr_only":
        def fn(lib):
            for kind in (L.KIND_CONCURRENT_KERNEL, L.KIND_EXTERNAL_CORRELATION):
                lib.enable_kind(kind)
                backend._enabled_kinds.append(kind)
        backend._enable_activity = fn
    else:
        fn = enable(recipe)
        backend._enable_activity = lambda lib: fn(backend)
    delivered = [0]
    backend.start(lambda batch: delivered.__setitem__(0, delivered[0] + len(batch)),
                  python_context=(lambda: 0) if recipe == "launch_callback" else None)
    if recipe == "extcorr_only":
        backend.collector.parser.expect_extcorr = True
        backend.lib.push_external(EXTERNAL_KIND, EXTERNAL_ID)

    def stop():
        if recipe == "extcorr_only":
            backend.lib.pop_external(EXTERNAL_KIND)
        backend.stop()
    return stop, lambda: {"records_by_kind": dict(counts), "kernels": delivered[0]}


def worker(impl: str, context: str = "shadow") -> dict:
    """Bare figures, then the profiled ones, of every workload, in this process."""
    import torch
    loads = _workloads(torch)
    for fn in loads.values():
        fn(2)
    torch.cuda.synchronize()
    bare = _time_all(torch, loads)
    with tempfile.TemporaryDirectory() as d:
        stop, info = _start(impl, os.path.join(d, "p"), context)
        prof = _time_all(torch, loads)
        stop()
    return {"impl": impl, "bare": bare, "profiled": prof, "info": info()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--impls", default=",".join(DEFAULT_IMPLS))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--context", choices=("shadow", "python"), default="shadow",
                    help="the context proton and proton_ctypes start with")
    ap.add_argument("--json", default=None)
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        print(json.dumps(worker(a.worker, a.context)))
        return
    impls = [i for i in a.impls.split(",") if i]
    runs = collections.defaultdict(list)
    for rnd in range(a.rounds):
        order = impls[rnd % len(impls):] + impls[:rnd % len(impls)]
        for impl in order:
            p = subprocess.run([sys.executable, __file__, "--worker", impl, "--context", a.context],
                               capture_output=True, text=True)
            if p.returncode != 0:
                print(f"{impl}: rc={p.returncode}\n{p.stderr[-2000:]}", file=sys.stderr)
                continue
            r = json.loads(p.stdout.strip().splitlines()[-1])
            runs[impl].append(r)
            print(f"round {rnd} {impl}: " + ", ".join(
                f"{w} +{(r['profiled'][w]['cpu_ns'] - r['bare'][w]['cpu_ns']):.0f} ns" for w in r["bare"])
                + f" {r['info']}", file=sys.stderr, flush=True)
    rows = []
    proton_over = {}
    for impl in impls:
        for w in CALLS:
            got = [r for r in runs[impl] if w in r["bare"]]
            if not got:
                continue
            over = statistics.median(r["profiled"][w]["cpu_ns"] - r["bare"][w]["cpu_ns"] for r in got)
            if impl == "proton":
                proton_over[w] = over
            ref = proton_over.get(w)
            case = w if a.context == "shadow" else f'{w}, context="{a.context}"'
            rows.append({"case": case, "impl": impl.split(":")[0].replace("recipe", "proton_ctypes"),
                         "recipe": impl.split(":", 1)[1] if ":" in impl else None,
                         "us_per_op": round(statistics.median(r["profiled"][w]["cpu_ns"] for r in got) / 1e3, 4),
                         "overhead_us": round(over / 1e3, 4),
                         "ratio_to_proton": round(over / ref, 3) if ref and ref > 0 else None,
                         "finalize_s": None,
                         "bare_us": round(statistics.median(r["bare"][w]["cpu_ns"] for r in got) / 1e3, 4),
                         "wall_overhead_us": round(statistics.median(
                             r["profiled"][w]["wall_ns"] - r["bare"][w]["wall_ns"] for r in got) / 1e3, 4),
                         "other_cpu_overhead_us": round(statistics.median(
                             r["profiled"][w]["other_cpu_ns"] - r["bare"][w]["other_cpu_ns"] for r in got) / 1e3, 4),
                         "info": got[-1]["info"]})
    print(f"{'workload':18s} {'impl':28s} {'bare us':>9s} {'+cpu us':>9s} {'+wall us':>9s} {'+other us':>9s} ratio")
    for r in rows:
        name = r["impl"] + (":" + r["recipe"] if r["recipe"] else "")
        print(f"{r['case']:18s} {name:28s} {r['bare_us']:9.3f} {r['overhead_us']:+9.3f} {r['wall_overhead_us']:+9.3f} "
              f"{r['other_cpu_overhead_us']:+9.3f} {r['ratio_to_proton']}")
    if a.json:
        results_file.write(a.json, rows)


if __name__ == "__main__":
    main()
