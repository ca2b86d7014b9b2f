"""bench/results_file.py: every benchmark's results file has machine, date, command and rows, and is
written whole or not at all."""
import json
import os
import pathlib
import sys

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[1] / "bench"


@pytest.fixture
def results_file(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    import results_file
    return results_file


def test_results_file_holds_machine_date_command_rows_and_the_extra_keys(results_file, tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["bench/x.py", "--rounds", "3"])
    monkeypatch.setenv("PROTON_BENCH_OVERLAY", "/o")
    path = tmp_path / "deeper" / "x-cpu.json"
    rows = [{"case": "c", "impl": "bare", "us_per_op": 1.0}]
    results_file.write(str(path), rows, rounds=3)
    doc = json.loads(path.read_text())
    assert doc["rows"] == rows and doc["rounds"] == 3
    assert doc["command"] == "PROTON_BENCH_OVERLAY=/o python bench/x.py --rounds 3"
    assert doc["machine"].startswith(results_file.machine().split(" | ")[0])
    assert "Python " in doc["machine"] and doc["date"][:4].isdigit()


def test_a_results_file_that_cannot_be_written_whole_leaves_the_previous_one_and_no_temporary(results_file, tmp_path):
    path = tmp_path / "x-cpu.json"
    results_file.write(str(path), [{"case": "old"}])
    with pytest.raises(TypeError):
        results_file.write(str(path), [{"case": object()}])      # not JSON: fails halfway through
    assert json.loads(path.read_text())["rows"] == [{"case": "old"}]
    assert os.listdir(tmp_path) == ["x-cpu.json"]
