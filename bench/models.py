"""Real models on a GPU: bare, real Proton and proton_ctypes, side by side.

Run on the H200 (one invocation does everything)::

    python bench/models.py --rounds 3 --json bench/results/models-h200.json

Cases (``--cases`` takes ``|``-separated substrings of their names):

* a ``torch.nn.TransformerEncoder`` training step (6 layers, d_model 512, 8 heads,
  feed-forward 2048, batch 32 x 128 tokens, AdamW): ``eager`` with scopes per phase
  (forward / loss / backward / optimizer) and per layer (forward pre/post hooks);
  ``compile`` (``torch.compile``, phase scopes outside the compiled region); ``python``
  (the eager case under ``context="python"``); ``no scopes`` (a session and nothing else);
* a small dynamic network of our own (a polynomial whose degree is drawn per step, as in
  Proton's ``dynamic-net`` tutorial), ``eager`` and ``inductor``;
* a matmul autotune loop with ``hook="triton"`` and ``launch_metadata`` (the autotuner runs
  inside the profiled region and times itself, so only call paths and metric names are
  compared there, not counts).

Each implementation runs in its own process per round (``--worker``), the processes
alternate, and inside each process every case runs ``--chunks`` sessions with a bare chunk
of steps between them: each session is started, runs a few steps untimed (their cost is
reported apart as ``session_first_steps_overhead_us``: CUPTI instruments every kernel again
after it is switched on), runs the timed chunk, and is finalized.  The H200's speed drifts
within a process and from process to process, so each timed chunk is compared with the
mean of the bare chunks on either side.  ``overhead_us`` is the median over all chunks of
(profiled - bare) per step, ``ratio_to_proton`` ours / Proton's; ``cpu_overhead_us`` and
``cpu_ratio_to_proton`` are the same for the launching thread's CPU time of the loop (before
its synchronisation), where a profiler's cost is paid even when the GPU hides it.  Every profiled
file's kernels are counted per call path; ``kernels`` is ours, ``expected_kernels``
Proton's, and ``paths_match`` says whether the two files have the same kernel count on
every call path (random seeds fixed).  Two diagnostics say where a cost went:
``gpu_kernel_us_per_step``, the summed GPU time of the file's kernels per step (kernels slowed
on the GPU, or only spread out?), and ``other_threads_cpu_overhead_us``, per thread name the CPU
µs per step the process's other threads spent in profiled chunks minus in bare ones (the
profiler's collector, CUPTI's threads, autograd's launching thread).
``bare_after_sessions_minus_before_us``: the bare chunks after the first session minus the one
before any, per step (median over rounds): a profiler that leaves a cost behind after
``finalize`` would show it there, and would look cheaper than it is by about half of it (both
profilers detach CUPTI at every stop; ``PROTON_CTYPES_CUPTI_FINALIZE=0`` keeps it attached, which
cost later launches on an H100: ``docs/collection.md``).

``--impls`` may add ``floor:kernels`` and ``floor:ours`` (``bench/cupti_floor.py``): CUPTI's
kernel records with no profiler, the floor under every CUPTI profiler, and the CUPTI
configuration proton_ctypes runs on (per-thread buffers, latency timestamps). Their rows are
``bare`` rows with a ``floor`` key; their ``ratio_to_proton`` is the least a CUPTI kernel
profiler could reach on the case. ``proton_ctypes:env:NAME=VALUE`` runs proton_ctypes with that
environment switch set (``bench/variants.py``; e.g. ``PROTON_CTYPES_LOG_REWRITE=0``, its rows
carry ``"variant": "env:..."``). ``proton_ctypes:<variant>`` runs proton_ctypes with one
switch of :data:`VARIANTS` set (its rows carry ``"variant"``): ``lazy``, lazy latency
timestamps; ``api``, the launch-API records as the launch source; ``timestamps``, CUPTI's latency
timestamps (the default before launch positions); ``position``, the launch positions (the
default: no timestamps, ``proton_ctypes/backends/nvidia/positions.py``).
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
from model_steps import MODELS  # noqa: E402
import results_file  # noqa: E402
import variants  # noqa: E402
from attribution import other_threads_cpu_s, thread_cpu_s, thread_names  # noqa: E402  (one copy)
from proton_overlay import real_proton  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IMPLS = ("proton", "proton_ctypes")
#: case name -> (model, steps, start kwargs, scopes on)
CASES = {
    "transformer eager, scopes per phase and layer": ("transformer", 300, {}, True),
    "transformer compile, scopes outside": ("transformer_compiled", 300, {}, True),
    'transformer eager, context="python"': ("transformer", 150, {"context": "python"}, True),
    "transformer eager, no scopes": ("transformer", 300, {}, False),
    "dynamic net eager": ("dynamic", 400, {}, True),
    "dynamic net inductor": ("dynamic_compiled", 400, {}, True),
    'matmul autotune, hook="triton", launch_metadata': ("matmul", 300, {"hook": "triton"}, True),
}
#: ``proton_ctypes:<variant>`` -> (the name of its switch in ``proton_ctypes.backends.nvidia.activity``, value)
VARIANTS = {"lazy": ("LAZY_TIMESTAMPS_ENV", "1"), "api": ("LAUNCH_SOURCE_ENV", "api"),
            "timestamps": ("LAUNCH_SOURCE_ENV", "kernel"), "position": ("LAUNCH_SOURCE_ENV", "position")}
#: cases whose kernel counts depend on timing (the autotuner): compared by paths and metric names
TIMED_CASES = ('matmul autotune, hook="triton", launch_metadata',)
WARMUP_STEPS = 10
#: the hatchet metric of a kernel node's summed GPU time
KERNEL_TIME = "time (ns)"
#: steps run in each session before its timed chunk (what a session's first steps cost --
#: CUPTI instrumenting each kernel again, our first buffers -- is reported apart, as ``warm``)
SESSION_WARM_STEPS = 20


# ============================================================================ worker
def kernel_paths(path: str) -> dict:
    """``{call path: count}`` of every kernel node of a hatchet file, ``{metric names}``, and the
    summed GPU time of its kernels (``kernel_ns``)."""
    with open(path) as f:
        root = json.load(f)[0]
    out, metrics, kernel_ns = {}, set(), 0
    stack = [(root, "")]
    while stack:
        node, prefix = stack.pop()
        here = f"{prefix}/{_frame(node['frame']['name'])}"
        m = node.get("metrics", {})
        metrics.update(k for k in m if k != "lost_records")
        if "device_id" in m:
            out[here] = out.get(here, 0) + int(m.get("count", 0))
            kernel_ns += int(m.get(KERNEL_TIME, 0))
        stack.extend((c, here) for c in node.get("children", []))
    return {"paths": out, "metrics": sorted(metrics), "kernel_ns": kernel_ns}


def _frame(name: str) -> str:
    """A frame name with the profiler's own file paths (Proton's or ours) made comparable."""
    for marker in ("triton/profiler/", "proton_ctypes/"):
        if marker in name:
            return "<profiler frame>"
    return name


def worker(impl: str, cases: list, chunks: int) -> dict:
    """One process: per case, ``chunks`` sessions, each ``start``, :data:`SESSION_WARM_STEPS`
    steps, a timed chunk of steps, ``finalize``, with a bare chunk between them (and before the
    first); each timed chunk is compared with the mean of the bare chunks on either side."""
    import torch
    if impl == "proton":
        proton = real_proton()   # the installed Proton, or a newer one's (proton_overlay)
    elif impl.startswith("floor:"):
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        from cupti_floor import floor_profiler
        proton = floor_profiler(impl)
    else:
        sys.path.insert(0, ROOT)
        if variants.is_env_variant(impl):          # proton_ctypes:env:NAME=VALUE, before the import
            variants.apply(impl)
        elif impl.startswith("proton_ctypes:"):   # read when the session starts
            from proton_ctypes.backends.nvidia import activity
            name, value = VARIANTS[impl.split(":", 1)[1]]
            os.environ[getattr(activity, name)] = value
        import proton_ctypes as proton
    tmp = tempfile.mkdtemp()
    out = {}
    for case in cases:
        model, steps, start, scoped = CASES[case]
        build = MODELS[model]
        per_chunk = max(1, steps // chunks)

        cpu = [0.0, {}]
        me = threading.get_native_id()

        def timed(step, n):
            """Wall seconds of ``n`` steps (synchronised); the launching thread's CPU seconds of
            the loop itself (before the synchronisation) go to ``cpu[0]``, the other threads' CPU
            seconds by name (loop and synchronisation) to ``cpu[1]``."""
            torch.cuda.synchronize()
            others = thread_cpu_s()
            t0, c0 = time.perf_counter(), time.thread_time()
            for _ in range(n):
                step()
            cpu[0] = time.thread_time() - c0
            torch.cuda.synchronize()
            wall = time.perf_counter() - t0
            cpu[1] = other_threads_cpu_s(others, thread_cpu_s(), thread_names(), me)
            return wall

        fresh = model == "matmul"          # a fresh autotuner per chunk: it tunes inside the session
        bare_step, _ = build(torch, None)
        prof_step, _ = build(torch, proton if scoped else None)
        if not fresh:                      # compile and warm up outside every timed chunk
            timed(bare_step, WARMUP_STEPS)
            timed(prof_step, WARMUP_STEPS)
        res = {"bare_s": [], "wall_s": [], "warm_s": [], "finalize_s": [], "bare_cpu_s": [], "cpu_s": [], "steps": per_chunk,
               "warm_steps": SESSION_WARM_STEPS, "paths": {}, "metrics": [], "kernel_ns": [],
               "threads_cpu_s": [], "bare_threads_cpu_s": []}
        bare_before = timed(bare_step, per_chunk)
        res["bare_chunks_s"] = [bare_before]
        bare_cpu_before = cpu[0]
        res["bare_threads_cpu_s"].append(cpu[1])
        for k in range(chunks):
            if fresh:
                bare_step, _ = build(torch, None)
                prof_step, _ = build(torch, proton if scoped else None)
            name = os.path.join(tmp, f"{model}_{len(out)}_{k}")
            proton.start(name, **start)
            res["warm_s"].append(0.0 if fresh else timed(prof_step, SESSION_WARM_STEPS))
            res["wall_s"].append(timed(prof_step, per_chunk))
            res["cpu_s"].append(cpu[0])
            res["threads_cpu_s"].append(cpu[1])
            t0 = time.perf_counter()
            proton.finalize()
            res["finalize_s"].append(time.perf_counter() - t0)
            bare_after = timed(bare_step, per_chunk)
            res["bare_chunks_s"].append(bare_after)
            res["bare_threads_cpu_s"].append(cpu[1])
            res["bare_s"].append((bare_before + bare_after) / 2)   # the bare chunks on either side
            res["bare_cpu_s"].append((bare_cpu_before + cpu[0]) / 2)
            bare_before, bare_cpu_before = bare_after, cpu[0]
            if impl.startswith("floor:"):
                continue                   # the floor writes no profile
            got = kernel_paths(name + ".hatchet")
            # the file holds the session's first (untimed) steps too
            res["kernel_ns"].append(got["kernel_ns"] / (per_chunk + (0 if fresh else SESSION_WARM_STEPS)))
            for path, n in got["paths"].items():
                res["paths"][path] = res["paths"].get(path, 0) + n
            res["metrics"] = sorted(set(res["metrics"]) | set(got["metrics"]))
        out[case] = res
        print(f"{impl} {case}: bare {sum(res['bare_s']):.2f} s, profiled {sum(res['wall_s']):.2f} s",
              file=sys.stderr, flush=True)
    return out


# ============================================================================ parent
def compare(ours: dict, theirs: dict, timed: bool) -> bool:
    """Whether two files hold the same kernels per call path (timed cases: the same paths and metrics)."""
    if timed:
        return set(ours["paths"]) == set(theirs["paths"]) and ours["metrics"] == theirs["metrics"]
    return ours["paths"] == theirs["paths"]


def _pairs(rs: list) -> list:
    """(profiled chunk - the bare chunks around it) per step, µs, over every chunk of every round."""
    return [(w - b) / x["steps"] * 1e6 for x in rs for b, w in zip(x["bare_s"], x["wall_s"])]


def _cpu_pairs(rs: list) -> list:
    """The same for the launching thread's CPU time (the cost where it is paid: the wall time of a
    GPU-bound step hides it, and the H200's step time is bimodal)."""
    return [(c - b) / x["steps"] * 1e6 for x in rs for b, c in zip(x.get("bare_cpu_s", []), x.get("cpu_s", []))]


def _warm(rs: list) -> list:
    """(a session's first steps - the bare chunks around it) per step, µs."""
    return [(w - b / x["steps"] * x["warm_steps"]) / x["warm_steps"] * 1e6
            for x in rs for b, w in zip(x["bare_s"], x["warm_s"]) if w]


def _threads_over(rs: list) -> dict:
    """Per thread name, the CPU µs per step the other threads spent in profiled chunks minus in
    bare ones (means over every chunk of every round): where a profiler's work off the launching
    thread goes (its collector, CUPTI's threads, autograd's thread paying a launch callback)."""
    def per_step(key):
        total, chunks = {}, 0
        for x in rs:
            for d in x.get(key, []):
                chunks += 1
                for name, sec in d.items():
                    total[name] = total.get(name, 0.0) + sec / x["steps"] * 1e6
        return {n: v / chunks for n, v in total.items()} if chunks else {}
    prof, bare = per_step("threads_cpu_s"), per_step("bare_threads_cpu_s")
    return {n: round(prof.get(n, 0.0) - bare.get(n, 0.0), 1) for n in sorted(set(prof) | set(bare))}


def _bare_drift(rs: list):
    """Per step, the mean of a process's bare chunks after its first session minus its bare chunk
    before any session: the median over processes, in µs (None without such chunks)."""
    drift = [(statistics.mean(c[1:]) - c[0]) / x["steps"] * 1e6
             for x in rs if len(c := x.get("bare_chunks_s", [])) > 1]
    return round(statistics.median(drift), 1) if drift else None


def summarize(runs: dict, cases: list) -> tuple:
    """Rows (bare, proton, proton_ctypes per case) and a list of path mismatches."""
    rows, mismatches = [], []
    for case in cases:
        got = {impl: [r[case] for r in rs if case in r] for impl, rs in runs.items()}
        over, cpu_over = {}, {}
        for impl, rs in got.items():
            if rs:
                over[impl] = statistics.median(_pairs(rs))
                if _cpu_pairs(rs):
                    cpu_over[impl] = statistics.median(_cpu_pairs(rs))
        ref = over.get("proton")
        all_bare = [b / x["steps"] * 1e6 for rs in got.values() for x in rs for b in x["bare_s"]]
        if all_bare:
            rows.append({"case": case, "impl": "bare", "us_per_op": round(statistics.median(all_bare), 1),
                         "overhead_us": None, "ratio_to_proton": None, "finalize_s": None})
        expected = sum(got["proton"][-1]["paths"].values()) if got.get("proton") else None
        for impl, rs in got.items():
            if not rs:
                continue
            floor = impl.split(":", 1)[1] if impl.startswith("floor:") else None
            variant = impl.split(":", 1)[1] if impl.startswith("proton_ctypes:") else None
            row = {"case": case, "impl": "bare" if floor else impl.split(":")[0], **({"floor": floor} if floor else {}),
                   **({"variant": variant} if variant else {}),
                   "us_per_op": round(statistics.median([w / x["steps"] * 1e6 for x in rs for w in x["wall_s"]]), 1),
                   "overhead_us": round(over[impl], 1),
                   "ratio_to_proton": round(over[impl] / ref, 3) if ref and ref > 0 else None,
                   "finalize_s": round(statistics.median([f for x in rs for f in x["finalize_s"]]), 4),
                   "overhead_pairs_us": [round(v, 1) for v in _pairs(rs)],
                   "cpu_overhead_us": round(cpu_over[impl], 1) if impl in cpu_over else None,
                   "cpu_ratio_to_proton": (round(cpu_over[impl] / cpu_over["proton"], 3)
                                           if impl in cpu_over and cpu_over.get("proton", 0) > 0 else None),
                   "session_first_steps_overhead_us": round(statistics.median(_warm(rs)), 1) if _warm(rs) else None,
                   "kernels": sum(rs[-1]["paths"].values()) if not floor else None, "expected_kernels": expected,
                   "other_threads_cpu_overhead_us": _threads_over(rs),
                   "bare_after_sessions_minus_before_us": _bare_drift(rs)}
            kernel_us = [k / 1e3 for x in rs for k in x.get("kernel_ns", [])]
            if kernel_us:      # did the kernels themselves take longer on the GPU under this profiler?
                row["gpu_kernel_us_per_step"] = round(statistics.median(kernel_us), 1)
            if impl.startswith("proton_ctypes") and got.get("proton"):
                ok = compare(rs[-1], got["proton"][-1], case in TIMED_CASES)
                row["paths_match"] = ok
                if not ok:
                    a, b = rs[-1]["paths"], got["proton"][-1]["paths"]
                    diff = {p: (a.get(p), b.get(p)) for p in set(a) | set(b) if a.get(p) != b.get(p)}
                    mismatches.append({"case": case, "ours_vs_proton": dict(list(diff.items())[:20]),
                                       "metrics": [rs[-1]["metrics"], got["proton"][-1]["metrics"]]})
            rows.append(row)
    return rows, mismatches


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--chunks", type=int, default=5, help="bare/profiled pairs per case in each process")
    ap.add_argument("--cases", default=None, help="'|'-separated substrings of case names")
    ap.add_argument("--impls", default=",".join(IMPLS))
    ap.add_argument("--json", default=None)
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    cases = [c for c in CASES if not a.cases or any(k.strip() and k.strip() in c for k in a.cases.split("|"))]
    if a.worker:
        print("RESULT " + json.dumps(worker(a.worker, cases, a.chunks)), flush=True)
        return
    impls = [i for i in a.impls.split(",") if i]
    for impl in impls:
        if variants.is_env_variant(impl):
            try:
                variants.switches(impl)
            except ValueError as e:
                ap.error(f"--impls {e}")
        elif impl.startswith("proton_ctypes:") and impl.split(":", 1)[1] not in VARIANTS:
            ap.error(f"--impls {impl}: no such variant (proton_ctypes:{'|'.join(VARIANTS)})")
    runs = {i: [] for i in impls}

    def save():
        rows, mismatches = summarize(runs, cases)
        if a.json:
            results_file.write(a.json, rows, path_mismatches=mismatches)
        return rows, mismatches

    for r in range(a.rounds):
        for impl in (impls if r % 2 == 0 else impls[::-1]):
            cmd = [sys.executable, os.path.abspath(__file__), "--worker", impl, "--chunks", str(a.chunks),
                   "--cases", "|".join(cases)]
            p = subprocess.run(cmd, capture_output=True, text=True)
            sys.stderr.write(p.stderr[-1500:] if p.returncode else "")
            line = [ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
            if p.returncode != 0 or not line:
                print(f"round {r} {impl}: failed rc={p.returncode}", file=sys.stderr, flush=True)
                continue
            runs[impl].append(json.loads(line[-1][len("RESULT "):]))
            print(f"round {r} {impl}: done", file=sys.stderr, flush=True)
        save()
    rows, mismatches = save()
    print(f"{'case':48s} {'impl':14s} {'us/step':>9s} {'overhead':>9s} {'vs Proton':>9s} {'cpu +us':>8s} "
          f"{'cpu vs':>6s} {'kernels':>15s} paths")
    for row in rows:
        ratio = row["ratio_to_proton"]
        kern = f"{row.get('kernels', '')}/{row.get('expected_kernels', '')}" if "kernels" in row else ""
        label = row["impl"] + (f" {row['floor']} floor" if "floor" in row else "") + (
            f":{row['variant']}" if "variant" in row else "")
        print(f"{row['case'][:48]:48s} {label:14s} {row['us_per_op']:9.1f} "
              f"{'' if row['overhead_us'] is None else format(row['overhead_us'], '+9.1f'):>9s} "
              f"{'' if ratio is None else format(ratio, '9.2f'):>9s} "
              f"{'' if row.get('cpu_overhead_us') is None else format(row['cpu_overhead_us'], '+8.0f'):>8s} "
              f"{'' if row.get('cpu_ratio_to_proton') is None else format(row['cpu_ratio_to_proton'], '6.2f'):>6s} "
              f"{kern:>15s} {row.get('paths_match', '')}")
        threads = {n: v for n, v in (row.get("other_threads_cpu_overhead_us") or {}).items() if abs(v) >= 1}
        if "gpu_kernel_us_per_step" in row or threads:
            print(f"{'':48s}   GPU kernels {row.get('gpu_kernel_us_per_step', '-')} us/step; "
                  f"other threads' CPU +us/step {threads}")
    for m in mismatches:
        print("MISMATCH", json.dumps(m)[:1500])


if __name__ == "__main__":
    main()
