"""Conformance with the real triton.profiler (3.9) on host-only scenarios.

Every scenario of ``scenarios/`` runs in a fresh process under the real profiler (the
oracle of tests/oracle/real_proton.py) and under proton_ctypes; the files written, the values
returned and the exceptions raised must be the same.  Times are compared by presence
only; the deliberate differences (README) are normalised in ``normalize.py``.
Test ids are ``<area>-<scenario>`` (``-k scope-`` runs one area); the areas are those of
the test files of ``tests/`` (``scenarios/scope.py`` <-> ``tests/test_scope.py``).
"""
import os
import subprocess
import sys

import pytest

from . import scenarios
from .normalize import compare_dirs

HERE = os.path.dirname(os.path.abspath(__file__))
SCENARIOS = scenarios.collect()


def _oracle_available():
    try:
        import importlib.util
        if importlib.util.find_spec("triton") is None:
            return "triton is not installed"
        from triton import __version__ as v
        if not v.startswith("3.9"):
            return f"the oracle needs triton 3.9, found {v}"
    except Exception as e:  # pragma: no cover
        return str(e)
    import shutil
    if not (shutil.which("cc") or shutil.which("gcc")):
        return "no C compiler for the stub libraries"
    return None


REASON = _oracle_available()

#: scenario -> where proton_ctypes still writes something else than Proton 3.9 (product bugs,
#: not deliberate differences: those are normalised in normalize.DEVIATIONS).  Strict: a fix
#: makes the test XPASS, and the entry must go.
KNOWN = {
    "launch_hook_metric_kind_fixed_by_first_launch":
        "launch metadata naming one metric with and without '(pty)' on one kernel: Proton keeps two metrics "
        "that collide under one name in the file (the property's value is written last and wins); "
        "proton_ctypes keeps one, whose kind its first launch fixed, as for scope metrics",
}


def _spawn(impl, area, name, outdir):
    env = dict(os.environ)
    env.pop("TRITON_PROTON_DISABLE", None)
    return subprocess.Popen([sys.executable, os.path.join(HERE, "run_scenario.py"), impl, f"{area}.{name}",
                             str(outdir)], cwd=str(outdir), env=env)


def test_every_area_has_scenarios_and_names_are_unique():
    areas = [a for a, _ in SCENARIOS]
    assert sorted(set(areas)) == sorted(scenarios.AREAS)
    names = [n for _, n in SCENARIOS]
    assert len(names) == len(set(names))


def test_known_differences_and_deviations_name_existing_scenarios():
    from .normalize import DEVIATIONS
    names = {n for _, n in SCENARIOS}
    assert set(KNOWN) <= names and set(DEVIATIONS) <= names


@pytest.mark.skipif(REASON is not None, reason=REASON or "")
@pytest.mark.parametrize("area,name", [
    pytest.param(a, n, id=f"{a}-{n}",
                 marks=[pytest.mark.xfail(strict=True, reason=f"product: {KNOWN[n]}")] if n in KNOWN else [])
    for a, n in SCENARIOS])
def test_scenario_matches_real_proton(area, name, tmp_path):
    real, ours = tmp_path / "real", tmp_path / "ours"
    real.mkdir()
    ours.mkdir()
    procs = [_spawn("real", area, name, real), _spawn("ours", area, name, ours)]  # both at once
    for p in procs:
        assert p.wait(timeout=120) == 0
    problems = compare_dirs(name, str(real), str(ours))
    assert not problems, "\n".join(problems)
