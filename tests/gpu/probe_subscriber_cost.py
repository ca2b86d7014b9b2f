"""Probe (GPU): what a CUPTI callback subscriber charges each launch, in one process.

Across processes the device hosts drift by more than a microsecond per launch (bare loops of the
same process 10 to 17 µs per launch apart, ``bench/results/longrun-subscriber-h100.json``), so
the floors of ``bench/cupti_floor.py`` run in separate processes cannot resolve what a
subscriber costs.  Here one process switches between the configurations chunk by chunk, so
that drift falls on all of them alike:

* ``bare``: CUPTI detached (``cuptiFinalize``);
* ``per_thread``: kernel records in per-thread buffers (the CUPTI setup of launch positions);
* ``subscribed``: ``per_thread`` plus a subscriber (``cuptiSubscribe``) with no callback on;
* ``callbacks``: ``subscribed`` with the callbacks proton_ctypes switches on in the shadow
  context (graph-node resources, graph launches, stream captures), their callback empty.

Every round visits each configuration once (in a rotating order) and launches a tiny Triton
kernel ``LAUNCHES`` times in it, the queue drained before and after; per configuration the
median over rounds of µs per launch and of the launching thread's CPU µs per launch, and each
configuration's median difference from ``bare`` within a round.

Run: ``python tests/gpu/probe_subscriber_cost.py [LAUNCHES] [ROUNDS]`` on a GPU machine;
prints one JSON document.  Not a test: what it finds is what CUPTI does.
"""
import json
import statistics
import sys
import time

import probe_common  # noqa: F401  (import paths)
from cupti_floor import Floor  # noqa: E402  (bench/)

CONFIGS = ("bare", "per_thread", "subscribed", "callbacks")
LAUNCHES, ROUNDS = 20_000, 12


def main() -> None:
    launches = int(sys.argv[1]) if len(sys.argv) > 1 else LAUNCHES
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else ROUNDS
    from longrun import gpu_launcher
    launch, sync = gpu_launcher()
    floors = {name: Floor(name) for name in CONFIGS if name != "bare"}
    for _ in range(launches):           # warm: the first loop of a process is slower
        launch()
    sync()
    wall = {c: [] for c in CONFIGS}
    cpu = {c: [] for c in CONFIGS}
    for r in range(rounds):
        order = CONFIGS[r % len(CONFIGS):] + CONFIGS[:r % len(CONFIGS)]
        for name in order:
            floor = floors.get(name)
            if floor is not None:
                floor.start()
            sync()
            t0, c0 = time.perf_counter(), time.thread_time()
            for _ in range(launches):
                launch()
            sync()
            wall[name].append((time.perf_counter() - t0) / launches * 1e6)
            cpu[name].append((time.thread_time() - c0) / launches * 1e6)
            if floor is not None:
                floor.finalize()
    out = {"launches_per_chunk": launches, "rounds": rounds, "configs": {}}
    for name in CONFIGS:
        out["configs"][name] = {
            "us_per_launch": round(statistics.median(wall[name]), 3),
            "cpu_us_per_launch": round(statistics.median(cpu[name]), 3),
            "minus_bare_us": round(statistics.median([w - b for w, b in zip(wall[name], wall["bare"])]), 3),
            "cpu_minus_bare_us": round(statistics.median([w - b for w, b in zip(cpu[name], cpu["bare"])]), 3),
            "every_round_us": [round(x, 3) for x in wall[name]]}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
