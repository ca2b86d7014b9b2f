"""The collector's CPU per kernel, drain by drain, with nothing else running -- or beside a busy thread.

A CPU diagnostic, not a comparison with Proton: it runs proton_ctypes's CUPTI backend over the
tests' fake libcupti (``tests/fakes``), with the collector thread left unstarted.  The calling
thread launches ``--launches`` kernels, each in a ``layer`` scope, :data:`LAYERS` per ``step``
scope, and after every ``--every`` launches it runs one drain itself, as the collector would
(``Collector.drain(hold=True)``); before the last one it flushes CUPTI, so every kernel is
drained under the clock.  Only the drains are timed, on the thread's CPU clock
(``time.thread_time``).  The figures are CPU nanoseconds per kernel, one per repetition, and the
best of them; and, over all repetitions, the drains' wall time and their voluntary context switches
(``getrusage(RUSAGE_THREAD)``: each is a wait, for the GIL above all).

``--graph`` replays a CUDA graph of :data:`GRAPH_KERNELS` kernels (captured and instantiated
once, in the session) where the loop launched one kernel: the drains then attribute replayed
kernels (by graph node, not by launch position), as in ``bench/overhead.py``'s graph case; the
figures stay per kernel.

``--busy`` starts a Python thread that only reads the clock, for the whole run. It shows how much a
drain's CPU grows when it shares the machine with a thread that wants the GIL, as the
launching threads do on a GPU, and what the busy thread loses to the drains: the sum of its
waits over :data:`BUSY_GAP_S` (for the GIL, above all) while a drain runs, per kernel drained.
``--profile FILE`` writes the drains' heaviest functions (by own CPU) to ``FILE``.

    python bench/drain_cpu.py                 # alone
    python bench/drain_cpu.py --busy          # beside a busy Python thread
    python bench/drain_cpu.py --graph         # replayed graph kernels
"""
from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import resource
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cpu_common import proton_ctypes_with_mock, register_fake_cupti  # noqa: E402
from longrun import LAYERS  # noqa: E402
from overhead_cases import GRAPH_KERNELS  # noqa: E402  (the graph --graph replays: bench/overhead.py's case)

#: seconds the fake's completion thread gets to hand back the buffers filled before a drain
SETTLE_S = 0.05
#: a gap between two clock reads of the busy thread longer than this is a wait (one read takes
#: well under a microsecond)
BUSY_GAP_S = 20e-6
#: functions listed by ``--profile``
PROFILE_LINES = 45


def _busy(stop: threading.Event, lost: list) -> None:
    """Read the clock until ``stop``; add every gap between two reads longer than
    :data:`BUSY_GAP_S` to ``lost[0]`` (seconds)."""
    clock = time.perf_counter
    last = clock()
    while not stop.is_set():
        now = clock()
        if now - last > BUSY_GAP_S:
            lost[0] += now - last
        last = now


def run(launches: int, every: int, reps: int, busy: bool = False, profile: str = None, graph: bool = False) -> dict:
    """``{"cpu_ns_per_kernel": [one per repetition], "wall_s", "switches", "busy_lost_ns_per_kernel":
    [one per repetition, with ``busy``]}`` of the drains."""
    proton = proton_ctypes_with_mock()       # this checkout's proton_ctypes, importable from here on
    from proton_ctypes._heap import raise_thresholds
    from proton_ctypes.backends import select
    from proton_ctypes.backends.nvidia.collector import Collector

    fake = register_fake_cupti("cupti")
    start_thread = Collector.start_thread
    Collector.start_thread = lambda self, *args, **kwargs: None     # the drains run on this thread
    raise_thresholds()                       # ... which does first what the collector thread does
    stop = threading.Event()
    lost = [0.0]
    if busy:
        threading.Thread(target=_busy, args=(stop, lost), daemon=True).start()
    prof = cProfile.Profile(time.thread_time) if profile else None
    out = {"cpu_ns_per_kernel": [], "wall_s": 0.0, "switches": 0, "busy_lost_ns_per_kernel": []}
    try:
        for _ in range(reps):
            proton.start(os.path.join(tempfile.mkdtemp(), "drain_cpu"), backend="cupti")
            collector, scope, cpu, done, waited = select.get("cupti").collector, proton.scope, 0.0, 0, 0.0
            if graph:
                graph_exec = fake.instantiate(fake.capture(["tiny"] * GRAPH_KERNELS))
                launch, per_launch = (lambda: fake.replay(graph_exec)), GRAPH_KERNELS
            else:
                launch, per_launch = (lambda: fake.launch("tiny")), 1
            while done < launches:
                for _step in range(every // LAYERS // per_launch):
                    with scope("step"):
                        for _layer in range(LAYERS):
                            with scope("layer"):
                                launch()
                done += every // LAYERS // per_launch * LAYERS * per_launch
                if done >= launches:         # the last drain takes every kernel, as at finalize
                    collector.lib.flush_all()
                time.sleep(SETTLE_S)
                c0, w0, lost0 = time.thread_time(), time.perf_counter(), lost[0]
                s0 = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw
                if prof is not None:
                    prof.enable()
                collector.drain(hold=True)
                if prof is not None:
                    prof.disable()
                cpu += time.thread_time() - c0
                waited += lost[0] - lost0
                out["wall_s"] += time.perf_counter() - w0
                out["switches"] += resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw - s0
            proton.finalize()
            out["cpu_ns_per_kernel"].append(cpu / done * 1e9)
            if busy:
                out["busy_lost_ns_per_kernel"].append(waited / done * 1e9)
    finally:
        stop.set()
        Collector.start_thread = start_thread
    if prof is not None:
        with open(profile, "w") as f:
            pstats.Stats(prof, stream=f).sort_stats("tottime").print_stats(PROFILE_LINES)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--launches", type=int, default=300_000)
    ap.add_argument("--every", type=int, default=60_000, help="launches between two drains")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--busy", action="store_true", help="a busy Python thread runs beside the drains")
    ap.add_argument("--profile", metavar="FILE")
    ap.add_argument("--graph", action="store_true", help=f"replay a graph of {GRAPH_KERNELS} kernels per launch")
    a = ap.parse_args()
    out = run(a.launches, a.every, a.reps, a.busy, a.profile, a.graph)
    per_rep = out["cpu_ns_per_kernel"]
    what = " (replayed graph kernels)" if a.graph else ""
    print(f"drain CPU, ns per kernel{what}{' (beside a busy thread)' if a.busy else ''}: "
          f"{[round(x) for x in per_rep]}, best {min(per_rep):.0f}; drains' wall {out['wall_s']:.2f} s, "
          f"voluntary context switches {out['switches']}")
    if a.busy:
        print(f"the busy thread's waits while the drains ran, ns per kernel: "
              f"{[round(x) for x in out['busy_lost_ns_per_kernel']]}")


if __name__ == "__main__":
    main()
