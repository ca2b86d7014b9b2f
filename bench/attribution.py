"""What each way of tying kernels to their launches costs on a real model (GPU machine).

Run on the H200::

    python bench/attribution.py --rounds 12 --steps 100 --json bench/results/attribution-h200.json

The step's time on the H200 is bimodal (a step runs either near its bare time or 1.5-5 ms
slower, for minutes at a time, under any profiler): a difference between recipes needs many
rounds of long loops to show (4 rounds of 40 steps did not resolve 2 ms per step).

A transformer training step (``bench/models.py``'s model: cuBLAS GEMMs, AdamW's multi-tensor
kernels, autograd's own launching thread) runs under the CUPTI backend alone -- no scope, no
tree, a counting sink -- once per *recipe* (which activity kinds and callbacks are on), all
in ONE process: every round runs every recipe once, in a shuffled order, each as
``start -> steps -> synchronize -> stop``, next to a bare loop of the same round.  The figure
per recipe is the median over rounds of (its seconds per step - the bare loop's of that
round).  Per recipe it also reports the kernels delivered, how many of them found their
launch (a launch-API record or a launch callback entry: the attribution's coverage), the
API records written per (kind, cbid) -- what CUPTI really produced -- and the CPU seconds
of the threads other than the main one (CUPTI's and ours), and the kernels' summed GPU time per
step (``gpu_kernel_us_per_step``).

Recipes:

* ``kernel_only``: kernel records alone (the floor: no attribution at all);
* ``api_deny``: kernel + DRIVER + RUNTIME, every cbid but the launches denied (the recipe of
  ``proton_ctypes`` up to now);
* ``api_driver`` / ``api_runtime``: one API kind only (+ its deny list);
* ``api_deny_all``: both kinds on, every cbid denied (does CUPTI pay per API call anyway?);
* ``api_all``: both kinds, nothing denied (how many API calls a step makes, by cbid);
* ``launch_callback``: kernel records + a Python callback on the driver's launch cbids
  (what Proton does in C++);
* ``kernel_no_timestamps``: ``kernel_only`` with CUPTI's latency timestamps switched off
  (every other recipe runs with them on, as the backend's kernel launch source does):
  what the ``queued`` stamps cost.

``--model compiled`` runs the same transformer under ``torch.compile``: its step is bound by
the GPU, not by the launching thread, so a cost per kernel on the GPU side shows there and a
CPU cost per launch hides (the eager step is the other way round).
"""
from __future__ import annotations

import argparse
import collections
import os
import random
import resource
import statistics
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import results_file  # noqa: E402

RECIPES = ("kernel_only", "kernel_no_timestamps", "api_deny", "api_driver", "api_runtime", "api_deny_all", "api_all",
           "launch_callback")
CLOCK_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


def thread_cpu_s() -> dict:
    """CPU seconds (user + system) of every thread of this process, by native id."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            out[int(tid)] = (int(fields[11]) + int(fields[12])) * CLOCK_TICK_S
        except (OSError, IndexError, ValueError):
            pass
    return out


def thread_names() -> dict:
    """A name for every live thread of this process, by native id: a Python thread's own name
    (the profiler's collector, ...), else ``native:<comm>`` (threads of CUPTI, the driver, ...)."""
    import threading

    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                out[int(tid)] = "native:" + f.read().strip()
        except OSError:
            pass
    for t in threading.enumerate():
        if t.native_id in out:
            out[t.native_id] = t.name
    return out


def other_threads_cpu_s(before: dict, after: dict, names: dict, me: int) -> dict:
    """CPU seconds spent between two :func:`thread_cpu_s` reads by every thread but ``me``, summed
    by thread name (the profiler's collector, CUPTI's threads, autograd's launching thread)."""
    out = {}
    for tid, c in after.items():
        if tid != me:
            name = names.get(tid, "?")
            out[name] = out.get(name, 0.0) + c - before.get(tid, 0.0)
    return out


#: ``getrusage(RUSAGE_THREAD)`` fields read by :func:`usage_per_launch` (CPU in µs)
USAGE_FIELDS = (("user_us", "ru_utime", 1e6), ("system_us", "ru_stime", 1e6), ("minor_faults", "ru_minflt", 1),
                ("voluntary_switches", "ru_nvcsw", 1), ("involuntary_switches", "ru_nivcsw", 1))


def thread_usage():
    """The calling thread's ``getrusage(RUSAGE_THREAD)`` (None where the platform has none)."""
    try:
        return resource.getrusage(resource.RUSAGE_THREAD)
    except (AttributeError, OSError):
        return None


def usage_per_launch(before, after, launches: int):
    """The launching thread's user and system CPU (µs), minor page faults and context switches
    per launch between two :func:`thread_usage` readings: whether a profiler's cost on that
    thread is its own computing (user) or the kernel's (switches handing the GIL over, faults)."""
    if before is None or after is None or not launches:
        return None
    return {name: round((getattr(after, field) - getattr(before, field)) * scale / launches, 4)
            for name, field, scale in USAGE_FIELDS}


def enable(recipe: str):
    """The backend's ``_enable_activity`` replacement for ``recipe``: its kinds, then its deny
    list (which switches off ids of both API kinds; for a kind left off that changes nothing)."""
    from proton_ctypes.backends.nvidia import layout as L
    from proton_ctypes.backends.nvidia.cbids import DRIVER_LAUNCH_CBIDS, RUNTIME_LAUNCH_CBIDS

    K, D, R = L.KIND_CONCURRENT_KERNEL, L.KIND_DRIVER, L.KIND_RUNTIME
    launches = (set(DRIVER_LAUNCH_CBIDS.values()), set(RUNTIME_LAUNCH_CBIDS.values()))
    kinds, keep = {"kernel_only": ([K], None), "kernel_no_timestamps": ([K], None),
                   "launch_callback": ([K], None), "api_all": ([K, D, R], None),
                   "api_deny": ([K, D, R], launches), "api_driver": ([K, D], launches),
                   "api_runtime": ([K, R], launches), "api_deny_all": ([K, D, R], (set(), set()))}[recipe]

    def fn(backend):
        for kind in kinds:
            backend.lib.enable_kind(kind)
            backend._enabled_kinds.append(kind)
        if keep is not None:
            backend.lib.deny_api_records(*keep)
        if recipe == "kernel_no_timestamps":
            backend.lib.enable_latency_timestamps(False)
    return fn


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--recipes", default=",".join(RECIPES))
    ap.add_argument("--model", choices=("eager", "compiled"), default="eager")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    import torch
    from model_steps import transformer_step
    from proton_ctypes.backends.cupti import CuptiBackend
    from proton_ctypes.backends.nvidia import parse as P
    from proton_ctypes.backends.nvidia import layout as L

    step, _ = transformer_step(torch, compiled=a.model == "compiled")
    case = "transformer step" + (" under torch.compile" if a.model == "compiled" else "") + ", session only"
    for _ in range(10):
        step()
    torch.cuda.synchronize()

    records = collections.Counter()          # (kind, cbid) -> API records, for the current recipe
    original_parse = P.BufferParser.parse

    def counting_parse(self, buf, valid, copy=True):
        parts = original_parse(self, buf, valid, copy)
        for kind in (L.KIND_DRIVER, L.KIND_RUNTIME):
            cols = parts.get(kind)
            if cols:
                for cbid, n in collections.Counter(cols["cbid"].tolist()).items():
                    records[(kind, cbid)] += n
        return parts
    P.BufferParser.parse = counting_parse

    backend = CuptiBackend()
    delivered = [0, 0, 0]                    # kernels, kernels with their launch found, their summed GPU ns

    def sink(batch):
        delivered[0] += len(batch)
        delivered[1] += int(((batch["tid"] >= 0) | (batch["py_node"] >= 0)).sum())
        delivered[2] += int((batch["end_ns"] - batch["start_ns"]).sum())

    def loop(n):
        t0 = time.perf_counter()
        for _ in range(n):
            step()
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) / n

    main_tid = threading.get_native_id()
    recipes = [r for r in a.recipes.split(",") if r]
    results = {r: {"over": [], "kernels": [], "found": [], "other_cpu_s": [], "main_cpu_s": [], "kernel_ns": []}
               for r in recipes}
    bare = []
    hist = {}
    for rnd in range(a.rounds):
        order = ["bare"] + recipes
        random.Random(rnd).shuffle(order)
        per = {}
        for r in order:
            if r == "bare":
                per[r] = loop(a.steps)
                continue
            backend._enable_activity = (lambda fn: (lambda lib: fn(backend)))(enable(r))
            records.clear()
            delivered[0] = delivered[1] = delivered[2] = 0
            cpu0 = thread_cpu_s()
            backend.start(sink, python_context=(lambda: 0) if r == "launch_callback" else None)
            per[r] = loop(a.steps)
            backend.stop()
            cpu1 = thread_cpu_s()
            res = results[r]
            res["kernels"].append(delivered[0])
            res["found"].append(delivered[1])
            res["kernel_ns"].append(delivered[2])
            res["main_cpu_s"].append(cpu1.get(main_tid, 0) - cpu0.get(main_tid, 0))
            res["other_cpu_s"].append(sum(v - cpu0.get(t, 0) for t, v in cpu1.items() if t != main_tid))
            hist[r] = {f"{'driver' if k == L.KIND_DRIVER else 'runtime'}:{c}": n
                       for (k, c), n in records.most_common(40)}
        bare.append(per["bare"])
        for r in recipes:
            results[r]["over"].append(per[r] - per["bare"])
        print(f"round {rnd}: bare {per['bare'] * 1e3:.2f} ms/step; " +
              ", ".join(f"{r} {(per[r] - per['bare']) * 1e3:+.2f}" for r in recipes), file=sys.stderr, flush=True)

    rows = [{"case": case, "impl": "bare",
             "us_per_op": round(statistics.median(bare) * 1e6, 1), "overhead_us": None,
             "ratio_to_proton": None, "finalize_s": None}]
    print(f"{'recipe':16s} {'overhead ms/step':>16s} {'kernels/step':>12s} {'found %':>8s} {'API rec/step':>12s} "
          f"{'other CPU ms/step':>17s}")
    for r in recipes:
        res = results[r]
        over = statistics.median(res["over"])
        kernels = statistics.median(res["kernels"]) / a.steps
        found = 100.0 * sum(res["found"]) / max(1, sum(res["kernels"]))
        api = sum(hist.get(r, {}).values()) / a.steps
        other = statistics.median(res["other_cpu_s"]) / a.steps
        print(f"{r:16s} {over * 1e3:+16.3f} {kernels:12.1f} {found:8.1f} {api:12.1f} {other * 1e3:17.3f}")
        rows.append({"case": case, "impl": "proton_ctypes", "recipe": r,
                     "us_per_op": round((statistics.median(bare) + over) * 1e6, 1),
                     "overhead_us": round(over * 1e6, 1), "ratio_to_proton": None, "finalize_s": None,
                     "overhead_rounds_us": [round(x * 1e6, 1) for x in res["over"]],
                     "kernels_per_step": kernels, "launch_found_pct": round(found, 2),
                     "api_records_per_step": round(api, 2), "api_records_by_cbid": hist.get(r, {}),
                     "other_threads_cpu_ms_per_step": round(other * 1e3, 3),
                     "main_thread_cpu_ms_per_step": round(statistics.median(res["main_cpu_s"]) / a.steps * 1e3, 3),
                     # the kernels' own GPU time: a recipe slowing the kernels shows here, one
                     # leaving the GPU idle between them only in the overhead
                     "gpu_kernel_us_per_step": round(statistics.median(res["kernel_ns"]) / a.steps / 1e3, 1)})
    if a.json:
        results_file.write(a.json, rows, steps=a.steps, rounds=a.rounds)


if __name__ == "__main__":
    main()
