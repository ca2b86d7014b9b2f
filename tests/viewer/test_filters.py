"""Filters -i / -e / -t with Proton's semantics (hatchet queries, squash, no recomputation of derived)."""

from .helpers import run_viewer
from .profiles import node, write_json


def _k(name, t):
    return node(name, {"count": 1, "device_id": "0", "device_type": "CUDA", "time (ns)": t})


DOC = [node("ROOT", {"count": 0, "time (ns)": 0}, [
    node("train", {}, [node("fwd", {}, [_k("gemm", 500), _k("relu", 20)]), node("bwd", {}, [_k("gemm", 900)])]),
    node("eval", {}, [node("fwd", {}, [_k("gemm", 300)])])]), {}]


def _run(tmp_path, *argv):
    write_json(DOC, tmp_path / "p.hatchet")
    result = run_viewer(list(argv) + ["p.hatchet"], cwd=tmp_path)
    assert result.code == 0, result.err
    return result.out


def test_include_keeps_whole_paths_through_matching_frames(tmp_path):
    assert _run(tmp_path, "-m", "time/ns", "-i", "fwd") == (
        "1720.000 ROOT\n├─ 300.000 eval\n│  └─ 300.000 fwd\n│     └─ 300.000 gemm\n"
        "└─ 1420.000 train\n   └─ 520.000 fwd\n      ├─ 500.000 gemm\n      └─ 20.000 relu\n\n")


def test_include_matches_from_the_start_of_the_name(tmp_path):
    write_json(DOC, tmp_path / "p.hatchet")
    assert run_viewer(["-m", "time/ns", "-i", "wd", "p.hatchet"], cwd=tmp_path).err.startswith("EmptyFilter: ")
    assert _run(tmp_path, "-m", "time/ns", "-i", "re") == (
        "1720.000 ROOT\n└─ 1420.000 train\n   └─ 520.000 fwd\n      └─ 20.000 relu\n\n")


def test_exclude_drops_matching_frames_and_their_subtrees(tmp_path):
    assert _run(tmp_path, "-m", "time/ns", "-e", "fwd") == "1720.000 ROOT\n├─ 300.000 eval\n└─ 1420.000 train\n" \
                                                           "   └─ 900.000 bwd\n      └─ 900.000 gemm\n\n"


def test_threshold_keeps_frames_at_or_above_it_and_their_ancestors(tmp_path):
    assert _run(tmp_path, "-m", "time/ns", "-t", "520") == (
        "1720.000 ROOT\n└─ 1420.000 train\n   ├─ 900.000 bwd\n   │  └─ 900.000 gemm\n   └─ 520.000 fwd\n\n")


def test_threshold_zero_is_no_filter(tmp_path):
    assert _run(tmp_path, "-m", "time/ns", "-t", "0") == _run(tmp_path, "-m", "time/ns")


def test_derived_inclusive_columns_keep_the_full_totals_after_a_filter(tmp_path):
    assert _run(tmp_path, "-m", "time/ns", "-e", "train").splitlines()[0] == "1720.000 ROOT"
    assert _run(tmp_path, "-m", "time/%", "-e", "train").splitlines()[:2] == ["100.000 ROOT", "└─ 17.442 eval"]


def test_raw_root_metrics_are_summed_again_over_the_kept_frames(tmp_path):
    # "-m time" is the hatchet roll-up "time (ns) (inc)", recomputed after the squash as in Proton
    assert _run(tmp_path, "-m", "time", "-e", "train").splitlines()[0] == "300.000 ROOT"
    assert _run(tmp_path, "-m", "time,count", "-i", "bwd").splitlines()[0] == "900.000 1.000 ROOT"


def test_filters_apply_include_or_exclude_then_threshold(tmp_path):
    assert _run(tmp_path, "-m", "time/ns", "-i", "fwd", "-t", "400") == (
        "1720.000 ROOT\n└─ 1420.000 train\n   └─ 520.000 fwd\n      └─ 500.000 gemm\n\n")


def test_regex_characters_that_break_protons_query_work(tmp_path):
    assert "relu" in _run(tmp_path, "-m", "time/ns", "-i", "r(e|x){1}lu")
