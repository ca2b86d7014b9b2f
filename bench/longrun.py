"""A long run: millions of launches under two nested repeating scopes, one session, tree data.

Run on the H200 (one invocation does everything)::

    python bench/longrun.py --launches 3000000 --rounds 1 --json bench/results/longrun-h200.json

A tiny Triton kernel is launched ``--launches`` times, each launch inside
``with scope("layer")``, :data:`LAYERS` of them inside each ``with scope("step")``, with no
user flush until ``finalize``.  Each implementation runs in its own process (``--worker``),
which first times a bare loop (no profiler, no scope) of ``--bare-launches`` launches, so every
profiled figure is paired with a bare one of the same process; the processes alternate round by
round.  Along the profiled loop the worker samples its resident memory (``/proc/self/statm``)
every ``--sample-every`` launches and, at the end, the CPU time of every thread but the launching
one (``/proc/self/task/*/stat``: the profiler's collector and flush threads, and CUPTI's own),
also by thread name (``other_threads_cpu_s_by_name``: a Python thread's name, else ``native:<comm>``).

Per implementation: ``us_per_op`` (profiled wall / launches), ``overhead_us`` (minus the bare
figure), ``ratio_to_proton``, ``finalize_s``, ``kernels`` counted in the written file against
``expected_kernels``, ``rss_growth_mb_per_million`` (the slope of resident memory after the first
``--warm-launches``, read off the floor of the samples, see :func:`slope_per_million`; the ``bare``
row's is that of the bare loops, the launches' own growth with no profiler) and
``flush_cpu_us_per_kernel``; ``us_per_launch_first_last_window`` (per round: the microseconds per launch
of the first stretch of ``--sample-every`` launches after the first one, and of the last one; the
JSON file keeps every stretch in ``us_per_launch_every_round``): whether a launch costs more late in
a long run than early; ``launcher_cpu_overhead_us`` (the launching thread's own CPU per launch,
profiled minus bare: what of ``overhead_us`` the thread spent computing rather than waiting, for
the GIL or otherwise) and, per round, its ``getrusage`` per launch in the bare and the profiled
loop (``launcher_usage_per_launch_every_round``: user and system µs, minor faults, voluntary and
involuntary context switches -- a GIL handed back and forth shows as switches and system time); for
proton_ctypes also the scope-log entries its views hold at the end of the loop and its activity
buffers then (``buffers_at_end``).

``--impls`` may name ``proton_ctypes:env:NAME=VALUE`` (``bench/variants.py``): proton_ctypes with
one diagnostic switch set, in the same interleaved rounds.
``--impls`` may add ``floor:kernels``, ``floor:per_thread``, ``floor:ours`` and ``floor:pylog``
(``bench/cupti_floor.py``): CUPTI switched on with no profiler around it, the same scopes doing
nothing.  Both profilers' resident memory grows on the H200 by about as much per million launches;
these rows say how much of it is CUPTI's own (and the driver's), whatever the profiler does.
They are ``bare`` rows with a ``floor`` key (no profile, so no kernel count).  A floor hands its
buffers back only at ``finalize`` unless ``--floor-flush-s`` makes it flush CUPTI as often as a
profiler's collector does; then the growth left is CUPTI's own.

``--backend mock`` runs proton_ctypes with its mock GPU backend on a CPU (a smoke run of this
script: the "kernel" is ``MockBackend.launch`` and a thread plays the collector's timer); its
figures say nothing about a GPU.  ``--backend fake-cupti`` runs proton_ctypes's CUPTI backend
over the tests' fake libcupti (``tests/fakes``: real record layouts, a buffer per launching
thread): the collector, parser and join are the real ones, so ``flush_cpu_us_per_kernel`` is
their CPU per kernel on this machine (plus the fake's own completion thread, a few percent).
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
from cpu_common import fake_cupti, register_fake_cupti  # noqa: E402
from attribution import (other_threads_cpu_s, thread_cpu_s, thread_names, thread_usage,  # noqa: E402
                         usage_per_launch)  # (one copy)
import results_file  # noqa: E402
from proton_overlay import real_proton  # noqa: E402
from threads import KERNEL, count_kernels  # noqa: E402
import variants  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IMPLS = ("proton", "proton_ctypes")
#: ``layer`` scopes (one launch each) per ``step`` scope
LAYERS = 10
#: --backend mock: seconds between the collector thread's timed flushes (CUPTI's periodic flush)
MOCK_FLUSH_INTERVAL_S = 0.1
#: the backends that run on a CPU, by their --backend name (the name the session starts with)
CPU_BACKENDS = {"mock": "mock", "fake-cupti": "cupti"}
PAGE_MB = os.sysconf("SC_PAGE_SIZE") / 2.0 ** 20
#: the CUPTI backend's buffer figures reported at the end of the loop (``buffers_at_end``)
BUFFER_STATS = ("buffers_allocated", "buffer_bytes", "buffers_peak_out", "buffer_requests")
#: samples after the warm-up from which the RSS growth is read off its floor (:func:`slope_per_million`)
MIN_FLOOR_SAMPLES = 8
#: the bare loop's memory slope is read after this fraction of it (1/N), however short it is
BARE_WARM_PART = 3


def rss_mb() -> float:
    """Resident memory of this process now (MB)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE_MB


def slope_per_million(samples: list, warm: int) -> float:
    """MB per million launches of the ``(launches, rss_mb)`` samples taken at or after ``warm``:
    from the floor of the first half to the floor of the second half (the memory whatever its
    ups and downs), over the distance between the halves' middles, or the least-squares slope
    of all of them when there are fewer than :data:`MIN_FLOOR_SAMPLES`; None with fewer than
    two.  Memory between two trims of the scope logs rises and falls (a sawtooth of tens of
    MB): a fit through every sample reads where the run stopped in it as growth.  A half's
    floor is its lower quartile, not its lowest sample, and the distance is the halves', not
    their lowest samples': one dip (a buffer freed) close to the middle would otherwise read as
    a steep slope."""
    pts = [(n, mb) for n, mb in samples if n >= warm]
    if len(pts) >= MIN_FLOOR_SAMPLES:
        half = len(pts) // 2
        first, second = pts[:half], pts[-half:]      # as many samples each (the middle one left out)
        floors = [statistics.quantiles([mb for _, mb in part], n=4, method="inclusive")[0] for part in (first, second)]
        middles = [statistics.fmean(n for n, _ in part) for part in (first, second)]
        if middles[1] > middles[0]:
            return (floors[1] - floors[0]) / (middles[1] - middles[0]) * 1e6
    if len(pts) < 2:
        return None
    mx = statistics.fmean(n for n, _ in pts)
    my = statistics.fmean(mb for _, mb in pts)
    den = sum((n - mx) ** 2 for n, _ in pts)
    return sum((n - mx) * (mb - my) for n, mb in pts) / den * 1e6 if den else None


def profiler(impl: str, backend: str, floor_flush_s: float = 0.0):
    """The profiler module that implementation ``impl`` names (``proton``, ``proton_ctypes`` or a
    ``floor:`` recipe), ready to start sessions on ``backend`` (``gpu`` or one of :data:`CPU_BACKENDS`)."""
    if impl == "proton":
        return real_proton()   # the installed Proton, or a newer one's (proton_overlay)
    sys.path.insert(0, ROOT)
    if impl.startswith("floor:"):
        from cupti_floor import floor_profiler
        if backend != "fake-cupti":
            return floor_profiler(impl, flush_interval_s=floor_flush_s)
        from proton_ctypes.backends.nvidia.lib import load_cupti
        return floor_profiler(impl, lib=load_cupti(fake_cupti()), flush_interval_s=floor_flush_s)
    import proton_ctypes as proton
    if backend == "mock":
        from proton_ctypes.backends import select
        from proton_ctypes.backends.mock import MockBackend
        select.register("mock", MockBackend)
    elif backend == "fake-cupti":
        register_fake_cupti("cupti")
    return proton


def gpu_launcher():
    """A launch of a tiny Triton kernel (compiled and warmed up), and the device sync."""
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def tiny(x_ptr):
        tl.store(x_ptr, 1.0)

    buf = torch.zeros(1, device="cuda")
    tiny[(1,)](buf)
    torch.cuda.synchronize()
    return (lambda: tiny[(1,)](buf)), torch.cuda.synchronize


def scoped_loop(scope, launch, launches: int, sample_every: int, samples: list, windows: list = None) -> None:
    """``launches`` launches, each in a ``layer`` scope, LAYERS per ``step`` scope (``scope`` None:
    no scopes); a resident-memory sample every ``sample_every`` launches (between two steps),
    and, into ``windows``, the microseconds per launch of each such stretch."""
    done = 0
    while done < launches:
        t0 = time.perf_counter()
        chunk = min(sample_every, launches - done)
        steps, rest = divmod(chunk, LAYERS)
        if scope is None:
            for _ in range(chunk):
                launch()
        else:
            for _ in range(steps):
                with scope("step"):
                    for _ in range(LAYERS):
                        with scope("layer"):
                            launch()
            if rest:
                with scope("step"):
                    for _ in range(rest):
                        with scope("layer"):
                            launch()
        done += chunk
        if windows is not None:
            windows.append((time.perf_counter() - t0) / chunk * 1e6)
        samples.append((done, rss_mb()))


def profile_drains(path: str):
    """``--profile-drains``: run every drain of our CUPTI collector under one cProfile profile;
    returns the function that writes its 40 heaviest functions (by own time) to ``path``.  Times
    are the collector thread's CPU (``time.thread_time``), not wall time: a numpy call that lets
    the GIL go waits for the launching thread to give it back, which wall time would count."""
    import cProfile
    import pstats
    from proton_ctypes.backends.nvidia.collector import Collector

    prof, drain = cProfile.Profile(time.thread_time), Collector.drain

    def profiled(self, *args, **kwargs):
        prof.enable()
        try:
            return drain(self, *args, **kwargs)
        finally:
            prof.disable()
    Collector.drain = profiled

    def write() -> None:
        with open(path, "w") as f:
            pstats.Stats(prof, stream=f).sort_stats("tottime").print_stats(40)
    return write


def worker(impl: str, backend: str, launches: int, bare_launches: int, sample_every: int, warm: int,
           drains_profile: str = None, floor_flush_s: float = 0.0) -> dict:
    """One process: a bare loop, then the profiled one; returns the figures."""
    kind = variants.apply(impl)            # proton_ctypes:env:NAME=VALUE sets its switch first
    proton = profiler(kind, backend, floor_flush_s)
    write_profile = profile_drains(drains_profile) if drains_profile and kind == "proton_ctypes" else None
    collector = None
    if backend == "mock":
        from proton_ctypes.backends import select
        mock = select.get("mock")
        launch, sync = (lambda: mock.launch(KERNEL)), (lambda: None)
    elif backend == "fake-cupti":
        fake = fake_cupti()
        launch, sync = (lambda: fake.launch(KERNEL)), (lambda: None)
    else:
        launch, sync = gpu_launcher()
    on_cpu = backend in CPU_BACKENDS
    bare_samples = [(0, rss_mb())]
    t0, c0, u0 = time.perf_counter(), time.thread_time(), thread_usage()
    scoped_loop(None, (lambda: None) if on_cpu else launch, bare_launches, sample_every, bare_samples)
    sync()
    bare_s, bare_cpu_s = time.perf_counter() - t0, time.thread_time() - c0
    bare_usage = usage_per_launch(u0, thread_usage(), bare_launches)
    out = os.path.join(tempfile.mkdtemp(), "longrun")
    me = threading.get_native_id()
    floor = impl.startswith("floor:")
    proton.start(out, data="tree", **({"backend": CPU_BACKENDS[backend]} if on_cpu else {}))
    if backend == "mock":
        stop = threading.Event()

        def timer():
            while not stop.wait(MOCK_FLUSH_INTERVAL_S):
                mock.timed_flush()
        collector = threading.Thread(target=timer, daemon=True)
        collector.start()
    cpu0 = thread_cpu_s()
    samples = [(0, rss_mb())]
    windows = []
    t0, c0, u0 = time.perf_counter(), time.thread_time(), thread_usage()
    scoped_loop(proton.scope, launch, launches, sample_every, samples, windows)
    sync()
    wall_s, launcher_cpu_s = time.perf_counter() - t0, time.thread_time() - c0
    usage = usage_per_launch(u0, thread_usage(), launches)
    cpu1 = thread_cpu_s()
    names = thread_names()               # before finalize: the profiler's threads still live
    entries, buffers = None, None
    if kind == "proton_ctypes":
        from proton_ctypes.core import retention
        from proton_ctypes.core.registry import G
        entries = retention.retained_entries()
        # the activity buffers held now (CUPTI's records are written into our memory)
        stats = [s.backend.stats for s in G.sessions.values() if hasattr(s.backend, "stats")]
        buffers = {k: stats[0].get(k) for k in BUFFER_STATS} if stats else None
    if collector is not None:
        stop.set()
        collector.join()
    t0 = time.perf_counter()
    proton.finalize()
    finalize_s = time.perf_counter() - t0
    if write_profile is not None:
        write_profile()
    others = sum(c - cpu0.get(tid, 0.0) for tid, c in cpu1.items() if tid != me)
    by_name = {name: round(s, 3) for name, s in other_threads_cpu_s(cpu0, cpu1, names, me).items()}
    kernels = None if floor else count_kernels(out + ".hatchet", "tree")
    return {"impl": impl, "bare_s": bare_s, "bare_launches": bare_launches, "wall_s": wall_s,
            "finalize_s": finalize_s, "kernels": kernels, "expected": launches, "rss_samples": samples,
            "us_per_launch_every_window": windows, "bare_cpu_s": bare_cpu_s, "launcher_cpu_s": launcher_cpu_s,
            "launcher_usage_per_launch": usage, "bare_usage_per_launch": bare_usage,
            "rss_growth_mb_per_million": slope_per_million(samples, warm),
            "bare_rss_growth_mb_per_million": slope_per_million(bare_samples,
                                                                min(warm, bare_launches // BARE_WARM_PART)),
            "other_threads_cpu_s": others, "flush_cpu_us_per_kernel": others / max(kernels or launches, 1) * 1e6,
            "other_threads_cpu_s_by_name": by_name,
            "log_entries_at_end": entries, "buffers_at_end": buffers}


def _first_last(windows: list) -> list:
    """``[first, last]`` of a run's per-window microseconds per launch (the first window after the
    warm-up when there are more than two): whether a launch costs more late in a long run."""
    if not windows:
        return []
    return [round(windows[1 if len(windows) > 2 else 0], 3), round(windows[-1], 3)]


def interleaved(script: str, impls: list, rounds: int, args: list, note) -> dict:
    """``{impl: [result, ...]}``: ``rounds`` rounds of one ``python script ... --worker impl``
    process per implementation, the order reversed every other round; each worker prints its
    result as the last line of JSON.  ``note(round, impl, result)`` is printed after each one
    (a failed worker's stderr instead, and no result)."""
    runs = {i: [] for i in impls}
    for r in range(rounds):
        for impl in (impls if r % 2 == 0 else impls[::-1]):
            p = subprocess.run([sys.executable, os.path.abspath(script)] + args + ["--worker", impl],
                               capture_output=True, text=True)
            if p.returncode != 0:
                print(f"round {r} {impl}: failed\n{p.stderr[-2000:]}", file=sys.stderr)
                continue
            res = json.loads(p.stdout.strip().splitlines()[-1])
            runs[impl].append(res)
            print(f"round {r} {impl:14s} {note(res)}", file=sys.stderr)
    return runs


def run(a) -> list:
    """Every round of every implementation; prints and returns the rows."""
    args = ["--backend", a.backend, "--launches", str(a.launches), "--bare-launches", str(a.bare_launches),
            "--sample-every", str(a.sample_every), "--warm-launches", str(a.warm_launches)]
    if a.profile_drains:
        args += ["--profile-drains", a.profile_drains]
    if a.floor_flush_s:
        args += ["--floor-flush-s", str(a.floor_flush_s)]
    runs = interleaved(__file__, a.impls.split(","), a.rounds, args, lambda res: (
        f"bare {res['bare_s']:.2f} s ({res['bare_launches']}) profiled {res['wall_s']:.2f} s kernels "
        f"{res['kernels']}/{res['expected']} rss {res['rss_growth_mb_per_million']} MB/M "
        f"cpu {res['other_threads_cpu_s']:.2f} s"))
    case = f"{a.launches} launches, scopes step/layer, one session, data=tree" + {
        "mock": ", mock backend (CPU smoke run)", "fake-cupti": ", CUPTI backend over the fake libcupti (CPU)"
    }.get(a.backend, "")
    bare_us = [x["bare_s"] / x["bare_launches"] * 1e6 for rs in runs.values() for x in rs]
    rows = []
    if bare_us:
        bare_growth = [x["bare_rss_growth_mb_per_million"] for rs in runs.values() for x in rs
                       if x.get("bare_rss_growth_mb_per_million") is not None]
        rows.append({"case": case, "impl": "bare", "us_per_op": round(statistics.median(bare_us), 3),
                     "overhead_us": None, "ratio_to_proton": None, "finalize_s": None,
                     "rss_growth_mb_per_million": round(statistics.median(bare_growth), 2) if bare_growth else None})
    overhead = {i: statistics.median([(x["wall_s"] / x["expected"] - x["bare_s"] / x["bare_launches"]) * 1e6
                                      for x in rs]) for i, rs in runs.items() if rs}
    for impl, rs in runs.items():
        if not rs:
            continue
        ref = overhead.get("proton")
        growth = [x["rss_growth_mb_per_million"] for x in rs if x["rss_growth_mb_per_million"] is not None]
        floor = impl.split(":", 1)[1] if impl.startswith("floor:") else None
        rows.append({
            "case": case, **variants.row_fields(impl),
            "us_per_op": round(statistics.median([x["wall_s"] / x["expected"] * 1e6 for x in rs]), 3),
            "overhead_us": round(overhead[impl], 3),
            "ratio_to_proton": round(overhead[impl] / ref, 3) if ref else None,
            "finalize_s": round(statistics.median([x["finalize_s"] for x in rs]), 4),
            "launches": a.launches, "kernels": None if floor else min(x["kernels"] for x in rs),
            "expected_kernels": a.launches,
            "rss_growth_mb_per_million": round(statistics.median(growth), 2) if growth else None,
            "flush_cpu_us_per_kernel": round(statistics.median([x["flush_cpu_us_per_kernel"] for x in rs]), 3),
            "launcher_cpu_overhead_us": round(statistics.median(
                [(x["launcher_cpu_s"] / x["expected"] - x["bare_cpu_s"] / x["bare_launches"]) * 1e6 for x in rs]), 3),
            "launcher_usage_per_launch_every_round": [
                [x.get("bare_usage_per_launch"), x.get("launcher_usage_per_launch")] for x in rs],
            "log_entries_at_end": [x["log_entries_at_end"] for x in rs],
            "buffers_at_end": [x["buffers_at_end"] for x in rs],
            "other_threads_cpu_s_by_name": [x["other_threads_cpu_s_by_name"] for x in rs],
            "rss_mb_every_round": [[(n, round(mb, 1)) for n, mb in x["rss_samples"]] for x in rs],
            "us_per_launch_every_round": [[round(us, 3) for us in x["us_per_launch_every_window"]] for x in rs],
            "us_per_launch_first_last_window": [_first_last(x["us_per_launch_every_window"]) for x in rs]})
    for row in rows:
        print(json.dumps({k: v for k, v in row.items() if not k.endswith("_every_round")}))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--launches", type=int, default=3_000_000)
    ap.add_argument("--bare-launches", type=int, default=None,
                    help="launches of the bare loop (default: the profiled count, at most 1 000 000)")
    ap.add_argument("--sample-every", type=int, default=100_000, help="launches between two RSS samples")
    ap.add_argument("--warm-launches", type=int, default=None,
                    help="RSS growth is fitted after this many launches (default: 1 000 000, "
                         "a third of the run when shorter)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--backend", choices=("gpu",) + tuple(CPU_BACKENDS), default="gpu")
    ap.add_argument("--impls", default=None, help="default: proton,proton_ctypes (on a CPU: proton_ctypes)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--profile-drains", metavar="FILE", default=None,
                    help="proton_ctypes's collector drains under cProfile: the heaviest functions to FILE")
    ap.add_argument("--floor-flush-s", type=float, default=0.0,
                    help="floor rows: flush CUPTI every this many seconds, as a collector does (0: never)")
    ap.add_argument("--worker", metavar="IMPL", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.bare_launches is None:
        a.bare_launches = min(a.launches, 1_000_000)
    if a.warm_launches is None:
        a.warm_launches = 1_000_000 if a.launches >= 2_000_000 else a.launches // 3
    if a.worker:
        print(json.dumps(worker(a.worker, a.backend, a.launches, a.bare_launches, a.sample_every,
                                a.warm_launches, a.profile_drains, a.floor_flush_s)))
        return
    if a.impls is None:
        a.impls = "proton_ctypes" if a.backend in CPU_BACKENDS else ",".join(IMPLS)
    rows = run(a)
    if a.json:
        results_file.write(a.json, rows)


if __name__ == "__main__":
    main()
