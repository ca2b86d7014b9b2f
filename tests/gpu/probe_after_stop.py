"""Probe (GPU): what a launch costs after a profiling session has ended.

Proton detaches CUPTI (``cuptiFinalize``) at every session's stop, and so does proton_ctypes
since this probe found, on an H100 (2026-12-06, ``tests/gpu/results/probe_after_stop-h100.json``),
that a CUPTI kept attached and idle cost every later launch of the process +0.5 µs (Triton) and
+0.8 µs (torch); ``PROTON_CTYPES_CUPTI_FINALIZE=0`` still keeps it attached (``docs/collection.md``,
"Detaching CUPTI at stop").

Each variant runs in a child process of its own: bare launch loops (a tiny Triton kernel and a
torch ``add_``) before any session, then a short session with scopes, ``finalize``, and the same
loops again, alternating ``--reps`` times between a fresh session and the loops; per loop the
median µs per launch before and after, and the launching thread's CPU per launch; per session
its ``start`` and ``finalize`` times and its own µs per launch (what staying attached may save).

Run: ``python tests/gpu/probe_after_stop.py [LAUNCHES] [REPS]`` on a GPU machine; prints one JSON
document. Not a test: what it finds is what CUPTI does.
"""
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: the variants: (name, profiler module, extra environment)
VARIANTS = (("proton_ctypes", "proton_ctypes", {}),
            ("proton_ctypes, CUPTI kept attached", "proton_ctypes", {"PROTON_CTYPES_CUPTI_FINALIZE": "0"}),
            ("proton", "triton.profiler", {}))
#: launches of the session between two measurements (in scopes, as a user's profiled window)
SESSION_LAUNCHES = 2000
CHILD_TIMEOUT_S = 240


def _loops(launches: int):
    """``{name: (launch, sync)}``: a tiny Triton kernel and a torch ``add_``, compiled and warm."""
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def tiny(x_ptr):
        tl.store(x_ptr, 1.0)

    buf = torch.zeros(1, device="cuda")
    x = torch.zeros(1024, device="cuda")
    for _ in range(10):
        tiny[(1,)](buf)
        x.add_(1)
    torch.cuda.synchronize()
    return {"triton": lambda: tiny[(1,)](buf), "torch": lambda: x.add_(1)}, torch.cuda.synchronize


def _time(launch, sync, launches: int) -> tuple:
    """``(µs per launch wall, µs per launch of the thread's CPU)`` of ``launches`` launches."""
    sync()
    t0, c0 = time.perf_counter(), time.thread_time()
    for _ in range(launches):
        launch()
    cpu = time.thread_time() - c0
    sync()
    return (time.perf_counter() - t0) / launches * 1e6, cpu / launches * 1e6


def child(module: str, launches: int, reps: int) -> dict:
    """One variant: loops before any session, then ``reps`` times a session and the loops."""
    import importlib
    import tempfile

    loops, sync = _loops(launches)
    before = {name: [_time(fn, sync, launches) for _ in range(reps)] for name, fn in loops.items()}
    proton = importlib.import_module(module)
    after = {name: [] for name in loops}
    out = tempfile.mkdtemp()
    start_s, session_us, stop_s = [], [], []
    for r in range(reps):
        t0 = time.perf_counter()
        proton.start(os.path.join(out, f"s{r}"))
        start_s.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        for _ in range(SESSION_LAUNCHES // 2):
            with proton.scope("window"):
                loops["triton"]()
                loops["torch"]()
        sync()
        session_us.append((time.perf_counter() - t0) / SESSION_LAUNCHES * 1e6)
        t0 = time.perf_counter()
        proton.finalize()
        stop_s.append(time.perf_counter() - t0)
        for name, fn in loops.items():
            after[name].append(_time(fn, sync, launches))
    # what staying attached may save: a session's start, and its launches (the first ones
    # included: CUPTI attached afresh may prepare each kernel again)
    res = {"start_s": round(statistics.median(start_s), 4), "finalize_s": round(statistics.median(stop_s), 4),
           "session_us_per_launch": [round(u, 3) for u in session_us]}
    for name in loops:
        b_wall = statistics.median(w for w, _ in before[name])
        a_wall = statistics.median(w for w, _ in after[name])
        b_cpu = statistics.median(c for _, c in before[name])
        a_cpu = statistics.median(c for _, c in after[name])
        res[name] = {"us_before": round(b_wall, 3), "us_after": round(a_wall, 3),
                     "us_after_minus_before": round(a_wall - b_wall, 3),
                     "cpu_us_after_minus_before": round(a_cpu - b_cpu, 3)}
    return res


def main(launches: int, reps: int) -> dict:
    doc = {"launches": launches, "reps": reps, "variants": {}}
    for name, module, env in VARIANTS:
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", module, str(launches), str(reps)],
                           capture_output=True, text=True, timeout=CHILD_TIMEOUT_S,
                           env={**os.environ, **env, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")})
        if p.returncode != 0:
            doc["variants"][name] = {"error": p.stderr[-1500:]}
            continue
        doc["variants"][name] = json.loads(p.stdout.strip().splitlines()[-1])
    return doc


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        print(json.dumps(child(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))))
    else:
        args = [int(a) for a in sys.argv[1:3]]
        print(json.dumps(main(*(args + [20000, 5][len(args):])), indent=1))
