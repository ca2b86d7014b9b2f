"""One script run under the real Proton (the CPU recipe of :mod:`.real_proton`) and under
proton_ctypes, each in a fresh process, for tests that compare the two.

The script sees the profiler as ``p`` (``triton.profiler`` or ``proton_ctypes``) and the
``tests`` folder on ``sys.path``; it runs in its own working directory and whatever it prints
last is its result.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from typing import Dict, Optional

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(TESTS)
IMPLS = ("real", "ours")
#: seconds one run may take
TIMEOUT_S = 300

_PREAMBLE = """\
import sys, warnings
warnings.simplefilter("ignore")
sys.path[:0] = [{tests!r}, {root!r}]
if {impl!r} == "real":
    from oracle.real_proton import load
    p = load()
else:
    import proton_ctypes as p
"""


def oracle_missing() -> Optional[str]:
    """Why the real Proton cannot run here (triton 3.9 or a C compiler missing), else None."""
    try:
        import triton
    except ImportError:
        return "triton is not installed"
    if not triton.__version__.startswith("3.9"):
        return f"the oracle needs triton 3.9, found {triton.__version__}"
    if not (shutil.which("cc") or shutil.which("gcc")):
        return "no C compiler for the stub libraries"
    return None


def script(impl: str, body: str) -> str:
    """The Python source that loads profiler ``impl`` as ``p`` and then runs ``body``."""
    return _PREAMBLE.format(tests=TESTS, root=ROOT, impl=impl) + textwrap.dedent(body)


def run_both(body: str, folders: Dict[str, str]) -> Dict[str, str]:
    """Run ``body`` under both profilers at once, each in its folder of ``folders`` (by impl);
    return the last line each printed.  A run that fails fails the test with its stderr."""
    procs = {impl: subprocess.Popen([sys.executable, "-c", script(impl, body)], cwd=folders[impl],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for impl in IMPLS}
    out = {}
    for impl, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=TIMEOUT_S)
        assert proc.returncode == 0, f"{impl}: {stderr[-3000:]}"
        lines = stdout.strip().splitlines()
        out[impl] = lines[-1] if lines else ""
    return out
