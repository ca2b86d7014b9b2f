"""Several launching threads on a GPU: bare, real Proton and proton_ctypes, side by side.

Run on the H200 (one invocation does everything)::

    python bench/threads.py --threads 4,8,16,32,64 --total 200000 --rounds 3 --json bench/results/threads-h200.json

Each thread launches a tiny Triton kernel ``--launches`` times, each launch inside
``with scope("step")``.  Each (implementation, data) pair runs in its own process
(``--worker``), and that process times a bare run of the same threads (no profiler, no scope)
before and after the profiled one, so every profiled figure is paired with the faster of two
bare ones of the same process; the processes alternate round by round (the order rotates).
Per run the worker reports the wall time of the threaded loop (synchronised), the ``finalize``
time, the kernels counted in the written file (a profiler that loses kernels cannot look fast)
and the growth of the process's peak resident memory during the profiled loop.

``overhead_us`` = (profiled wall - bare wall) / (threads x launches), the median over
rounds; ``ratio_to_proton`` = overhead / Proton's overhead of the same data kind.

``--impls`` may name ``proton_ctypes:env:NAME=VALUE`` (``bench/variants.py``): proton_ctypes with
one diagnostic switch set, in the same interleaved rounds.
``--impls`` may add ``floor:kernels``, ``floor:ours``, ``floor:per_thread`` and ``floor:pylog``
(``bench/cupti_floor.py``): CUPTI alone, the scopes doing nothing (``floor:pylog``: only
logging their edges, the least a pure-Python profiler does), run once per round with the first
data kind; their rows are ``bare`` rows with a ``floor`` key. With several launching threads
both profilers pay about the same per launch; these rows say how much of that is CUPTI's.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import results_file  # noqa: E402
from proton_overlay import real_proton  # noqa: E402
import variants  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IMPLS = ("proton", "proton_ctypes")
DATA = ("tree", "trace")
#: kernel name in the written files
KERNEL = "tiny"


def _profiler(impl):
    if impl == "proton":
        proton = real_proton()   # the installed Proton, or a newer one's (proton_overlay)
    elif impl.startswith("floor:"):
        from cupti_floor import floor_profiler
        proton = floor_profiler(impl)
    else:
        sys.path.insert(0, ROOT)
        import proton_ctypes as proton
    return proton


def count_kernels(path: str, data: str) -> int:
    """Kernels named :data:`KERNEL` in a hatchet (``data="tree"``) or chrome-trace file."""
    if data == "tree":
        with open(path) as f:
            root = json.load(f)[0]
        total, stack = 0, [root]
        while stack:
            n = stack.pop()
            if n["frame"]["name"] == KERNEL:
                total += int(n["metrics"].get("count", 0))
            stack.extend(n["children"])
        return total
    with open(path) as f:
        doc = json.load(f)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    return sum(1 for e in events if e.get("name") == KERNEL and e.get("ph") == "X")


def _peak_rss_kb() -> int:
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def worker(impl: str, data: str, threads: int, launches: int, waves: int = 1) -> dict:
    """One process: a bare threaded run, the profiled one, and a bare one again; returns the
    figures, ``bare_s`` the faster of the two bare runs.  A bare run of several threads was up to
    40 % slower than another on the H100 (4.66 to 6.61 s, while the profiled runs of both tools
    stayed within 7 %): the faster one drops such a run.  Not the mean: a profiler that left a
    cost behind after ``finalize`` would then look cheaper (``bare_before_after_s`` shows both).

    ``waves`` > 1: a churning pool -- the ``launches`` of each thread slot are spread over
    ``waves`` short-lived threads started one wave after the other while the session runs."""
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def tiny(x_ptr):
        tl.store(x_ptr, 1.0)

    bufs = [torch.zeros(1, device="cuda") for _ in range(threads)]
    for b in bufs:  # compile and warm up outside every timed loop
        tiny[(1,)](b)
    torch.cuda.synchronize()

    per_wave = launches // waves

    def run(body) -> float:
        t0 = None
        for _ in range(waves):
            barrier = threading.Barrier(threads + 1)
            ts = [threading.Thread(target=body, args=(bufs[i], barrier)) for i in range(threads)]
            for t in ts:
                t.start()
            barrier.wait()
            t0 = t0 or time.perf_counter()
            for t in ts:
                t.join()
        torch.cuda.synchronize()
        return time.perf_counter() - t0

    def bare(buf, barrier):
        barrier.wait()
        for _ in range(per_wave):
            tiny[(1,)](buf)

    bare_before = run(bare)
    proton = _profiler(variants.apply(impl))    # proton_ctypes:env:NAME=VALUE sets its switch first
    scope = proton.scope
    out = os.path.join(tempfile.mkdtemp(), "threads")

    def profiled(buf, barrier):
        barrier.wait()
        for _ in range(per_wave):
            with scope("step"):
                tiny[(1,)](buf)

    rss0 = _peak_rss_kb()
    proton.start(out, data=data)
    wall_s = run(profiled)
    rss1 = _peak_rss_kb()
    t0 = time.perf_counter()
    proton.finalize()
    finalize_s = time.perf_counter() - t0
    bare_after = run(bare)
    bare_s = min(bare_before, bare_after)
    path = out + (".hatchet" if data == "tree" else ".chrome_trace")
    kernels = None if impl.startswith("floor:") else count_kernels(path, data)   # a floor writes no file
    return {"impl": impl, "data": data, "bare_s": bare_s, "bare_before_after_s": [bare_before, bare_after],
            "wall_s": wall_s, "finalize_s": finalize_s,
            "kernels": kernels, "expected": threads * per_wave * waves,
            "rss_growth_mb": (rss1 - rss0) / 1024.0}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", default="4", help="thread counts, comma-separated (e.g. 1,2,4,8,16,32,64)")
    ap.add_argument("--launches", type=int, default=50000, help="launches per thread")
    ap.add_argument("--total", type=int, default=None,
                    help="launches in all, shared by the threads (overrides --launches)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--churn", type=int, default=1,
                    help="waves of short-lived threads per thread slot (1: the threads live through the run)")
    ap.add_argument("--impls", default=",".join(IMPLS))
    ap.add_argument("--data", default=",".join(DATA))
    ap.add_argument("--json", default=None)
    ap.add_argument("--worker", nargs=2, metavar=("IMPL", "DATA"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.churn < 1:
        ap.error(f"--churn is the number of thread waves per slot, at least 1 (1: no churn), not {a.churn}")
    counts = [int(t) for t in str(a.threads).split(",") if t]
    if a.worker:
        print(json.dumps(worker(a.worker[0], a.worker[1], counts[0], a.launches, a.churn)))
        return
    rows = []
    for threads in counts:
        launches = a.total // threads if a.total else a.launches

        def save(runs, threads=threads, launches=launches):
            # after every round: a run cut short keeps what it measured
            if a.json:
                results_file.write(a.json, rows + summarize(a, threads, launches, runs, quiet=True))
        runs = run_count(a, threads, launches, after_round=save)
        rows.extend(summarize(a, threads, launches, runs))
        if a.json:
            results_file.write(a.json, rows)


def run_count(a, threads: int, launches: int, after_round=None) -> dict:
    """Every round of every (implementation, data) for one thread count:
    ``{(impl, data): [worker result per round]}``; ``after_round(runs)`` after each round."""
    impls, datas = a.impls.split(","), a.data.split(",")
    runs = {(i, d): [] for i in impls for d in datas}
    for r in range(a.rounds):
        # a floor (no profiler: CUPTI alone) writes nothing, so it runs once, with the first data
        order = [(i, d) for d in datas for i in (impls if r % 2 == 0 else impls[::-1])
                 if not i.startswith("floor:") or d == datas[0]]
        for impl, data in order:
            cmd = [sys.executable, os.path.abspath(__file__), "--threads", str(threads), "--launches",
                   str(launches), "--churn", str(a.churn), "--worker", impl, data]
            p = subprocess.run(cmd, capture_output=True, text=True)
            if p.returncode != 0:
                print(f"round {r} {impl} {data}: failed\n{p.stderr[-2000:]}", file=sys.stderr)
                continue
            res = json.loads(p.stdout.strip().splitlines()[-1])
            runs[(impl, data)].append(res)
            bares = "/".join(f"{b:.2f}" for b in res.get("bare_before_after_s", [res["bare_s"]]))
            print(f"round {r} {threads} threads {impl:14s} {data:5s} bare {bares} s profiled "
                  f"{res['wall_s']:.2f} s kernels {res['kernels']}/{res['expected']}", file=sys.stderr)
        if after_round is not None:
            after_round(runs)
    return runs


def summarize(a, threads: int, launches: int, runs: dict, quiet: bool = False) -> list:
    """The rows of one thread count from its workers' results (medians over the rounds run so
    far); prints them as a table unless ``quiet``."""
    out = (lambda *args, **kwargs: None) if quiet else print
    floors = [i for i in a.impls.split(",") if i.startswith("floor:")]
    n_ops = threads * (launches // a.churn) * a.churn
    rows = []
    overhead = {}
    for (impl, data), rs in runs.items():
        if rs:
            overhead[(impl, data)] = statistics.median([(x["wall_s"] - x["bare_s"]) / n_ops * 1e6 for x in rs])
    out(f"{'case':34s} {'impl':14s} {'us/op':>7s} {'overhead':>9s} {'vs Proton':>9s} {'finalize s':>10s} "
        f"{'kernels':>15s} {'rss MB':>7s}")
    for (impl, data), rs in runs.items():
        if not rs:
            continue
        pool = f", {a.churn} waves of new threads" if a.churn > 1 else ""
        case = f"{threads} threads{pool}, scope per launch, data={data}"
        bare_us = statistics.median([x["bare_s"] / n_ops * 1e6 for x in rs])
        us = statistics.median([x["wall_s"] / n_ops * 1e6 for x in rs])
        fin = statistics.median([x["finalize_s"] for x in rs])
        ref = overhead.get(("proton", data))
        ratio = overhead[(impl, data)] / ref if ref else None
        rss = statistics.median([x["rss_growth_mb"] for x in rs])
        if impl in floors:
            rows.append({"case": case, **variants.row_fields(impl), "us_per_op": round(us, 3),
                         "overhead_us": round(overhead[(impl, data)], 3),
                         "ratio_to_proton": None if ratio is None else round(ratio, 3), "finalize_s": None,
                         "kernels": None, "expected_kernels": n_ops, "rss_growth_mb": round(rss, 1),
                         "bare_before_after_s_every_round": [x.get("bare_before_after_s") for x in rs]})
            out(f"{case:34s} {impl:14s} {us:7.2f} {overhead[(impl, data)]:+9.2f} "
                f"{'' if ratio is None else f'{ratio:9.2f}':>9s}")
            continue
        kernels = min(x["kernels"] for x in rs)
        rows.append({"case": case, "impl": "bare", "us_per_op": round(bare_us, 3), "overhead_us": None,
                     "ratio_to_proton": None, "finalize_s": None})
        rows.append({"case": case, **variants.row_fields(impl), "us_per_op": round(us, 3),
                     "overhead_us": round(overhead[(impl, data)], 3),
                     "ratio_to_proton": None if ratio is None else round(ratio, 3), "finalize_s": round(fin, 4),
                     "kernels": kernels, "expected_kernels": n_ops, "kernels_every_round": [x["kernels"] for x in rs],
                     "rss_growth_mb": round(rss, 1),
                     "bare_before_after_s_every_round": [x.get("bare_before_after_s") for x in rs]})
        out(f"{case:34s} {impl:14s} {us:7.2f} {overhead[(impl, data)]:+9.2f} "
            f"{'' if ratio is None else f'{ratio:9.2f}':>9s} {fin:10.3f} {kernels:>7d}/{n_ops:<7d} {rss:7.1f}")
    return rows


if __name__ == "__main__":
    main()
