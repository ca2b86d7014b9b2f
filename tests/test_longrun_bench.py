"""bench/longrun.py in its CPU smoke mode (the mock backend): it runs, counts every kernel and
writes the long-run rows (the GPU figures come from the H200, never from here)."""
import json
import pathlib
import subprocess
import sys

BENCH = pathlib.Path(__file__).resolve().parents[1] / "bench" / "longrun.py"


def test_longrun_bench_smoke_mode_counts_every_kernel_and_writes_the_long_run_rows(tmp_path):
    out = tmp_path / "longrun.json"
    subprocess.run([sys.executable, str(BENCH), "--backend", "mock", "--launches", "20000", "--sample-every", "5000",
                    "--json", str(out)], check=True, capture_output=True, text=True, timeout=120)
    rows = {r["impl"]: r for r in json.loads(out.read_text())["rows"]}
    assert set(rows) == {"bare", "proton_ctypes"}
    ours = rows["proton_ctypes"]
    assert ours["kernels"] == ours["expected_kernels"] == ours["launches"] == 20000
    for key in ("us_per_op", "overhead_us", "ratio_to_proton", "finalize_s", "rss_growth_mb_per_million",
                "flush_cpu_us_per_kernel"):
        assert key in ours
    assert [n for n, _mb in ours["rss_mb_every_round"][0]] == [0, 5000, 10000, 15000, 20000]
    bare_usage, usage = ours["launcher_usage_per_launch_every_round"][0]     # the launching thread's rusage
    assert set(usage) == set(bare_usage) == {"user_us", "system_us", "minor_faults", "voluntary_switches",
                                             "involuntary_switches"}
    assert usage["user_us"] > 0


def test_floor_rows_are_bare_rows_named_by_their_recipe_with_no_kernel_count(tmp_path):
    out = tmp_path / "longrun.json"
    subprocess.run([sys.executable, str(BENCH), "--backend", "fake-cupti", "--launches", "20000", "--sample-every",
                    "5000", "--impls", "proton_ctypes,floor:kernels,floor:ours", "--json", str(out)],
                   check=True, capture_output=True, text=True, timeout=120)
    rows = json.loads(out.read_text())["rows"]
    floors = {r["floor"]: r for r in rows if "floor" in r}
    assert set(floors) == {"kernels", "ours"}
    for row in floors.values():
        assert row["impl"] == "bare" and row["kernels"] is None and row["overhead_us"] is not None
        assert len(row["rss_mb_every_round"][0]) == 5          # its memory sampled like a profiler's
    ours = next(r for r in rows if r["impl"] == "proton_ctypes")
    assert ours["kernels"] == ours["expected_kernels"] == 20000
    assert "proton_ctypes-cupti" in ours["other_threads_cpu_s_by_name"][0]   # the collector's CPU, by its name
    assert ours["buffers_at_end"][0]["buffers_allocated"] >= 1                 # and the buffers it holds


def test_profile_drains_writes_where_the_collector_spends_its_time(tmp_path):
    profile = tmp_path / "drains.txt"
    subprocess.run([sys.executable, str(BENCH), "--backend", "fake-cupti", "--launches", "20000", "--sample-every",
                    "5000", "--profile-drains", str(profile)], check=True, capture_output=True, text=True, timeout=120)
    text = profile.read_text()
    assert "Ordered by: internal time" in text
    assert "collector.py" in text and "(drain)" in text      # the drains themselves, with their callees


def _slope():
    sys.path.insert(0, str(BENCH.parent))
    try:
        import longrun
    finally:
        sys.path.remove(str(BENCH.parent))
    return longrun.slope_per_million


def test_rss_growth_reads_a_steady_rise_and_ignores_a_sawtooth_and_a_single_dip():
    slope = _slope()
    steps = range(0, 3_000_001, 100_000)
    rising = [(n, 700 + 5 * n / 1e6) for n in steps]                       # 5 MB per million launches
    sawtooth = [(n, 700 + 30 * ((n // 100_000) % 4 == 3)) for n in steps]   # trims every 400 000 launches
    dip = [(n, 750 - 20 * (n == 1_400_000)) for n in steps]                  # one buffer freed near the middle
    assert abs(slope(rising, 1_000_000) - 5) < 0.01
    assert abs(slope(sawtooth, 1_000_000)) < 0.01
    assert abs(slope(dip, 1_000_000)) < 0.01
