"""bench/split.py in its CPU smoke mode (the fake libcupti): it runs its pairs of chunks and writes
the session and scope figures of every process (the GPU figures come from a GPU, never from here)."""
import json
import math
import pathlib
import subprocess
import sys

BENCH = pathlib.Path(__file__).resolve().parents[1] / "bench" / "split.py"


def test_split_bench_writes_the_session_and_scope_figures_of_every_process_with_every_chunk(tmp_path):
    out = tmp_path / "split.json"
    subprocess.run([sys.executable, str(BENCH), "--backend", "fake-cupti", "--launches", "2000", "--rounds", "3",
                    "--processes", "2", "--json", str(out)], check=True, capture_output=True, text=True, timeout=120)
    rows = json.loads(out.read_text())["rows"]
    ours = {r["case"].split(",")[0]: r for r in rows if r["impl"] == "proton_ctypes"}
    assert set(ours) == {"session", "scopes in a session", "session with scopes", "long session",
                         "long session with scopes"}     # "session, no scopes, ...", "long session, no scopes, ..."
    for row in ours.values():
        assert len(row["every_process"]) == 2 and row["overhead_us"] is not None
    scopes = next(r for r in rows if r["impl"] == "proton_ctypes" and r["case"].startswith("scopes in a session"))
    assert scopes["overhead_us"] > 0                      # the scopes cost something, even on a CPU
    chunks = next(r for r in rows if "chunks_every_process" in r)["chunks_every_process"]["proton_ctypes"]
    assert len(chunks) == 2
    for process in chunks:
        assert {k: len(v) for k, v in process.items()} == {"bare": 3, "session": 3, "plain": 3, "scoped": 3}


def test_split_rows_of_a_cupti_floor_are_bare_rows_named_by_its_recipe():
    sys.path.insert(0, str(BENCH.parent))
    try:
        import split
    finally:
        sys.path.remove(str(BENCH.parent))
    chunks = {"bare": [10.0, 10.2], "session": [11.0, 11.4], "plain": [10.5, 10.7], "scoped": [11.5, 11.7],
              "other_threads_cpu_us_per_kernel": 0.1}
    rows = split.rows_of({"proton": [chunks], "floor:pylog": [dict(chunks, scoped=[11.0, 11.2])]}, ", x")
    floors = [r for r in rows if r.get("floor") == "pylog"]
    assert len(floors) == len(split.CASES) and all(r["impl"] == "bare" for r in floors)
    scopes = next(r for r in floors if r["case"] == "scopes in a session, x")
    assert scopes["overhead_us"] == 0.5 and scopes["ratio_to_proton"] == 0.5     # 0.5 against Proton's 1.0


def test_split_bench_launches_each_chunk_from_several_threads_in_trace_sessions(tmp_path):
    out = tmp_path / "split.json"
    subprocess.run([sys.executable, str(BENCH), "--backend", "fake-cupti", "--launches", "2000", "--rounds", "2",
                    "--processes", "1", "--threads", "2", "--data", "trace", "--json", str(out)],
                   check=True, capture_output=True, text=True, timeout=120)
    data = json.loads(out.read_text())
    rows = [r for r in data["rows"] if r["impl"] == "proton_ctypes"]
    assert rows and all(", 2 launching threads," in r["case"] and "data=trace" in r["case"] for r in rows)
    # every figure is there; not their sign: two threads on a loaded 2-core machine make a
    # scope's few hundred ns (the scoped chunk minus the plain one) come out below zero at times
    assert all(math.isfinite(r["overhead_us"]) and len(r["every_process"]) == 1 for r in rows)
    chunks = next(r for r in data["rows"] if "chunks_every_process" in r)["chunks_every_process"]["proton_ctypes"]
    assert [{k: len(v) for k, v in process.items()} for process in chunks] == [
        {"bare": 2, "session": 2, "plain": 2, "scoped": 2}]
