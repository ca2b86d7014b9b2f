"""bench/drain_cpu.py: the collector's drains timed on the calling thread over the fake libcupti
(a CPU diagnostic; its figures are read in docs/collection.md)."""
import pathlib
import subprocess
import sys

BENCH = pathlib.Path(__file__).resolve().parents[1] / "bench" / "drain_cpu.py"


def test_drain_cpu_bench_times_every_repetition_and_counts_the_drains_context_switches(tmp_path):
    profile = tmp_path / "drains.txt"
    out = subprocess.run([sys.executable, str(BENCH), "--launches", "4000", "--every", "2000", "--reps", "2",
                          "--busy", "--profile", str(profile)], check=True, capture_output=True, text=True,
                         timeout=120).stdout
    assert "beside a busy thread" in out and "voluntary context switches" in out
    per_rep = out.split("kernel (beside a busy thread): [")[1].split("]")[0].split(",")
    assert len(per_rep) == 2 and all(int(x) > 0 for x in per_rep)
    # what the busy thread lost to the drains (its waits), one figure per repetition
    lost = out.split("while the drains ran, ns per kernel: [")[1].split("]")[0].split(",")
    assert len(lost) == 2 and all(int(x) >= 0 for x in lost)
    text = profile.read_text()
    assert "collector.py" in text and "(drain)" in text      # the drains themselves, with their callees


def test_drain_cpu_bench_with_graph_replays_times_the_replayed_kernels():
    out = subprocess.run([sys.executable, str(BENCH), "--graph", "--launches", "4000", "--every", "2000", "--reps", "1"],
                         check=True, capture_output=True, text=True, timeout=120).stdout
    assert "ns per kernel (replayed graph kernels): [" in out
    per_rep = out.split("kernels): [")[1].split("]")[0].split(",")
    assert len(per_rep) == 1 and int(per_rep[0]) > 0
