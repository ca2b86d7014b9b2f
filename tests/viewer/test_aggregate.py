"""Several profiles as one: globs, period series, --agg sum|mean|min|max, --max-rank, -diff of sets."""

import json

import pytest

from proton_ctypes.viewer.inputs import Series, assign_ranks
from .helpers import run_viewer
from .profiles import DEVICE, node, write_json, write_msgpack

ROOT_METRICS = {"count": 0, "time (ns)": 0}


def kernel(name, t, count=1):
    """A kernel node with Proton's metrics."""
    return node(name, {"count": count, "device_id": "0", "device_type": "CUDA", "time (ns)": t})


def rank_doc(gemm, relu, extra=None):
    """ROOT / fwd / {gemm, relu} (+ extra children of ROOT), with one CUDA device."""
    return [node("ROOT", ROOT_METRICS, [node("fwd", {}, [kernel("gemm", gemm), kernel("relu", relu)])]
                 + (extra or [])), {"CUDA": {"0": dict(DEVICE["CUDA"])}}]


@pytest.fixture
def ranks(tmp_path):
    """run_0..run_2.hatchet: gemm 100/300/200 ns, relu 10/20/40 ns (totals 110, 320, 240)."""
    for r, (gemm, relu) in enumerate([(100, 10), (300, 20), (200, 40)]):
        write_json(rank_doc(gemm, relu), tmp_path / f"run_{r}.hatchet")
    return tmp_path


def tree(argv, cwd):
    result = run_viewer(argv, cwd=cwd)
    assert (result.code, result.err) == (0, ""), result
    return result.out


def test_sum_adds_every_node_across_inputs(ranks):
    assert tree(["-m", "time/ns", "run_*.hatchet"], ranks) == (
        "670.000 ROOT\n└─ 670.000 fwd\n   ├─ 600.000 gemm\n   └─ 70.000 relu\n\n")


def test_shell_expanded_files_are_the_same_as_a_glob(ranks):
    files = ["run_0.hatchet", "run_1.hatchet", "run_2.hatchet"]
    assert tree(["-m", "time/ns"] + files, ranks) == tree(["-m", "time/ns", "run_*.hatchet"], ranks)


def test_sum_derives_ratios_from_the_totals(ranks):
    assert tree(["-m", "avg_time/ns", "-d", "1", "run_*.hatchet"], ranks) == "111.667 ROOT\n\n"  # 670 / 6


def test_mean_divides_the_sum_by_the_number_of_inputs(ranks):
    assert tree(["-m", "time/ns", "--agg", "mean", "run_*.hatchet"], ranks) == (
        "223.333 ROOT\n└─ 223.333 fwd\n   ├─ 200.000 gemm\n   └─ 23.333 relu\n\n")


def test_min_takes_the_smallest_value_of_each_node(ranks):
    assert tree(["-m", "time/ns", "--agg", "min", "run_*.hatchet"], ranks) == (
        "110.000 ROOT\n└─ 110.000 fwd\n   ├─ 100.000 gemm\n   └─ 10.000 relu\n\n")


def test_max_takes_the_largest_value_of_each_node(ranks):
    assert tree(["-m", "time/ns", "--agg", "max", "run_*.hatchet"], ranks) == (
        "320.000 ROOT\n└─ 320.000 fwd\n   ├─ 300.000 gemm\n   └─ 40.000 relu\n\n")


def test_max_rank_names_the_input_with_the_largest_first_metric(ranks):
    assert tree(["-m", "time/ns", "--max-rank", "run_*.hatchet"], ranks) == (
        "670.000 rank=1 ROOT\n└─ 670.000 rank=1 fwd\n   ├─ 600.000 rank=1 gemm\n   └─ 70.000 rank=2 relu\n\n")


def test_agg_rank_is_an_alias_of_max_rank(ranks):
    assert tree(["-m", "time/ns", "--agg-rank", "run_*.hatchet"], ranks) == tree(
        ["-m", "time/ns", "--max-rank", "run_*.hatchet"], ranks)


def test_max_rank_ends_the_print_sorted_lines(ranks):
    out = tree(["-m", "time/ns", "--max-rank", "--print-sorted", "run_*.hatchet"], ranks)
    assert out.split("\n\n")[1].splitlines()[-1] == f"{'relu':105} 70.0 rank=2"


def test_max_rank_is_a_key_of_the_json_nodes(ranks):
    nodes = json.loads(tree(["-m", "time/ns", "--max-rank", "-f", "json", "run_*.hatchet"], ranks))
    assert [(n["name"], n["max_rank"]) for n in nodes] == [("ROOT", 1), ("fwd", 1), ("gemm", 1), ("relu", 2)]


def test_max_rank_reports_the_rank_from_the_file_name_not_the_position(tmp_path):
    write_json(rank_doc(100, 10), tmp_path / "proton.rank5.hatchet")
    write_json(rank_doc(900, 10), tmp_path / "proton.rank7.hatchet")
    assert tree(["-m", "time/ns", "--max-rank", "-d", "1", "proton.rank*.hatchet"], tmp_path) == "1020.000 rank=7 ROOT\n\n"


@pytest.mark.parametrize("names, expected", [
    (["proton.rank3", "proton.rank10"], [3, 10]),  # rank token (the default multi-rank name)
    (["r3_train", "r12_train"], [3, 12]),  # the one integer the names differ in ('r{rank}_train')
    (["run_10", "run_11"], [10, 11]),  # a number is never cut in two
    (["run_3"], [3]),  # trailing _<N>
    (["alpha", "beta"], [0, 1]),  # no number: the position
    (["a.rank0", "b.rank0"], [0, 1]),  # duplicate ranks: the position
])
def test_rank_comes_from_the_file_name_or_the_position(names, expected):
    assert assign_ranks([Series(f"/d/{n}", [f"/d/{n}.hatchet"], [None]) for n in names]) == expected


def test_period_files_given_together_are_summed(tmp_path):
    write_json(rank_doc(100, 10), tmp_path / "run.part_0.hatchet")
    write_json(rank_doc(1, 2, [kernel("late", 5)]), tmp_path / "run.part_1.hatchet")
    assert tree(["-m", "time/ns,count", "run.part_0.hatchet", "run.part_1.hatchet"], tmp_path) == (
        "118.000 5.000 ROOT\n├─ 113.000 4.000 fwd\n│  ├─ 101.000 2.000 gemm\n│  └─ 12.000 2.000 relu\n"
        "└─ 5.000 1.000 late\n\n")


def test_a_period_prefix_names_the_whole_series(tmp_path):
    write_json(rank_doc(100, 10), tmp_path / "run.part_0.hatchet")
    write_json(rank_doc(1, 2), tmp_path / "run.part_1.hatchet")
    expected = tree(["-m", "time/ns", "run.part_*.hatchet"], tmp_path)
    assert tree(["-m", "time/ns", "run"], tmp_path) == tree(["-m", "time/ns", "run.hatchet"], tmp_path) == expected
    assert expected.startswith("113.000 ROOT\n")


def test_periods_are_summed_per_rank_before_the_ranks_are_aggregated(tmp_path):
    write_json(rank_doc(100, 10), tmp_path / "run_0.part_0.hatchet")
    write_json(rank_doc(100, 10), tmp_path / "run_0.part_1.hatchet")
    write_json(rank_doc(150, 10), tmp_path / "run_1.part_0.hatchet")
    assert tree(["-m", "time/ns", "--agg", "max", "--max-rank", "-d", "1", "run_*"], tmp_path) == (
        "220.000 rank=0 ROOT\n\n")


def test_mean_divides_by_the_number_of_ranks_not_of_period_files(tmp_path):
    write_json(rank_doc(100, 10), tmp_path / "run_0.part_0.hatchet")
    write_json(rank_doc(100, 10), tmp_path / "run_0.part_1.hatchet")
    write_json(rank_doc(150, 10), tmp_path / "run_1.part_0.hatchet")
    assert tree(["-m", "time/ns", "--agg", "mean", "-d", "1", "run_*"], tmp_path) == "190.000 ROOT\n\n"


def test_a_period_given_twice_is_an_error(tmp_path):
    write_json(rank_doc(100, 10), tmp_path / "run.part_0.hatchet")
    write_msgpack(rank_doc(100, 10), tmp_path / "run.part_0.hatchet_msgpack")
    result = run_viewer(["-m", "time/ns", "run.part_0.*"], cwd=tmp_path)
    assert (result.code, result.out) == (1, "")
    assert result.err.startswith("ValueError: period 0 of run is given twice") and result.err.count("\n") == 1


def test_json_and_msgpack_inputs_are_aggregated_together(ranks):
    write_msgpack(rank_doc(1000, 1), ranks / "run_3.hatchet_msgpack")
    assert tree(["-m", "time/ns", "--max-rank", "-d", "1", "run_*"], ranks) == "1671.000 rank=3 ROOT\n\n"


def test_a_node_missing_from_an_input_counts_zero_in_sum_and_mean(ranks):
    write_json(rank_doc(0, 0, [kernel("only_here", 30)]), ranks / "run_3.hatchet")
    out = tree(["-m", "time/ns", "--agg", "mean", "run_*.hatchet"], ranks)
    assert "└─ 7.500 only_here\n" in out and out.startswith("175.000 ROOT\n")  # (670 + 30) / 4


def test_a_node_missing_from_an_input_is_left_out_of_min(ranks):
    write_json(rank_doc(50, 5, [kernel("only_here", 30)]), ranks / "run_3.hatchet")
    out = tree(["-m", "time/ns", "--agg", "min", "run_*.hatchet"], ranks)
    assert "└─ 30.000 only_here\n" in out and out.startswith("85.000 ROOT\n")


def test_an_input_without_the_metric_is_left_out_of_max(ranks):
    write_json([node("ROOT", {"count": 0}, [node("fwd", {}, [node("gemm", {"count": 9})])]), {}],
               ranks / "run_3.hatchet")
    assert tree(["-m", "time/ns", "--agg", "max", "-d", "1", "run_*.hatchet"], ranks) == "320.000 ROOT\n\n"


def test_threshold_applies_to_the_aggregated_first_metric(ranks):
    assert tree(["-m", "time/ns", "--agg", "max", "-t", "35", "run_*.hatchet"], ranks) == (
        "320.000 ROOT\n└─ 320.000 fwd\n   ├─ 300.000 gemm\n   └─ 40.000 relu\n\n")
    assert "relu" not in tree(["-m", "time/ns", "--agg", "min", "-t", "35", "run_*.hatchet"], ranks)


def test_a_diff_compares_two_aggregated_sets(ranks):
    for r, gemm in enumerate([110, 330, 220]):
        write_json(rank_doc(gemm, 10), ranks / f"new_{r}.hatchet")
    out = tree(["-m", "time/ns", "-d", "1", "new_*.hatchet", "-diff", "run_*.hatchet"], ranks)
    assert out == ("diff: new=new_*.hatchet base=run_*.hatchet; per metric: base new Δ Δ% (time/ns (inc))\n"
                   "670.000 690.000 +20.000 +2.985% ROOT\n\n")


def test_the_gate_works_on_a_diff_of_sets(ranks):
    for r, gemm in enumerate([110, 330, 220]):
        write_json(rank_doc(gemm, 10), ranks / f"new_{r}.hatchet")
    result = run_viewer(["-m", "time/ns", "--agg", "max", "new_*.hatchet", "-diff", "run_0.hatchet",
                         "-diff", "run_1.hatchet", "-diff", "run_2.hatchet", "--fail-if", "total:time/ns>+5%"],
                        cwd=ranks)
    assert result.code == 1
    assert result.err.splitlines()[1] == ("  total:time/ns>+5%: ROOT: 320.000 -> 340.000 (+20.000, +6.250%)")


def test_max_rank_is_refused_with_a_diff(ranks):
    result = run_viewer(["-m", "time/ns", "--max-rank", "run_*.hatchet", "-diff", "run_0.hatchet"], cwd=ranks)
    assert (result.code, result.err) == (1, "ValueError: --max-rank cannot be combined with -diff\n")


def test_list_shows_the_metrics_of_every_input(ranks):
    write_json([node("ROOT", {"flops16": 0}, [node("k", {"flops16": 5.0})]), {}], ranks / "run_3.hatchet")
    out = tree(["-l", "run_*.hatchet"], ranks)
    assert out.startswith("Available inclusive metrics:\n- count\n- time\n- flops16\n")


def test_device_info_keeps_the_first_device_and_says_so(ranks):
    other = rank_doc(1, 1)
    other[1]["CUDA"]["0"]["arch"] = "80"
    other[1]["CUDA"]["1"] = dict(DEVICE["CUDA"])
    write_json(other, ranks / "run_3.hatchet")
    result = run_viewer(["-m", "time/ns", "-d", "1", "run_*.hatchet"], cwd=ranks)
    assert (result.code, result.out) == (0, "672.000 ROOT\n\n")
    assert result.err == ("proton-viewer: note: device CUDA 0 differs between run_0.hatchet and run_3.hatchet; "
                          "using the one of run_0.hatchet\n")


def test_identical_device_info_is_merged_silently(tmp_path):
    for r in range(2):
        doc = rank_doc(1000, 10)
        doc[0]["children"][0]["children"][0]["metrics"]["bytes"] = 10**6
        write_json(doc, tmp_path / f"run_{r}.hatchet")
    result = run_viewer(["-m", "util", "-i", "fwd", "run_*.hatchet"], cwd=tmp_path)
    assert (result.code, result.err) == (0, "")
    assert "   ├─ 0.208 gemm\n" in result.out  # the device's peaks are known: 2 MB in 2 µs on an H200


def test_one_file_through_a_glob_is_the_single_profile_output(ref_dir):
    single = run_viewer(["-m", "time/ns,avg_time/us", "--print-sorted", "nested.hatchet"], cwd=ref_dir)
    assert run_viewer(["-m", "time/ns,avg_time/us", "--print-sorted", "neste?.hatchet"], cwd=ref_dir) == single


def test_the_same_file_named_twice_is_read_once(ref_dir):
    once = run_viewer(["-m", "time/ns", "nested.hatchet"], cwd=ref_dir)
    assert run_viewer(["-m", "time/ns", "nested.hatchet", "./nested.hatchet", "nest*"], cwd=ref_dir) == once


def test_an_empty_glob_is_a_one_line_error(tmp_path):
    result = run_viewer(["-m", "time/ns", "run_*.hatchet"], cwd=tmp_path)
    assert (result.code, result.out, result.err) == (1, "", "FileNotFoundError: no file matches 'run_*.hatchet'\n")


def test_an_empty_glob_on_the_diff_side_is_a_one_line_error(ranks):
    result = run_viewer(["-m", "time/ns", "run_*.hatchet", "-diff", "base_*.hatchet"], cwd=ranks)
    assert (result.code, result.out, result.err) == (1, "", "FileNotFoundError: no file matches 'base_*.hatchet'\n")


def test_an_unreadable_input_is_a_one_line_error_naming_it(ranks):
    (ranks / "run_3.hatchet").write_text('[{"frame": {"name": "ROOT"}, "metr')
    result = run_viewer(["-m", "time/ns", "run_*.hatchet"], cwd=ranks)
    assert (result.code, result.out) == (1, "")
    assert result.err.startswith("ProfileFormatError: run_3.hatchet: truncated or invalid JSON")
    assert result.err.count("\n") == 1


def test_a_missing_input_among_several_is_a_one_line_error(ranks):
    result = run_viewer(["-m", "time/ns", "run_0.hatchet", "absent.hatchet"], cwd=ranks)
    assert (result.code, result.err) == (1, "ProfileFormatError: absent.hatchet: No such file or directory\n")


def test_help_documents_aggregation_and_the_rank_rule():
    out = run_viewer(["--help"]).out
    for text in ("FILE [FILE ...]", "--agg {sum,mean,min,max}", "--max-rank, --agg-rank", "rank<N>",
                 "NAME.part_<k>.hatchet", "-diff 'base_*.hatchet'"):
        assert text in out
