"""-f json: the printed table as JSON for scripts."""

import json

import pytest

from .diff_profiles import write_pair
from .helpers import run_viewer


def test_json_lists_the_printed_nodes_with_path_name_and_metrics(ref_dir):
    result = run_viewer(["-m", "time/ns,cpu_time/ns", "-f", "json", "cpu_timed.hatchet"], cwd=ref_dir)
    assert result.code == 0
    nodes = json.loads(result.out)
    assert [(n["path"], n["name"], n["depth"]) for n in nodes] == [
        (["ROOT"], "ROOT", 0), (["ROOT", "host_preprocessing"], "host_preprocessing", 1),
        (["ROOT", "host_preprocessing", "inner_host"], "inner_host", 2),
        (["ROOT", "host_preprocessing", "inner_host", "add_one"], "add_one", 3)]
    assert [n["metrics"]["time/ns (inc)"] for n in nodes] == [832.0] * 4
    cpu = [n["metrics"]["cpu_time/ns (inc)"] for n in nodes]
    assert cpu[0] is None and cpu[3] is None  # nan -> null
    assert cpu[1:3] == pytest.approx([64342995.0, 54170694.0])


def test_json_respects_depth_filters_and_sorting(ref_dir):
    out = run_viewer(["-m", "time/ns", "-f", "json", "-d", "2", "-e", "test1", "--print-sorted",
                      "nested.hatchet"], cwd=ref_dir).out
    assert [(n["name"], n["metrics"]["time/ns (inc)"]) for n in json.loads(out)] == [
        ("ROOT", 8319.0), ("test0", 7487.0), ("add_one", 832.0)]


def test_json_keeps_full_frame_names(ref_dir):
    nodes = json.loads(run_viewer(["-m", "time/ns", "-f", "json", "pyctx.hatchet"], cwd=ref_dir).out)
    assert nodes[1]["name"].endswith("golden.py:111@<module>") and "/" in nodes[1]["name"]


def test_json_diff_has_status_and_four_values_per_metric(tmp_path):
    write_pair(tmp_path)
    nodes = json.loads(run_viewer(["-m", "time/ns", "-f", "json", "new.hatchet", "-diff", "base.hatchet"],
                                  cwd=tmp_path).out)
    by_path = {"/".join(n["path"]): n for n in nodes}
    assert by_path["ROOT/train/opt"]["status"] == "new"
    assert by_path["ROOT/eval"]["status"] == "gone"
    assert by_path["ROOT/train/fwd/gemm"]["metrics"]["time/ns (inc)"] == pytest.approx({
        "base": 500.0, "new": 550.0, "delta": 50.0, "delta_pct": 10.0})
    assert by_path["ROOT/train/opt"]["metrics"]["time/ns (inc)"]["delta_pct"] is None  # +inf
