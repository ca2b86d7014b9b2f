"""What the CPU benchmarks share: the two profilers side by side (results files: :mod:`results_file`).

Imported by ``bench/*.py`` run as scripts (their folder is on ``sys.path``).
"""
from __future__ import annotations

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS = os.path.join(ROOT, "tests")
#: the tests' fake libcupti, made once per process (:func:`fake_cupti`)
_fake: list = []


def proton_ctypes_with_mock():
    """proton_ctypes from this checkout, with the mock GPU backend registered as ``"mock"``."""
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    import proton_ctypes
    from proton_ctypes.backends import select
    from proton_ctypes.backends.mock import MockBackend
    select.register("mock", MockBackend)
    return proton_ctypes


def _tests_importable() -> None:
    """Make the tests' helpers (``tests/fakes``, ``tests/oracle``) importable."""
    if TESTS not in sys.path:
        sys.path.insert(0, TESTS)


def fake_cupti():
    """The tests' fake libcupti (``tests/fakes``: real record layouts, a buffer per launching
    thread), made once per process."""
    if not _fake:
        _tests_importable()
        from fakes.fake_cupti import FakeCupti
        _fake.append(FakeCupti())
    return _fake[0]


def register_fake_cupti(name: str):
    """Register proton_ctypes's CUPTI backend over :func:`fake_cupti` as backend ``name``; returns
    the fake (whose ``launch`` is a kernel launch on the calling thread)."""
    fake = fake_cupti()
    from fakes.fake_cupti import FakeDriver
    from proton_ctypes.backends import select
    from proton_ctypes.backends.cupti import CuptiBackend
    select.register(name, lambda: CuptiBackend(lib=fake, driver=FakeDriver(fake)))
    return fake


def profilers():
    """``(real, ours)``: real triton.profiler made to start on a CPU (tests/oracle/real_proton.py, the oracle
    recipe of ``tests/oracle``) and :func:`proton_ctypes_with_mock`."""
    _tests_importable()
    from oracle.real_proton import load
    real = load()
    return real, proton_ctypes_with_mock()


