"""Launch-hook cost on the host: real triton.profiler vs proton_ctypes, side by side in one process.

Run: ``python bench/hook_overhead.py [--rounds R] [--n N] [--json PATH]``

Each operation is what Triton's launcher does around one launch of a kernel with
``launch_metadata``: Triton's own ``launch_enter_hook`` chain called with a real
``LazyDict``, then ``launch_exit_hook`` (no kernel runs).  Real Proton runs host-only
through the oracle recipe (tests/oracle/real_proton.py); proton_ctypes runs with the host backend and with
the mock GPU backend ("+log": every op is also logged for the kernel join, as under
CUPTI).  Two references with no profiler: the empty chains ("bare") and a hook that only
evaluates the metadata (the least any launch-metadata hook does).  Rounds interleave
the implementations; figures are medians over rounds of µs per operation, "over bare"
subtracts the bare figure of the same round, the ratio is ours / Proton's over bare.
"""
from __future__ import annotations

import argparse
import gc
import os
import statistics
import tempfile
import time

import results_file
from cpu_common import profilers

real, ours = profilers()
from triton import knobs  # noqa: E402
from triton.compiler.compiler import LazyDict  # noqa: E402

IMPLS = ("bare", "metadata only", "proton", "proton_ctypes", "proton_ctypes+log")
#: the results file's ``impl`` field of each implementation (the rest goes into ``case``)
IMPL_FIELD = {"bare": "bare", "metadata only": "bare", "proton": "proton", "proton_ctypes": "proton_ctypes",
              "proton_ctypes+log": "proton_ctypes"}


def _meta(grid, metadata, args):
    return {"name": "tiny_meta", "flops32": 1024.0, "bytes": 8192}


def _metadata(n, name):
    """``n`` launch metadata objects as Triton builds them for kernel ``name``."""
    out = []
    for _ in range(n):
        md = LazyDict({"name": name, "function": 0x7F0000001000, "stream": 0})
        md.add(_meta, ((1,), None, {}))
        out.append(md)
    return out


def _loop(mds) -> float:
    enter, exit_ = knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook
    gc.collect()
    gc.disable()
    try:
        t = time.perf_counter_ns()
        for md in mds:
            enter(md)
            exit_(md)
        return (time.perf_counter_ns() - t) / len(mds) / 1000.0
    finally:
        gc.enable()


def run(impl, n, exclude, tmp) -> float:
    """µs per launch of ``n`` launches under ``impl``."""
    mds = _metadata(n, "tiny")
    if impl == "bare":
        return _loop(mds)
    if impl == "metadata only":
        fn = LazyDict.get
        knobs.runtime.launch_enter_hook.add(fn)
        try:
            return _loop(mds)
        finally:
            knobs.runtime.launch_enter_hook.remove(fn)
    p = real if impl == "proton" else ours
    kw = {} if impl == "proton" else {"backend": "mock" if impl.endswith("+log") else "host"}
    p.hooks.LaunchHook().configure(exclude=exclude)
    p.start(os.path.join(tmp, impl.replace("+", "_")), hook="triton", **kw)
    try:
        with p.scope("run"):
            return _loop(mds)
    finally:
        p.finalize()
        p.hooks.LaunchHook().configure()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp()
    rows = []
    print(f"{'case':30s} {'impl':18s} {'us/op':>7s} {'over bare':>9s} {'vs Proton':>9s}")
    for case, exclude in (("launch_metadata", None), ("kernel excluded by name", "tiny.*")):
        res = {i: [] for i in IMPLS}
        for r in range(a.rounds):
            order = IMPLS if r % 2 == 0 else IMPLS[::-1]
            for impl in order:
                res[impl].append(run(impl, a.n, exclude, tmp))
        over = {i: [x - b for x, b in zip(res[i], res["bare"])] for i in IMPLS}
        for impl in IMPLS:
            suffix = {"metadata only": " (a hook evaluating the metadata only)",
                      "proton_ctypes+log": " (op log on)"}.get(impl, "")
            row = {"case": f"hook, {case}{suffix}", "impl": IMPL_FIELD[impl],
                   "us_per_op": round(statistics.median(res[impl]), 4)}
            if impl != "bare":
                row["overhead_us"] = round(statistics.median(over[impl]), 4)
            if impl.startswith("proton_ctypes"):
                row["ratio_to_proton"] = round(statistics.median(
                    [x / y for x, y in zip(over[impl], over["proton"]) if y > 0]), 3)
            rows.append(row)
            print(f"{'hook, ' + case:30s} {impl:18s} {row['us_per_op']:7.3f} "
                  f"{row.get('overhead_us', 0):+9.3f} {row.get('ratio_to_proton', float('nan')):9.2f}")
    if a.json:
        results_file.write(a.json, rows)

if __name__ == "__main__":
    main()
