"""tests/upstream/run.py, the harness that runs Proton's own suite: the record it writes says why
a test file that cannot even be imported here is not run, in words, and counts it apart from the
failures (checked on a made-up run: no upstream file is needed)."""
import importlib.util
import os
import pathlib
import subprocess
import sys

_spec = importlib.util.spec_from_file_location(
    "upstream_run", pathlib.Path(__file__).resolve().parent / "upstream" / "run.py")
run = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(run)


def _summary(tests):
    counts = {k: 0 for k in ("passed", "failed", "skipped", "error")}
    for t in tests.values():
        counts[t["outcome"]] += 1
    return {"counts": counts, "tests": tests}


def test_a_file_importing_libproton_is_not_runnable_because_it_tests_the_cpp_binding(tmp_path):
    (tmp_path / "test_lib.py").write_text("import triton._C.libproton.proton as libproton\n")
    (tmp_path / "test_new.py").write_text("from triton.experimental import something_new\n")
    err_lib = "ImportError: cannot import name '_select_backend' from 'proton_ctypes.profile'"
    err_new = "ImportError: cannot import name 'clc' from 'triton.experimental.gluon'"
    doc = run.results_doc(_summary({
        "test_lib": {"outcome": "error", "reason": err_lib},
        "test_new": {"outcome": "error", "reason": err_new},
        "test_profile.py::test_a": {"outcome": "passed", "reason": ""},
        "test_profile.py::test_b": {"outcome": "failed", "reason": "KeyError: 'x'"},
        "test_profile.py::test_c": {"outcome": "skipped", "reason": "Requires at least two CUDA devices"},
    }), "cmd", str(tmp_path))
    assert doc["not_runnable"]["test_lib"].startswith("tests libproton, Proton's C++ binding")
    assert err_lib in doc["not_runnable"]["test_lib"]
    assert doc["not_runnable"]["test_new"].startswith("its imports need a Triton newer than the installed")
    assert doc["not_runnable"]["test_profile.py::test_c"] == "Requires at least two CUDA devices"
    assert doc["failures"] == ["test_profile.py::test_b"]
    assert (doc["passed"], doc["failed"], doc["skipped"], doc["errors"]) == (1, 1, 1, 0)


def test_an_import_error_of_anything_else_keeps_its_own_words():
    assert run.import_reason("import numpy\n", "ModuleNotFoundError: No module named 'hatchet'", "3.6.0") == \
        "ModuleNotFoundError: No module named 'hatchet'"


def test_real_proton_of_an_overlay_is_what_the_suite_imports_when_one_is_named(installed_proton_overlay):
    shim = pathlib.Path(__file__).resolve().parent / "upstream" / "shim"
    env = dict(os.environ, PROTON_UPSTREAM_IMPL="real", PROTON_BENCH_OVERLAY=str(installed_proton_overlay),
               PYTHONPATH=str(shim))
    env.pop("PROTON_UPSTREAM_ORACLE", None)
    r = subprocess.run([sys.executable, "-c", "import triton.profiler as p; print(p.__file__)"], env=env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.strip() == str(installed_proton_overlay / "triton" / "profiler" / "__init__.py")
