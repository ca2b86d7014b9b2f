"""Scope and state cost: real triton.profiler vs proton_ctypes, side by side in one process.

Run: ``python bench/scope_overhead.py [--rounds R] [--n N] [--data tree,trace] [--json PATH]``

Real Proton runs host-only through the oracle recipe (stub libcupti/libcuda, fake sm_90
driver: tests/oracle/real_proton.py).  proton_ctypes runs with the host-only backend ("host": scopes are
not logged because no kernel can need them), with the mock GPU backend ("mock": every
scope and state also appends its (time_ns, node) log entry) and with its CUPTI backend over the
tests' fake libcupti ("fake-cupti": the log entry's time comes from the launch-positions clock,
which also notes the thread's place in its activity buffer -- what a scope costs under CUPTI on
a GPU, less the launches).  Rounds
interleave the implementations; the figure is the median over rounds of ns per
operation (loop included), and the ratio is ours / Proton's of the same round.

The cases ``... around a launch`` put a launch of the fake libcupti inside every scope or state
and subtract the same launches with none around them, chunk by chunk: what a scope costs
when a launch runs between its edges, as on a GPU, where Python's caches are cold again at each
edge and (under launch positions) the edge after the launch reads the clock.  Only
``proton_ctypes[fake-cupti]``'s launches are profiled; every other implementation runs the same
Python per launch with nothing listening.

``--data`` picks the sessions' ``data=`` (both by default): the ``trace`` rows (named
``..., data=trace``) time the same loops with chrome-trace sessions, whose every scope
instance becomes a trace event.

Each round also times the same loops with the floor of ``bench/python_floor.py`` (column
``floor``; ``bare`` rows with ``"floor": "pure_python"``): the least any pure-Python profiler
does at an edge with no GPU, one thread-local access and one push, pop or store.  A goal under
that floor cannot be met by a profiler without compiled code of its own.
"""
from __future__ import annotations

import argparse
import gc
import os
import statistics
import tempfile
import time

import results_file
from cpu_common import profilers, register_fake_cupti
from python_floor import PurePythonFloor

real, ours = profilers()
fake = register_fake_cupti("fake-cupti")
#: launches per chunk in the cases around a launch (each takes the median over chunk pairs)
LAUNCH_CHUNK = 200
#: proton_ctypes's variants: the backend each starts its sessions with, and the suffix of its rows
OURS = {"proton_ctypes": ("host", ""), "proton_ctypes[mock]": ("mock", " (scope log on)"),
        "proton_ctypes[fake-cupti]": ("fake-cupti", " (scope log on, launch positions)")}
#: the floor's name in the implementations and in its rows' ``floor`` key
FLOOR = "floor:pure_python"
floor = PurePythonFloor()


def case_scope(p, n):
    scope = p.scope
    t = time.perf_counter_ns()
    for _ in range(n):
        with scope("a"):
            pass
    return time.perf_counter_ns() - t


def case_scope_metrics(p, n):
    scope = p.scope
    t = time.perf_counter_ns()
    for _ in range(n):
        with scope("a", {"m": 1}):
            pass
    return time.perf_counter_ns() - t


def case_scope_3_metrics(p, n):
    scope = p.scope
    t = time.perf_counter_ns()
    for i in range(n):
        with scope("a", {"tokens": 128, "flops": 2.5e9, "bytes (inc)": 4096}):
            pass
    return time.perf_counter_ns() - t


def case_scope_8_metrics(p, n):
    scope = p.scope
    t = time.perf_counter_ns()
    for i in range(n):
        with scope("a", {"tokens": 128, "flops": 2.5e9, "bytes (inc)": 4096, "loss": 0.5, "step (exc)": 1,
                         "lr": 3e-4, "items (inc)": 7, "time (exc)": 1.5}):
            pass
    return time.perf_counter_ns() - t


def case_enter_exit(p, n):
    enter, exit_ = p.enter_scope, p.exit_scope
    t = time.perf_counter_ns()
    for _ in range(n):
        enter("a")
        exit_()
    return time.perf_counter_ns() - t


def case_state(p, n):
    state = p.state
    t = time.perf_counter_ns()
    for _ in range(n):
        with state("s"):
            pass
    return time.perf_counter_ns() - t


def _around_launches(n, region):
    """``n`` launches of the fake libcupti, each inside ``region`` (a context-manager class
    taking a name), in chunks of :data:`LAUNCH_CHUNK` that alternate with chunks of the same
    launches outside it: the median difference of a pair, scaled to ``n`` (ns)."""
    launch = fake.launch
    clock = time.perf_counter_ns
    diffs = []
    for _ in range(max(1, n // LAUNCH_CHUNK)):
        t0 = clock()
        for _ in range(LAUNCH_CHUNK):
            launch()
        t1 = clock()
        for _ in range(LAUNCH_CHUNK):
            with region("a"):
                launch()
        diffs.append(clock() - t1 - (t1 - t0))
    return statistics.median(diffs) * n / LAUNCH_CHUNK


def case_scope_around_launch(p, n):
    return _around_launches(n, p.scope)


def case_state_around_launch(p, n):
    return _around_launches(n, p.state)


CASES = {"scope enter+exit": case_scope, "scope with 1 metric": case_scope_metrics,
         "scope with 3 metrics": case_scope_3_metrics, "scope with 8 metrics": case_scope_8_metrics,
         "enter_scope/exit_scope": case_enter_exit, "state enter+exit": case_state,
         "scope around a launch": case_scope_around_launch, "state around a launch": case_state_around_launch}

#: the ``data=`` of the sessions a row times
DATA = ("tree", "trace")


def run(impl, fn, n, sessions, tmp, data="tree"):
    if impl == "proton":
        p, kw = real, {"data": data}
    elif impl == FLOOR:
        p, kw = floor, {}
    else:
        p, kw = ours, {"backend": OURS[impl][0], "data": data}
    for i in range(sessions):
        p.start(os.path.join(tmp, f"{impl}{i}"), **kw)
    gc.collect()
    gc.disable()
    try:
        ns = fn(p, n)
    finally:
        gc.enable()
    p.finalize()
    return ns / n / 1000.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--json", default=None)
    ap.add_argument("--cases", default=None, help="comma-separated case names (default: all)")
    ap.add_argument("--data", default=",".join(DATA), help="comma-separated data kinds (default: tree,trace)")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp()
    impls = ["proton", *OURS, FLOOR]
    rows = []
    print(f"{'case':28s} {'data':>5s} {'sessions':>8s} {'proton us':>10s} {'ours us':>9s} {'ratio':>6s} "
          f"{'ours+log us':>11s} {'ratio':>6s} {'ours+positions':>14s} {'ratio':>6s} {'floor us':>9s} {'ratio':>6s}")
    wanted = a.cases.split(",") if a.cases else list(CASES)
    for data in a.data.split(","):
        for case, fn in CASES.items():
            if case not in wanted:
                continue
            for sessions in (1, 3):
                res = {i: [] for i in impls}
                for r in range(a.rounds):
                    order = impls if r % 2 == 0 else impls[::-1]
                    for impl in order:
                        res[impl].append(run(impl, fn, a.n, sessions, tmp, data))
                med = {i: statistics.median(v) for i, v in res.items()}
                ratio = {i: statistics.median([x / y for x, y in zip(res[i], res["proton"])]) for i in impls}
                print(f"{case:28s} {data:>5s} {sessions:8d} {med['proton']:10.3f} {med['proton_ctypes']:9.3f} "
                      f"{ratio['proton_ctypes']:6.2f} {med['proton_ctypes[mock]']:11.3f} "
                      f"{ratio['proton_ctypes[mock]']:6.2f} {med['proton_ctypes[fake-cupti]']:14.3f} "
                      f"{ratio['proton_ctypes[fake-cupti]']:6.2f} {med[FLOOR]:9.3f} {ratio[FLOOR]:6.2f}")
                for i in impls:
                    row = {"case": f"{case}, {sessions} session{'s' if sessions > 1 else ''}"
                                   + ("" if data == "tree" else f", data={data}")
                                   + (OURS[i][1] if i in OURS else ""),
                           "impl": "proton_ctypes" if i in OURS else "bare" if i == FLOOR else i,
                           "us_per_op": round(med[i], 4), "ratio_to_proton": round(ratio[i], 3)}
                    if i == FLOOR:
                        row["floor"] = FLOOR.split(":", 1)[1]
                    rows.append(row)
    if a.json:
        results_file.write(a.json, rows)

if __name__ == "__main__":
    main()
