"""Our proton-viewer against Proton's real one (triton.profiler.viewer 3.9, hatchet + pandas) on many cases.

Runs only when the environment variable ``PROTON_REAL_VIEWER_PYTHON`` names a Python that can
``import hatchet, triton.profiler.viewer`` (e.g. a venv made with ``python3 -m venv --system-site-packages
/tmp/hatchet-venv && /tmp/hatchet-venv/bin/pip install llnl-hatchet pandas``).  The cases are listed in
real_cases.py (about 10 000 command lines on 129 inputs); the real viewer runs them in a few worker processes
(real_viewer_driver.py).  One test per input file compares all the command lines on that file.

Compared: stdout byte for byte, and for a failing run the one-line error ``<ExceptionType>: <message>``
(ours on stderr, exit code 1).  Accepted differences, the deliberate ones of the README:
* ``-f file_function`` prints ``ROOT`` for ROOT where Proton prints ``ROOT@ROOT``;
* a ROOT metric already named ``x (inc)`` (``-m tokens``): Proton looks for ``x (inc) (inc)`` and fails
  (KeyError, or EmptyFilter under ``-t``); we show the metric;
* a profile left without any frame by the frame removal: Proton fails with ``KeyError: 'metrics'``, we
  say ``ProfileFormatError: …: the profile holds no data …``;
* usage errors (argparse, exit 2): only the exit code is compared (our option list is longer);
* an unknown option: Proton says ``AssertionError: Must specify a file to read``, we name the option (exit 2);
* a vector metric under ``-m``: Proton fails (``TypeError: ufunc 'isfinite' not supported …``), we show each
  node's sum of the elements and say so in a note on stderr (a note that also precedes any other error).
Not compared: several positional files (Proton: ``AssertionError: Must specify a file to read``; we aggregate
them, see aggregate.py).
"""

import atexit
import dataclasses
import json
import os
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from .helpers import run_viewer

REAL_PYTHON = os.environ.get("PROTON_REAL_VIEWER_PYTHON")
DRIVER = Path(__file__).parent / "real_viewer_driver.py"
WORKERS = max(1, min(4, os.cpu_count() or 1))

pytestmark = pytest.mark.skipif(
    not REAL_PYTHON,
    reason="set PROTON_REAL_VIEWER_PYTHON to a Python with llnl-hatchet, pandas and triton to compare "
           "against the real proton-viewer")

if REAL_PYTHON:
    from .real_cases import build_cases, group_names
    _DIR = tempfile.mkdtemp(prefix="viewer-real-")
    atexit.register(shutil.rmtree, _DIR, True)
    CASES = build_cases(_DIR)
    GROUPS = group_names(CASES)
else:
    CASES, GROUPS = [], []


def _run_real(chunk):
    proc = subprocess.run([REAL_PYTHON, str(DRIVER)], input=json.dumps([c.real for c in chunk]),
                          capture_output=True, text=True, timeout=3000)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def real_results():
    """Run every case through the real viewer once; map case ident -> its result."""
    check = subprocess.run([REAL_PYTHON, "-c", "import hatchet, triton.profiler.viewer"], capture_output=True)
    if check.returncode != 0:
        pytest.fail(f"{REAL_PYTHON} cannot import hatchet and triton.profiler.viewer:\n{check.stderr.decode()}")
    chunks = [CASES[i::WORKERS] for i in range(WORKERS)]
    with ThreadPoolExecutor(WORKERS) as pool:
        results = list(pool.map(_run_real, chunks))
    return {case.ident: result for chunk, res in zip(chunks, results) for case, result in zip(chunk, res)}


def _is_inc_inc_deviation(case, exc):
    return (exc is not None and any("tokens" in a.lower() for a in case.ours)
            and ("(inc) (inc)" in exc[1] or exc[0] == "EmptyFilter"))


VECTOR_NOTE = "is a vector metric"


def _without_vector_note(err: str) -> str:
    return "".join(line for line in err.splitlines(keepends=True) if VECTOR_NOTE not in line)


def compare(case, real):
    """Return None when our run of ``case`` agrees with the real result, else a description."""
    ours = run_viewer(case.ours)
    if VECTOR_NOTE in ours.err and real["exc"] is not None and real["exc"][0] == "TypeError" \
            and "isfinite" in real["exc"][1]:
        return None if ours.code == 0 else f"vector metric expected to show: {ours}"
    if VECTOR_NOTE in ours.err:
        ours = dataclasses.replace(ours, err=_without_vector_note(ours.err))
    expected = real["stdout"]
    if "file_function" in case.ours:
        expected = expected.replace(" ROOT@ROOT\n", " ROOT\n").replace(f"{'ROOT@ROOT':105} ", f"{'ROOT':105} ")
    if _is_inc_inc_deviation(case, real["exc"]) and (real["exc"][0] != "EmptyFilter" or ours.code == 0):
        return None if "(inc) (inc)" not in ours.err else f"inc-inc deviation but we fail: {ours.err}"
    if real["exc"] == ["KeyError", "'metrics'"]:  # every frame was removed: Proton crashes reading ROOT
        return None if ours.code == 1 and "holds no data" in ours.err else f"empty profile: {ours}"
    if real["code"] == 2:  # argparse usage error
        return None if ours.code == 2 else f"usage error expected, got {ours}"
    if case.ident == "err-unknown-option":  # Proton: "Must specify a file to read"; ours names the option
        named = ours.code == 2 and "unrecognized arguments: --bogus" in ours.err
        return None if named and real["exc"] == ["AssertionError", "Must specify a file to read"] else f"{ours}"
    if ours.out != expected:
        return f"stdout differs:\n--- real\n{expected}\n--- ours\n{ours.out}\n--- our stderr: {ours.err}"
    if real["exc"] is None:
        return None if (ours.code, ours.err) == (real["code"], "") else f"unexpected error: {ours}"
    kind, message = real["exc"]
    line = f"{kind}: {' '.join(message.split(chr(10))).rstrip()}" if message else kind
    if ours.code != 1 or ours.err.rstrip("\n") != line:
        return f"error differs: real {line!r}, ours {ours.err!r} (exit {ours.code})"
    return None


@pytest.mark.parametrize("group", GROUPS)
def test_same_output_as_real_viewer(group, real_results):
    cases = [c for c in CASES if c.group == group]
    failures = [(c, compare(c, real_results[c.ident])) for c in cases]
    failures = [(c, why) for c, why in failures if why]
    detail = "\n\n".join(f"[{c.ident}] proton-viewer {' '.join(c.ours)}\n{why}" for c, why in failures[:3])
    assert not failures, f"{len(failures)} of {len(cases)} command lines differ:\n{detail}"


def test_enough_cases_are_compared():
    assert len(CASES) > 3000 and len(GROUPS) > 100
    print(f"compared {len(CASES)} command lines on {len(GROUPS)} inputs against the real proton-viewer")
