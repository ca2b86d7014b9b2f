"""bench/variants.py: ``proton_ctypes:env:NAME=VALUE`` implementations, A/B runs of one switch
inside the benches' interleaved rounds (bench/longrun.py, bench/threads.py)."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))
import variants  # noqa: E402

sys.path.remove(str(BENCH))


def test_an_env_variant_names_its_switches_and_runs_proton_ctypes(monkeypatch):
    # set through monkeypatch first, so that what apply() sets is undone after the test
    monkeypatch.setenv("PROTON_CTYPES_PARSE_BATCH", "")
    monkeypatch.setenv("PROTON_CTYPES_PER_THREAD_BUFFERS", "")
    impl = "proton_ctypes:env:PROTON_CTYPES_PARSE_BATCH=8+PROTON_CTYPES_PER_THREAD_BUFFERS=0"
    assert variants.switches(impl) == {"PROTON_CTYPES_PARSE_BATCH": "8", "PROTON_CTYPES_PER_THREAD_BUFFERS": "0"}
    assert variants.apply(impl) == "proton_ctypes"
    assert os.environ["PROTON_CTYPES_PARSE_BATCH"] == "8" and os.environ["PROTON_CTYPES_PER_THREAD_BUFFERS"] == "0"
    assert variants.row_fields(impl) == {"impl": "proton_ctypes",
                                         "variant": "env:PROTON_CTYPES_PARSE_BATCH=8+PROTON_CTYPES_PER_THREAD_BUFFERS=0"}


def test_other_implementations_pass_through_untouched():
    for impl in ("proton", "proton_ctypes", "floor:kernels"):
        assert variants.apply(impl) == impl
    for impl in ("proton", "proton_ctypes"):
        assert variants.row_fields(impl) == {"impl": impl}


def test_a_cupti_floor_is_a_bare_row_named_by_its_recipe():
    assert variants.row_fields("floor:pylog") == {"impl": "bare", "floor": "pylog"}


def test_a_malformed_env_variant_is_refused():
    with pytest.raises(ValueError, match="NAME=VALUE"):
        variants.switches("proton_ctypes:env:PROTON_CTYPES_PARSE_BATCH")


def test_longrun_runs_an_env_variant_beside_the_plain_implementation_and_counts_every_kernel(tmp_path):
    out = tmp_path / "longrun.json"
    impl = "proton_ctypes:env:PROTON_CTYPES_PARSE_BATCH=1"
    subprocess.run([sys.executable, str(BENCH / "longrun.py"), "--backend", "fake-cupti", "--launches", "20000",
                    "--sample-every", "5000", "--impls", f"proton_ctypes,{impl}", "--json", str(out)],
                   check=True, capture_output=True, text=True, timeout=120)
    rows = [r for r in json.loads(out.read_text())["rows"] if r["impl"] == "proton_ctypes"]
    assert [r.get("variant") for r in rows] == [None, "env:PROTON_CTYPES_PARSE_BATCH=1"]
    assert all(r["kernels"] == r["expected_kernels"] == 20000 for r in rows)
