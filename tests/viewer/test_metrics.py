"""Metric resolution and derived metrics, including our deliberate differences (README)."""

import pytest

from .helpers import run_viewer
from .profiles import node, write_json

DEVICE = {"arch": "90", "bus_width": 6016, "clock_rate": 1980000, "memory_clock_rate": 3201000, "num_sms": 132}


def _kernel(name, time_ns, count=1, device="0", **extra):
    return node(name, {"count": count, "device_id": device, "device_type": "CUDA", "time (ns)": time_ns,
                       **extra})


def _values(tmp_path, doc, metric, **kw):
    write_json(doc, tmp_path / "p.hatchet")
    result = run_viewer(["-m", metric, "p.hatchet"] + kw.get("extra", []), cwd=tmp_path)
    assert result.code == 0, result.err
    return [line.rsplit(" ", 1)[0].split(" ")[-1] for line in result.out.splitlines() if line]


def _profile(*children, root=None, device=None):
    root = root if root is not None else {"bytes": 0, "count": 0, "flops16": 0, "time (ns)": 0}
    return [node("ROOT", root, list(children)), {"CUDA": {"0": device or DEVICE}}]


TWO_KERNELS = _profile(node("s", {}, [_kernel("a", 2000, count=2, bytes=4000, flops16=1e6),
                                      _kernel("b", 6000, count=1, bytes=0, flops16=3e6)]))


@pytest.mark.parametrize("metric, expected", [
    ("time/ns", ["8000.000", "8000.000", "2000.000", "6000.000"]),
    ("time/us", ["8.000", "8.000", "2.000", "6.000"]),
    ("time/s", ["0.000", "0.000", "0.000", "0.000"]),
    ("avg_time/ns", ["2666.667", "2666.667", "1000.000", "6000.000"]),
    ("count", ["3.000", "3.000", "2.000", "1.000"]),
    ("time", ["8000.000", "8000.000", "2000.000", "6000.000"]),
    ("TIME (ns)", ["8000.000", "8000.000", "2000.000", "6000.000"]),
    ("gflop16/s", ["500.000", "500.000", "500.000", "500.000"]),
    ("tflop16/s", ["0.500", "0.500", "0.500", "0.500"]),
    ("gbyte/s", ["0.500", "0.500", "2.000", "0.000"]),
    ("time/%", ["100.000", "100.000", "25.000", "75.000"]),
])
def test_derived_metric_values(tmp_path, metric, expected):
    assert _values(tmp_path, TWO_KERNELS, metric) == expected


def test_util_is_the_larger_of_compute_and_memory_bound_per_kernel(tmp_path):
    peak16 = (132 / 114 * 1980000 / (1755 * 1e3) * 1513) * 1e12 / 2
    peak_bw = 2 * 6016 * 3201000 * 1e3 / 8
    a = max(1e6 / peak16, 4000 / peak_bw) / 2000e-9
    b = max(3e6 / peak16, 0 / peak_bw) / 6000e-9
    assert _values(tmp_path, TWO_KERNELS, "util") == ["nan", "nan", f"{a:.3f}", f"{b:.3f}"]


def test_exclusive_percentage_is_a_share_of_the_column_total(tmp_path):
    doc = _profile(node("s", {"cpu_time (ns)": 300}, [_kernel("a", 1)]), node("t", {"cpu_time (ns)": 100}, [
        _kernel("b", 1)]))
    assert _values(tmp_path, doc, "cpu_time/%") == ["nan", "75.000", "nan", "25.000", "nan"]


def test_cpu_time_not_at_root_shows_raw_per_node_values(tmp_path):
    doc = _profile(node("s", {"cpu_time (ns)": 3000}, [node("t", {"cpu_time (ns)": 1000}, [_kernel("a", 1)])]))
    assert _values(tmp_path, doc, "cpu_time/us") == ["nan", "3.000", "1.000", "nan"]
    assert _values(tmp_path, doc, "avg_cpu_time/us") == ["nan", "3.000", "1.000", "nan"]


def test_metric_already_inclusive_is_shown_instead_of_failing(ref_dir):
    # Proton resolves "tokens" to "tokens (inc) (inc)" and raises KeyError (a deliberate difference, README)
    result = run_viewer(["-m", "tokens", "metrics.hatchet"], cwd=ref_dir)
    assert (result.code, result.err) == (0, "")
    assert result.out.splitlines()[:4] == ["0.000 ROOT", "├─ nan config", "│  └─ nan add_one",
                                           "└─ 256.000 outer"]


def test_file_function_format_prints_root_as_root(ref_dir):
    # Proton prints ROOT@ROOT (a deliberate difference, README)
    result = run_viewer(["-m", "time/ns", "-f", "file_function", "pyctx.hatchet"], cwd=ref_dir)
    assert result.out.splitlines()[:2] == ["3360.000 ROOT", "└─ 3360.000 golden.py@<module>"]


def test_avg_time_without_count_raises_keyerror_like_proton(tmp_path):
    doc = _profile(node("s", {}, [node("k", {"time (ns)": 5})]), root={"time (ns)": 0})
    write_json(doc, tmp_path / "p.hatchet")
    result = run_viewer(["-m", "avg_time/ns", "p.hatchet"], cwd=tmp_path)
    assert (result.code, result.err) == (1, "KeyError: 'count (inc)'\n")


def test_util_on_unknown_architecture_names_it(tmp_path):
    doc = _profile(_kernel("a", 10, flops16=5.0, bytes=1), device=dict(DEVICE, arch="75"))
    write_json(doc, tmp_path / "p.hatchet")
    result = run_viewer(["-m", "util", "p.hatchet"], cwd=tmp_path)
    assert (result.code, result.err) == (1, "ValueError: Unsupported architecture: 75\n")


@pytest.mark.parametrize("device_type, arch, flops_per_clock, bandwidth", [
    ("HIP", "gfx942", 4096, 5.3e12), ("HIP", "gfx90a", 1024, 3.2e12), ("HIP", "gfx950", 8192, 8.0e12)])
def test_util_on_amd_uses_the_arch_tables(tmp_path, device_type, arch, flops_per_clock, bandwidth):
    kernel = node("a", {"count": 1, "device_id": "0", "device_type": "HIP", "time (ns)": 1000,
                        "flops8": 1e9, "bytes": 10**6})
    doc = [node("ROOT", {"bytes": 0, "count": 0, "flops8": 0, "time (ns)": 0}, [kernel]),
           {device_type: {"0": dict(DEVICE, arch=arch)}}]
    peak = flops_per_clock * 132 * 1980000 * 1e3 / 1
    expected = max(1e9 / peak, 1e6 / bandwidth) / 1e-6
    assert _values(tmp_path, doc, "util") == ["nan", f"{expected:.3f}"]


# --- vector metrics (Proton 3.9 stores {"vec": [1, 2]}; its viewer fails on them) ------------

VECTORS = [node("ROOT", {}, [node("a", {"vec": [1, 2], "n": 1, "vd": [1.5, None]}),
                             node("b", {"vec": [3, 4, 5]})]), {}]


def test_a_vector_metric_shows_the_sum_of_its_elements_and_says_so(tmp_path):
    # Proton's viewer (and ours before): TypeError: ufunc 'isfinite' not supported ...
    write_json(VECTORS, tmp_path / "v.hatchet")
    result = run_viewer(["-m", "vec,vd,n", "v.hatchet"], cwd=tmp_path)
    assert (result.code, result.out) == (0, "nan nan nan ROOT\n├─ 3.000 nan 1.000 a\n└─ 12.000 nan nan b\n\n")
    assert result.err == ("proton-viewer: note: vd is a vector metric: each node shows the sum of its elements\n"
                          "proton-viewer: note: vec is a vector metric: each node shows the sum of its elements\n")


def test_a_vector_metric_not_shown_is_not_mentioned(tmp_path):
    write_json(VECTORS, tmp_path / "v.hatchet")
    result = run_viewer(["-m", "n", "v.hatchet"], cwd=tmp_path)
    assert (result.code, result.err) == (0, "")


def test_a_vector_metric_at_root_rolls_up_its_sums(tmp_path):
    doc = [node("ROOT", {"vec": [0, 0]}, [node("a", {"vec": [1, 2]}, [node("k", {"vec": [10, 20]})])]), {}]
    assert _values(tmp_path, doc, "vec") == ["33.000", "33.000", "30.000"]


@pytest.mark.parametrize("agg, expected", [("sum", ["nan", "6.000", "24.000"]), ("mean", ["nan", "3.000", "12.000"])])
def test_vector_metrics_of_several_inputs_are_combined_element_by_element(tmp_path, agg, expected):
    write_json(VECTORS, tmp_path / "r0.hatchet")
    write_json(VECTORS, tmp_path / "r1.hatchet")
    result = run_viewer(["-m", "vec", "r0.hatchet", "r1.hatchet", "--agg", agg], cwd=tmp_path)
    assert result.code == 0, result.err
    assert [line.split(" ")[-2] for line in result.out.splitlines() if line] == expected
