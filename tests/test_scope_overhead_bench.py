"""bench/scope_overhead.py: real Proton (the CPU oracle) and proton_ctypes's three variants side by
side -- host-only, the mock GPU backend's time log, and CUPTI's launch-positions clock over the
fake libcupti -- one row each, and the pure-Python floor beside them."""
import json
import math
import pathlib
import subprocess
import sys
import threading

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
                   ("proton_ctypes", "scope enter+exit, 1 session (scope log on, launch positions)"),
                   ("bare", "scope enter+exit, 1 session")}
    assert all(r["us_per_op"] > 0 and r["ratio_to_proton"] > 0 for r in rows)
    assert [r.get("floor") for r in rows if r["impl"] == "bare"] == ["pure_python", "pure_python"]


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
        assert sorted(r["impl"] for r in mine) == ["bare", "proton", "proton_ctypes", "proton_ctypes",
                                                   "proton_ctypes"]
        assert any(r["case"].endswith("(scope log on, launch positions)") for r in mine)
        assert all(math.isfinite(r["us_per_op"]) for r in mine)


def _floor():
    sys.path.insert(0, str(BENCH.parent))
    try:
        import python_floor
    finally:
        sys.path.remove(str(BENCH.parent))
    return python_floor.PurePythonFloor()


def test_pure_python_floor_keeps_a_scope_stack_and_a_state_slot_per_thread():
    floor = _floor()
    seen = {}

    def other():
        with floor.state("t"), floor.scope("b"):
            seen["other"] = (list(floor._slots.stack), floor._slots.state)

    with floor.state("s"), floor.scope("a"):
        floor.enter_scope("c")
        worker = threading.Thread(target=other)
        worker.start()
        worker.join()
        seen["main"] = (list(floor._slots.stack), floor._slots.state)
        floor.exit_scope()
    assert seen == {"main": (["a", "c"], "s"), "other": (["b"], "t")}
    assert (floor._slots.stack, floor._slots.state) == ([], None)
