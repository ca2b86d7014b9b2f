"""-diff BASE: nodes matched by call path, missing side = 0 and marked (where Proton prints nan)."""

import pytest

from .diff_profiles import write_pair
from .helpers import REFERENCE_OUTPUTS, run_viewer


@pytest.fixture
def pair(tmp_path):
    return write_pair(tmp_path)


def test_diff_tree_shows_base_new_change_and_relative_change(pair):
    result = run_viewer(["-m", "time/ns", "new.hatchet", "-diff", "base.hatchet"], cwd=pair)
    assert (result.code, result.err) == (0, "")
    assert result.out == (
        "diff: new=new.hatchet base=base.hatchet; per metric: base new Δ Δ% (time/ns (inc))\n"
        "1720.000 1561.000 -159.000 -9.244% ROOT\n"
        "├─ 300.000 0.000 -300.000 -100.000% eval [gone]\n"
        "│  └─ 300.000 0.000 -300.000 -100.000% fwd [gone]\n"
        "│     └─ 300.000 0.000 -300.000 -100.000% gemm [gone]\n"
        "└─ 1420.000 1561.000 +141.000 +9.930% train\n"
        "   ├─ 900.000 891.000 -9.000 -1.000% bwd\n"
        "   │  └─ 900.000 891.000 -9.000 -1.000% gemm\n"
        "   ├─ 520.000 570.000 +50.000 +9.615% fwd\n"
        "   │  ├─ 500.000 550.000 +50.000 +10.000% gemm\n"
        "   │  └─ 20.000 20.000 +0.000 +0.000% relu\n"
        "   └─ 0.000 100.000 +100.000 +inf% opt [new]\n"
        "      └─ 0.000 100.000 +100.000 +inf% adam [new]\n\n")


def test_nodes_with_the_same_name_are_matched_by_their_call_path(pair):
    out = run_viewer(["-m", "time/ns", "new.hatchet", "-diff", "base.hatchet"], cwd=pair).out
    assert "│     └─ 300.000 0.000 -300.000 -100.000% gemm [gone]" in out  # eval/fwd/gemm
    assert "   │  ├─ 500.000 550.000 +50.000 +10.000% gemm" in out  # train/fwd/gemm


def test_every_metric_gets_four_columns(pair):
    line = run_viewer(["-m", "time/ns,count", "new.hatchet", "-diff", "base.hatchet"], cwd=pair).out.splitlines()[1]
    assert line == "1720.000 1561.000 -159.000 -9.244% 4.000 4.000 +0.000 +0.000% ROOT"


def test_print_sorted_lists_nodes_by_absolute_change(pair):
    out = run_viewer(["-m", "time/ns", "new.hatchet", "-diff", "base.hatchet", "--print-sorted"], cwd=pair).out
    lines = out.split("\n\n", 1)[1].splitlines()
    assert lines[0] == "Sorted by |Δ| of time/ns (inc)"
    assert [line.split()[0] for line in lines[1:]] == ["eval", "fwd", "gemm", "train", "opt", "adam", "fwd",
                                                        "gemm", "bwd", "gemm", "relu"]
    assert lines[1] == f"{'eval':105} -300.0 -100.000% [gone]"
    assert lines[5] == f"{'opt':105} +100.0 +inf% [new]"


def test_a_profile_against_itself_has_no_change(pair):
    out = run_viewer(["-m", "time/ns,avg_time/ns", "base.hatchet", "-diff", "base.hatchet"], cwd=pair).out
    rows = out.splitlines()[1:-1]
    assert rows and all(" +0.000 +0.000% " in row and row.endswith(" +0.000%" + row.split("%")[-1]) for row in rows)
    assert "[new]" not in out and "[gone]" not in out


def test_filters_and_depth_apply_to_both_profiles(pair):
    out = run_viewer(["-m", "time/ns", "new.hatchet", "-diff", "base.hatchet", "-i", "fwd", "-d", "2"],
                     cwd=pair).out
    assert out.splitlines()[1:-1] == ["1720.000 1561.000 -159.000 -9.244% ROOT",
                                    "├─ 300.000 0.000 -300.000 -100.000% eval [gone]",
                                    "└─ 1420.000 1561.000 +141.000 +9.930% train"]


def test_we_do_not_reproduce_protons_nan_diff(ref_dir):
    proton = (REFERENCE_OUTPUTS / "diff.txt").read_text().split("\n", 1)[1]
    ours = run_viewer(["nested.hatchet", "-m", "time/ns", "-diff", "states.hatchet"], cwd=ref_dir).out
    assert "nan iteration" in proton and "nan" not in ours
    assert "├─ 4225.000 0.000 -4225.000 -100.000% iteration [gone]" in ours
    assert "└─ 0.000 7487.000 +7487.000 +inf% test0 [new]" in ours


def test_diff_needs_the_metrics_in_both_profiles(pair, ref_dir):
    result = run_viewer(["-m", "flops32", str(ref_dir / "hook.hatchet"), "-diff", "base.hatchet"], cwd=pair)
    assert result.code == 1
    assert result.err == "RuntimeError: Metric flops32 is not found. Use the --list flag to list available metrics\n"
