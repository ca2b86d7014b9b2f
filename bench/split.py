"""Where a profiled launch's overhead goes: the session, and the scopes in it, each against loops of
the same process, in short chunks that alternate.

The device hosts drift by more than the effects in question: bare loops of separate processes
10 to 17 µs per launch apart on one machine (``bench/results/longrun-subscriber-h100.json``),
and within one process, stretches of a second or more at about 10.5 or about 15.5 µs per launch
(``bench/results/split-h100-long-chunks.json``, chunks of 100 000 launches).  So each
implementation runs in its own process (``--worker``), and every figure is a median over rounds
of the difference between two short chunks of ``--launches`` launches run one after the other:

1. ``session, no scopes``: a chunk in a session just started (``data="tree"``) minus a bare chunk
   (no profiler), the first of the pair in turn; the session is finalized after its chunk, untimed.
   What each launch pays on the launching thread, a session's first launches included (Proton's
   cost more than its later ones); the processing of the records is not in it (the rows report
   the CPU of every thread but the launching one during the long session apart, per kernel:
   ``other_threads_cpu_us_per_kernel``);
2. ``scopes in a session``: in one session that stays on through all its rounds, a chunk under
   ``bench/longrun.py``'s scopes (one ``layer`` per launch, ``LAYERS`` per ``step``) minus a
   chunk of the same launches with no scope: the scopes' own cost, their log and its processing
   by the collector included as far as it falls in the scoped chunks;
3. ``session with scopes``: the sum of the two;
4. ``long session, no scopes`` and ``long session with scopes``: the median no-scope and scoped
   chunk of the long session minus the median bare chunk -- the steady state, but across chunks
   that did not run side by side, so only as good as the host was steady (compare the bare chunks
   of the last row).

``--threads N`` launches every chunk from N threads kept for the whole process (each launches
its share of the chunk; a new thread per chunk would time threads' first launches), and
``--data trace`` starts ``data="trace"`` sessions.

The processes alternate, ``--processes`` of each implementation; ``ratio_to_proton`` is each
figure's median over processes over Proton's.  Rows as every bench's, with every process's figures;
the last row keeps every chunk.  ``--backend fake-cupti`` runs proton_ctypes over the tests' fake
libcupti on a CPU (a smoke run: its figures say nothing about a GPU).

    python bench/split.py --launches 10000 --rounds 20 --processes 2 --json bench/results/split-h100.json
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import results_file  # noqa: E402
from attribution import thread_cpu_s  # noqa: E402
import variants  # noqa: E402
from longrun import CPU_BACKENDS, IMPLS, KERNEL, gpu_launcher, interleaved, profiler, scoped_loop  # noqa: E402
from cpu_common import fake_cupti  # noqa: E402

#: the figures of a worker, by case name (the rows' ``case``)
CASES = ("session, no scopes", "scopes in a session", "session with scopes", "long session, no scopes",
         "long session with scopes")
#: launches before the first timed chunk (the first loop of a process is slower)
WARM_LAUNCHES = 20_000


class Launchers:
    """``threads`` launching threads kept for the whole process; each chunk, every one of them runs
    the long run's loop over its share of the launches, all starting together."""

    def __init__(self, threads: int):
        self.threads = threads
        self._start = threading.Barrier(threads + 1)
        self._end = threading.Barrier(threads + 1)
        self._job = None
        for i in range(threads):
            threading.Thread(target=self._work, name=f"split-launcher-{i}", daemon=True).start()

    def _work(self) -> None:
        while True:
            self._start.wait()
            scope, launch, n = self._job
            scoped_loop(scope, launch, n, n, [])
            self._end.wait()

    def run(self, scope, launch, launches: int) -> None:
        """``launches`` launches in all (each thread ``launches // threads``), the threads starting
        together; returns when the last one is done."""
        self._job = (scope, launch, launches // self.threads)
        self._start.wait()
        self._end.wait()


def _chunk(scope, launch, sync, launches: int, pool=None) -> float:
    """Microseconds per launch of one chunk (the queue drained after it, never inside), launched
    from this thread or, with ``pool``, from its threads."""
    t0 = time.perf_counter()
    if pool is None:
        scoped_loop(scope, launch, launches, launches, [])
    else:
        pool.run(scope, launch, launches)
        launches = launches // pool.threads * pool.threads
    sync()
    return (time.perf_counter() - t0) / launches * 1e6


def worker(impl: str, backend: str, launches: int, rounds: int, threads: int = 1, data: str = "tree") -> dict:
    """One process: the pairs of chunks of every figure (module docstring), and the CPU of every
    thread but the launching ones during the long session."""
    kind = variants.apply(impl)
    proton = profiler(kind, backend)
    on_cpu = backend in CPU_BACKENDS
    if on_cpu:
        fake = fake_cupti()
        launch, sync, bare_launch = (lambda: fake.launch(KERNEL)), (lambda: None), (lambda: None)
    else:
        launch, sync = gpu_launcher()
        bare_launch = launch
    start = {"backend": CPU_BACKENDS[backend]} if on_cpu else {}
    out_dir = tempfile.mkdtemp()
    pool = Launchers(threads) if threads > 1 else None
    _chunk(None, bare_launch, sync, WARM_LAUNCHES, pool)
    launching = {threading.get_native_id()} | ({t.native_id for t in threading.enumerate()
                                                if t.name.startswith("split-launcher-")} if pool else set())
    bare, session = [], []
    for r in range(rounds):
        for in_session in ((False, True) if r % 2 == 0 else (True, False)):
            if not in_session:
                bare.append(_chunk(None, bare_launch, sync, launches, pool))
                continue
            proton.start(os.path.join(out_dir, f"session{r}"), data=data, **start)
            session.append(_chunk(None, launch, sync, launches, pool))
            proton.finalize()
    proton.start(os.path.join(out_dir, "scopes"), data=data, **start)
    cpu0 = thread_cpu_s()
    plain, scoped = [], []
    for r in range(rounds):
        for with_scopes in ((False, True) if r % 2 == 0 else (True, False)):
            (scoped if with_scopes else plain).append(
                _chunk(proton.scope if with_scopes else None, launch, sync, launches, pool))
    cpu1 = thread_cpu_s()
    proton.finalize()
    others = sum(c - cpu0.get(tid, 0.0) for tid, c in cpu1.items() if tid not in launching)
    return {"impl": impl, "bare": bare, "session": session, "plain": plain, "scoped": scoped,
            "other_threads_cpu_us_per_kernel": others / (2 * rounds * launches) * 1e6}


def figures(res: dict) -> dict:
    """The figures (:data:`CASES`) of one worker's chunks, µs per launch."""
    session = statistics.median([s - b for s, b in zip(res["session"], res["bare"])])
    scopes = statistics.median([s - p for s, p in zip(res["scoped"], res["plain"])])
    bare = statistics.median(res["bare"])
    return dict(zip(CASES, (session, scopes, session + scopes, statistics.median(res["plain"]) - bare,
                            statistics.median(res["scoped"]) - bare)))


def rows_of(runs: dict, case_suffix: str) -> list:
    """The rows: a bare one (the median bare chunk), then per implementation and case its median
    figure over processes and the ratio to Proton's."""
    bare = [statistics.median(x["bare"]) for rs in runs.values() for x in rs]
    rows = [{"case": "bare chunks" + case_suffix, "impl": "bare", "us_per_op": round(statistics.median(bare), 3),
             "overhead_us": None, "ratio_to_proton": None, "finalize_s": None}] if bare else []
    medians = {impl: {c: statistics.median([figures(x)[c] for x in rs]) for c in CASES}
               for impl, rs in runs.items() if rs}
    for impl, per_case in medians.items():
        for case in CASES:
            ref = medians.get("proton", {}).get(case)
            rows.append({"case": case + case_suffix, **variants.row_fields(impl), "us_per_op": None,
                         "overhead_us": round(per_case[case], 3),
                         "ratio_to_proton": round(per_case[case] / ref, 3) if ref and ref > 0 else None,
                         "finalize_s": None, "every_process": [round(figures(x)[case], 3) for x in runs[impl]],
                         "other_threads_cpu_us_per_kernel": [round(x["other_threads_cpu_us_per_kernel"], 3)
                                                             for x in runs[impl]]})
    rows.append({"case": "chunks" + case_suffix, "impl": "bare", "us_per_op": None, "overhead_us": None,
                 "ratio_to_proton": None, "finalize_s": None,
                 "chunks_every_process": {impl: [{k: [round(v, 3) for v in x[k]] for k in
                                                  ("bare", "session", "plain", "scoped")} for x in rs]
                                          for impl, rs in runs.items()}})
    return rows


def run(a) -> list:
    """Every process of every implementation, alternating; prints and returns the rows."""
    args = ["--backend", a.backend, "--launches", str(a.launches), "--rounds", str(a.rounds),
            "--threads", str(a.threads), "--data", a.data]
    runs = interleaved(__file__, a.impls.split(","), a.processes, args,
                       lambda res: "  ".join(f"{c} {v:+.2f}" for c, v in figures(res).items()))
    threads = f", {a.threads} launching threads" if a.threads > 1 else ""
    suffix = (f", {a.launches} launches per chunk{threads}, scopes step/layer, data={a.data}"
              + {"fake-cupti": ", CUPTI backend over the fake libcupti (CPU)"}.get(a.backend, ""))
    rows = rows_of(runs, suffix)
    for row in rows:
        if "chunks_every_process" not in row:
            print(json.dumps(row))
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--launches", type=int, default=10_000, help="launches per chunk")
    ap.add_argument("--rounds", type=int, default=20, help="pairs of chunks of each figure")
    ap.add_argument("--processes", type=int, default=2, help="processes per implementation")
    ap.add_argument("--threads", type=int, default=1, help="launching threads of every chunk")
    ap.add_argument("--data", choices=("tree", "trace"), default="tree")
    ap.add_argument("--backend", choices=("gpu", "fake-cupti"), default="gpu")
    ap.add_argument("--impls", default=None, help="default: proton,proton_ctypes (fake-cupti: proton_ctypes)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--worker", metavar="IMPL", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        print(json.dumps(worker(a.worker, a.backend, a.launches, a.rounds, a.threads, a.data)))
        return
    if a.impls is None:
        a.impls = "proton_ctypes" if a.backend != "gpu" else ",".join(IMPLS)
    rows = run(a)
    if a.json:
        results_file.write(a.json, rows)


if __name__ == "__main__":
    main()
