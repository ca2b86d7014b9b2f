"""Run tests that need hatchet + pandas here, or under ``$PROTON_REAL_VIEWER_PYTHON`` when this Python lacks them.

``@needs_hatchet`` wraps a test function.  With hatchet and pandas importable the test simply runs.
Otherwise, when ``PROTON_REAL_VIEWER_PYTHON`` names a Python that has them (CI's /tmp/proton-real-viewer
venv), the whole test module is run once by pytest under that Python and each wrapped test reports the
outcome of its own twin there (pass, failure with its message, or skip).  Without either the test skips.
"""

import functools
import importlib.util
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

REAL_PYTHON = os.environ.get("PROTON_REAL_VIEWER_PYTHON")
REPO = Path(__file__).resolve().parents[2]
_NESTED = "PROTON_VIEWER_API_NESTED"  # set in the nested run: never delegate twice
HAVE_HATCHET = all(importlib.util.find_spec(m) is not None for m in ("hatchet", "pandas"))
NO_HATCHET_REASON = ("needs llnl-hatchet and pandas (pip install proton_ctypes[hatchet]) here, or "
                     "PROTON_REAL_VIEWER_PYTHON naming a Python that has them")


@functools.lru_cache(maxsize=None)
def _nested_results(test_file):
    """Run ``test_file`` under REAL_PYTHON; map each test's name (with parameters) to (outcome, text)."""
    with tempfile.TemporaryDirectory(prefix="viewer-api-") as tmp:
        report = Path(tmp) / "report.xml"
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])))
        env[_NESTED] = "1"
        proc = subprocess.run(
            [REAL_PYTHON, "-m", "pytest", str(test_file), "-q", "-p", "no:cacheprovider", f"--junitxml={report}"],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=1200)
        if not report.exists():
            return {None: ("error", f"pytest under {REAL_PYTHON} did not run (exit {proc.returncode}):\n"
                                    f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")}
        results = {}
        for case in ET.parse(report).getroot().iter("testcase"):
            outcome, text = "passed", ""
            for child in case:
                if child.tag in ("failure", "error", "skipped"):
                    outcome = child.tag
                    text = (child.get("message") or "") + "\n" + (child.text or "")
                    break
            results[case.get("name")] = (outcome, text)
        return results


def _current_test_name():
    # "tests/viewer/test_x.py::test_name[param] (call)" -> "test_name[param]"
    current = os.environ.get("PYTEST_CURRENT_TEST", "")
    return current.rsplit(" ", 1)[0].split("::")[-1]


def needs_hatchet(test):
    """Decorator: run ``test`` where hatchet and pandas are importable (see the module docstring)."""
    test_file = sys.modules[test.__module__].__file__

    @functools.wraps(test)
    def wrapper(*args, **kwargs):
        if HAVE_HATCHET:
            return test(*args, **kwargs)
        if os.environ.get(_NESTED):
            pytest.fail(f"{sys.executable} (PROTON_REAL_VIEWER_PYTHON) cannot import hatchet and pandas")
        if not REAL_PYTHON:
            pytest.skip(NO_HATCHET_REASON)
        results = _nested_results(test_file)
        if None in results:
            pytest.fail(results[None][1], pytrace=False)
        name = _current_test_name()
        if name not in results:
            pytest.fail(f"{name} did not run under {REAL_PYTHON}", pytrace=False)
        outcome, text = results[name]
        if outcome == "skipped":
            pytest.skip(f"under {REAL_PYTHON}: {text.strip()}")
        if outcome != "passed":
            pytest.fail(f"under {REAL_PYTHON} ({outcome}):\n{text}", pytrace=False)

    return wrapper
