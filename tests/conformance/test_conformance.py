"""Conformance with the real triton.profiler (3.9) on host-only scenarios.

Every scenario of ``scenarios.py`` runs in a fresh process under the real profiler (the
oracle of proton-spec §0.1) and under proton_ctypes; the files written, the values
returned and the exceptions raised must be the same.  Times are compared by presence
only; the deliberate differences of spec §0.3 are normalised in ``normalize.py``.
"""
import inspect
import os
import subprocess
import sys

import pytest

from . import scenarios
from .normalize import compare_dirs

HERE = os.path.dirname(os.path.abspath(__file__))
NAMES = [n for n, f in inspect.getmembers(scenarios, inspect.isfunction)
         if f.__module__ == scenarios.__name__ and not n.startswith("_")]  # _name: a helper


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


def _spawn(impl, name, outdir):
    env = dict(os.environ)
    env.pop("TRITON_PROTON_DISABLE", None)
    return subprocess.Popen([sys.executable, os.path.join(HERE, "run_scenario.py"), impl, name, str(outdir)],
                            cwd=str(outdir), env=env)


@pytest.mark.skipif(REASON is not None, reason=REASON or "")
@pytest.mark.parametrize("name", NAMES)
def test_scenario_matches_real_proton(name, tmp_path):
    real, ours = tmp_path / "real", tmp_path / "ours"
    real.mkdir()
    ours.mkdir()
    procs = [_spawn("real", name, real), _spawn("ours", name, ours)]  # both at once
    for p in procs:
        assert p.wait(timeout=120) == 0
    problems = compare_dirs(name, str(real), str(ours))
    assert not problems, "\n".join(problems)
