"""Probe (GPU): what a graph replay costs with our metric kernels inside, by where the bank
they read lives (issue 21's "graph replay with device-tensor metrics" case).

Each metric kernel captured in a graph (``core/graph_metric_kernel.py``) counts its run, reads
the replay's bank and adds its values there.  The bank used to come from a host-mapped table
(a read across PCIe on the GPU's critical path, four times per replay in the bench's graph);
it is now a word in device memory.  This probe measures, each variant in a child process of
its own, rounds alternating:

* ``kernels:mapped`` / ``kernels:device``: no profiler; the bench's graph (20 tiny Triton kernels)
  with 4 metric kernels captured between them, their bank word in host-mapped memory (what the
  table cost) or in device memory (as shipped); ``kernels:none``: no metric kernels;
* ``proton``: real Proton (``PROTON_BENCH_OVERLAY``), the bench's graph case; ``proton_ctypes``;
  diagnostics of ours: ``proton_ctypes:parse_batch=N`` (the collector parses only once N
  buffers wait: ``PROTON_CTYPES_PARSE_BATCH``) and ``proton_ctypes:switch=S``
  (``sys.setswitchinterval(S)``: how long a thread holds the GIL while another waits) and
  ``proton_ctypes:cupti=triton`` (the libcupti of the triton wheel, as Proton loads, instead of
  the one torch mapped); ``proton_ctypes:env:NAME=VALUE`` sets an environment variable first
  (e.g. ``PROTON_CTYPES_GRAPH_METRICS=0``: no engine work per replay; ``PROTON_CTYPES_LAUNCH_SOURCE=api``:
  no graph-launch callback at all; ``PROTON_CTYPES_PER_THREAD_BUFFERS=0``: one buffer queue, as
  Proton's CUPTI 12 keeps, so CUPTI writes no record on the replaying thread).  ``PROBE_VARIANTS`` may name any of these.

Per variant: µs per replay of the first 10 000 replays right after the capture (in chunks: the
ramp), then per rep: the bare graph's loop (profiled too, when a profiler runs: it was captured
before the session), the metric graph's loop, their difference (the median over reps), the
launching thread's CPU per replay and the other threads' CPU (the collector's, CUPTI's); last,
the host's own cost of one ``replay()`` call of each graph, timed call by call with the queue
never full (``launch_call_us``, ``bare_launch_call_us``): a loop bound by the GPU hides it.

Run: ``python tests/gpu/probe_graph_bank.py [ROUNDS]`` on a GPU machine (``PROBE_VARIANTS``: a
comma-separated subset); prints one JSON document.
Not a test: what it finds is what the GPU does.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import probe_common  # noqa: F401  (import paths)
from attribution import thread_cpu_s  # noqa: E402  (bench/: the one reader of /proc's thread times)

ROOT = probe_common.ROOT
VARIANTS = ("kernels:none", "kernels:mapped", "kernels:device", "proton", "proton_ctypes",
            "proton_ctypes:parse_batch=100000", "proton_ctypes:switch=0.0002", "proton_ctypes:cupti=triton")
REPLAYS, WARM, REPS = 10_000, 100, 3
#: replays per timed chunk of the first loop
CHUNK = 1000
#: replay() calls timed one by one, a sync after every CALL_BATCH of them
CALL_SAMPLES, CALL_BATCH = 2000, 8
CHILD_TIMEOUT_S = 180


def _timed(replay, sync, n: int) -> tuple:
    """(wall µs, launching thread's CPU µs) per replay of ``n`` replays after the queue drained."""
    sync()
    t0, c0 = time.perf_counter(), time.thread_time()
    for _ in range(n):
        replay()
    sync()
    return (time.perf_counter() - t0) / n * 1e6, (time.thread_time() - c0) / n * 1e6


def _metric_graph(launch, word_in_device: bool):
    """The bench's graph with one metric kernel of ours after each scope's kernels (no profiler)."""
    import torch
    from overhead_cases import GRAPH_KERNELS, GRAPH_SCOPES
    from proton_ctypes.core import graph_metric_kernel as gmk, graph_metrics
    dev = torch.device("cuda", torch.cuda.current_device())
    word = (torch.zeros(1, dtype=torch.int64, device=dev) if word_in_device
            else torch.zeros(1, dtype=torch.int64, pin_memory=True))
    banks = graph_metrics.bank_count() + 1
    regions = [torch.zeros(1 + banks, dtype=torch.int64, device=dev) for _ in range(GRAPH_SCOPES)]
    values = [torch.full((), float(j + 1), device=dev) for j in range(GRAPH_SCOPES)]
    gmk.launch_triton(regions[0], word, values[0], 1, True)   # compiled before the capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for j in range(GRAPH_SCOPES):
            for _ in range(GRAPH_KERNELS // GRAPH_SCOPES):
                launch()
            gmk.launch_triton(regions[j], word, values[j], 1, True)
    graph.keep = (word, regions, values)
    return graph


def worker(variant: str) -> dict:
    import torch
    from overhead import bare_graph, capture_graph, tiny_kernel

    tiny = tiny_kernel()
    x = torch.zeros(1024, device="cuda")

    def launch():
        tiny[(1,)](x, 1024, BLOCK=1024)

    sync = torch.cuda.synchronize
    bare = bare_graph(launch).replay
    proton, name = None, None
    knob = variant.split(":", 1)[1] if variant.startswith("proton_ctypes:") else ""
    if knob.startswith("parse_batch="):
        os.environ["PROTON_CTYPES_PARSE_BATCH"] = knob.split("=")[1]
    elif knob.startswith("switch="):
        sys.setswitchinterval(float(knob.split("=")[1]))
    elif knob.startswith("env:"):
        name, _, value = knob[len("env:"):].partition("=")
        os.environ[name] = value
    elif knob == "cupti=triton":
        from proton_ctypes.backends.nvidia.locate import triton_wheel_cupti
        os.environ["TRITON_CUPTI_LIB_PATH"] = triton_wheel_cupti()
    if variant.startswith("kernels:"):
        kind = variant.split(":")[1]
        replay = bare if kind == "none" else _metric_graph(launch, kind == "device").replay
    else:
        if variant == "proton":
            from proton_overlay import real_proton
            proton = real_proton()
        else:
            import proton_ctypes as proton
        name = os.path.join(tempfile.mkdtemp(), "probe")
        proton.start(name)
        replay = capture_graph(launch, proton).replay
    out = {"variant": variant}
    scope = proton.scope("run") if proton is not None else None
    if scope is not None:
        scope.__enter__()
    # the bench's order first: the metric graph right after the capture, in chunks (the ramp)
    t0 = time.perf_counter()
    marks, others = [], [_other_threads_cpu_s()]
    for i in range(REPLAYS):
        replay()
        if i % CHUNK == CHUNK - 1:
            marks.append(time.perf_counter())
            others.append(_other_threads_cpu_s())
    sync()
    out["first_chunks_us"] = [round((b - a) / CHUNK * 1e6, 2) for a, b in zip([t0] + marks, marks)]
    # the other threads' CPU in each chunk, µs per replay (the collector's and CUPTI's)
    out["first_chunks_other_cpu_us"] = [round((b - a) / CHUNK * 1e6, 1) for a, b in zip(others, others[1:])]
    out["first_us"] = round((time.perf_counter() - t0) / REPLAYS * 1e6, 3)
    cpu0 = _other_threads_cpu_s()
    out.update({"pairs_us": [], "us": [], "bare_us": [], "cpu_us": []})
    for _ in range(REPS):
        bare_us, _ = _timed(bare, sync, REPLAYS)
        _timed(replay, sync, WARM)
        us, cpu = _timed(replay, sync, REPLAYS)
        out["bare_us"].append(round(bare_us, 3))
        out["us"].append(round(us, 3))
        out["cpu_us"].append(round(cpu, 3))
        out["pairs_us"].append(round(us - bare_us, 3))
    # the other threads' CPU (the collector's) per replayed kernel of the timed loops
    out["other_threads_cpu_us_per_replay"] = round(
        (_other_threads_cpu_s() - cpu0) / (REPS * (2 * REPLAYS + WARM)) * 1e6, 3)
    out["launch_call_us"] = _launch_call_us(replay, sync)
    out["bare_launch_call_us"] = _launch_call_us(bare, sync)
    if scope is not None:
        scope.__exit__(None, None, None)
        if variant.startswith("proton_ctypes"):
            from proton_ctypes.backends import select
            lib = select._instances["cupti"].lib
            out["cupti"] = [getattr(lib, "path", None), getattr(lib, "version", None)]
        proton.finalize()
    out["overhead_us"] = statistics.median(out["pairs_us"])
    return out


def _launch_call_us(replay, sync) -> float:
    """Median µs of one ``replay()`` call with the queue never full (a sync every
    :data:`CALL_BATCH` replays): what a replay costs the host, whatever the GPU takes."""
    calls = []
    for _ in range(CALL_SAMPLES // CALL_BATCH):
        sync()
        for _ in range(CALL_BATCH):
            t0 = time.perf_counter()
            replay()
            calls.append(time.perf_counter() - t0)
    sync()
    return round(statistics.median(calls) * 1e6, 3)


def _other_threads_cpu_s() -> float:
    """CPU seconds of this process's threads other than the calling one."""
    me = threading.get_native_id()
    return sum(c for tid, c in thread_cpu_s().items() if tid != me)


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    chosen = os.environ.get("PROBE_VARIANTS")
    variants = tuple(v.strip() for v in chosen.split(",") if v.strip()) if chosen else VARIANTS
    rows = {v: [] for v in variants}
    for r in range(rounds):
        order = variants[r % len(variants):] + variants[:r % len(variants)]
        for v in order:
            p = subprocess.run([sys.executable, __file__, "--worker", v], capture_output=True, text=True,
                               timeout=CHILD_TIMEOUT_S, cwd=ROOT)
            line = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
            if p.returncode != 0 or not line.startswith("{"):
                rows[v].append({"error": (p.stderr or p.stdout)[-800:]})
            else:
                rows[v].append(json.loads(line))
    summary = {}
    for v, outs in rows.items():
        ok = [o for o in outs if "overhead_us" in o]
        summary[v] = {"overhead_us": statistics.median([o["overhead_us"] for o in ok]) if ok else None,
                      "cpu_us": statistics.median([c for o in ok for c in o["cpu_us"]]) if ok else None,
                      "first_us": statistics.median([o["first_us"] for o in ok]) if ok else None,
                      "launch_call_us": statistics.median([o["launch_call_us"] for o in ok]) if ok else None}
    print(json.dumps({"summary": summary, "rounds": rows}, indent=1))


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        print(json.dumps(worker(sys.argv[2])))
    else:
        main()
