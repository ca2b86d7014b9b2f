"""bench/scope_overhead.py: real Proton (the CPU oracle) and proton_ctypes's three variants side by
side -- host-only, the mock GPU backend's time log, and CUPTI's launch-positions clock over the
fake libcupti -- one row each."""
import json
import math
import pathlib
import subprocess
import sys

import pytest

from conformance.test_conformance import REASON as ORACLE_REASON

BENCH = pathlib.Path(__file__).resolve().parents[1] / "bench" / "scope_overhead.py"


@pytest.mark.skipif(ORACLE_REASON is not None, reason=ORACLE_REASON or "")
def test_scope_bench_times_the_launch_positions_clock_beside_the_other_variants(tmp_path):
    out = tmp_path / "scope.json"
    subprocess.run([sys.executable, str(BENCH), "--rounds", "1", "--n", "200", "--data", "tree",
                    "--cases", "scope enter+exit", "--json", str(out)], check=True, capture_output=True,
                   text=True, timeout=300)
    rows = json.loads(out.read_text())["rows"]
    one = {(r["impl"], r["case"]) for r in rows if "1 session" in r["case"]}
    assert one == {("proton", "scope enter+exit, 1 session"),
                   ("proton_ctypes", "scope enter+exit, 1 session"),
                   ("proton_ctypes", "scope enter+exit, 1 session (scope log on)"),
                   ("proton_ctypes", "scope enter+exit, 1 session (scope log on, launch positions)")}
    assert all(r["us_per_op"] > 0 and r["ratio_to_proton"] > 0 for r in rows)


@pytest.mark.skipif(ORACLE_REASON is not None, reason=ORACLE_REASON or "")
def test_scope_bench_times_scopes_and_states_around_launches_for_every_implementation(tmp_path):
    out = tmp_path / "around.json"
    cases = ("scope around a launch", "state around a launch")
    subprocess.run([sys.executable, str(BENCH), "--rounds", "1", "--n", "400", "--data", "tree",
                    "--cases", ",".join(cases), "--json", str(out)], check=True, capture_output=True,
                   text=True, timeout=300)
    rows = [r for r in json.loads(out.read_text())["rows"] if "1 session" in r["case"]]
    for case in cases:
        mine = [r for r in rows if r["case"].startswith(case)]
        assert sorted(r["impl"] for r in mine) == ["proton", "proton_ctypes", "proton_ctypes", "proton_ctypes"]
        assert any(r["case"].endswith("(scope log on, launch positions)") for r in mine)
        assert all(math.isfinite(r["us_per_op"]) for r in mine)
