"""Text layout: hatchet's console tree and Proton's sorted list and warnings."""

from .helpers import run_viewer
from .profiles import node, write_json


def _k(name, t, **extra):
    return node(name, {"count": 1, "device_id": "0", "device_type": "CUDA", "time (ns)": t, **extra})


def _run(tmp_path, doc, *argv):
    write_json(doc, tmp_path / "p.hatchet")
    return run_viewer(list(argv) + ["p.hatchet"], cwd=tmp_path)


def test_children_are_sorted_by_name_whatever_the_file_order(tmp_path):
    doc = [node("ROOT", {"time (ns)": 0}, [_k("zeta", 1), _k("Alpha", 2), _k("beta", 3)]), {}]
    assert _run(tmp_path, doc, "-m", "time/ns").out == (
        "6.000 ROOT\n├─ 2.000 Alpha\n├─ 3.000 beta\n└─ 1.000 zeta\n\n")


def test_glyphs_continue_under_non_last_children(tmp_path):
    doc = [node("ROOT", {"time (ns)": 0}, [node("a", {}, [node("b", {}, [_k("k", 1)]), _k("c", 1)]),
                                           _k("d", 1)]), {}]
    assert _run(tmp_path, doc, "-m", "time/ns").out == (
        "3.000 ROOT\n├─ 2.000 a\n│  ├─ 1.000 b\n│  │  └─ 1.000 k\n│  └─ 1.000 c\n└─ 1.000 d\n\n")


def test_depth_limits_the_printed_levels(tmp_path):
    doc = [node("ROOT", {"time (ns)": 0}, [node("a", {}, [_k("k", 1)])]), {}]
    assert _run(tmp_path, doc, "-m", "time/ns", "-d", "2").out == "1.000 ROOT\n└─ 1.000 a\n\n"
    assert _run(tmp_path, doc, "-m", "time/ns", "-d", "0").out == "\n"


def test_values_have_three_decimals_and_nan(tmp_path):
    doc = [node("ROOT", {"time (ns)": 0}, [node("s", {"ratio": 0.12345}, [_k("k", 1)])]), {}]
    assert _run(tmp_path, doc, "-m", "time,ratio").out == (
        "1.000 nan ROOT\n└─ 1.000 0.123 s\n   └─ 1.000 nan k\n\n")


def test_sorted_list_skips_the_first_row_and_pads_names_to_105_columns(tmp_path):
    long = "k" * 120
    doc = [node("ROOT", {"time (ns)": 0}, [_k(long, 12345), _k("short", 7)]), {}]
    lines = _run(tmp_path, doc, "-m", "time/ns", "--print-sorted").out.splitlines()
    assert lines[4:] == ["Sorted kernels by metric time/ns (inc)", f"{'k' * 100 + '...':105} 1.234e+04",
                         f"{'short':105} 7.0"]


def test_sorted_list_puts_nan_last(tmp_path):
    doc = [node("ROOT", {"time (ns)": 0}, [node("s", {"ratio": 2.0}, [_k("k", 1)]), node("t", {"ratio": 5.0},
                                                                                         [_k("j", 1)])]), {}]
    lines = _run(tmp_path, doc, "-m", "ratio", "--print-sorted").out.splitlines()
    assert [line.split()[0] for line in lines[lines.index("Sorted kernels by metric ratio") + 1:]] == [
        "s", "ROOT", "k", "j"]


def test_negative_bytes_warn_about_overflow(tmp_path):
    doc = [node("ROOT", {"bytes": 0, "time (ns)": 0}, [_k("k", 1, bytes=-5)]), {}]
    result = _run(tmp_path, doc, "-m", "bytes")
    assert result.out == ("-5.000 ROOT\n└─ -5.000 k\n\nWarning: Negative byte values detected, this is usually "
                          "the result of a datatype overflow\n\n")


def test_non_numeric_metric_is_an_error_not_a_traceback(tmp_path):
    doc = [node("ROOT", {"time (ns)": 0}, [_k("k", 1)]), {}]
    result = _run(tmp_path, doc, "-m", "device_id")
    assert result.code == 1 and result.out == ""
    assert result.err.startswith("TypeError: ufunc 'isfinite' not supported") and result.err.count("\n") == 1
