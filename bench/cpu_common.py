"""What the CPU benchmarks share: the two profilers side by side (results files: :mod:`results_file`).

Imported by ``bench/*.py`` run as scripts (their folder is on ``sys.path``).
"""
from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def proton_ctypes_with_mock():
    """proton_ctypes from this checkout, with the mock GPU backend registered as ``"mock"``."""
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    import proton_ctypes
    from proton_ctypes.backends import select
    from proton_ctypes.backends.mock import MockBackend
    select.register("mock", MockBackend)
    return proton_ctypes


def profilers():
    """``(real, ours)``: real triton.profiler made to start on a CPU (tests/oracle/real_proton.py, the oracle
    recipe of ``tests/oracle``) and :func:`proton_ctypes_with_mock`."""
    tests = os.path.join(ROOT, "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    from oracle.real_proton import load
    real = load()
    return real, proton_ctypes_with_mock()


