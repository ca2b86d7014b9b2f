"""Host-only scenarios run under both the real triton.profiler (oracle) and proton_ctypes.

One module per behaviour area, the same areas as the test files of ``tests/``
(``scope.py`` <-> ``tests/test_scope.py``, ...).  Each scenario is
``def name(proton, out, rec)``: ``proton`` is the profiler module, ``out(name)`` a path in
the output folder, ``rec(key, value)`` records a returned value.  Exceptions are recorded
by the runner (type and message).  Keep scenarios free of timing-dependent values; times
are compared by presence only.  Names starting with ``_`` are helpers, not scenarios.
Scenario names are unique across areas (``normalize.DEVIATIONS`` is keyed by name).
"""
import importlib
import inspect

#: the areas, in the order the tests are listed
AREAS = ("scope", "metric", "state", "context", "profile", "data", "writers", "hooks", "mode")


def _module(area):
    return importlib.import_module(f"{__name__}.{area}")


def collect():
    """Every scenario as ``(area, name)``, areas in :data:`AREAS` order, names sorted."""
    found = []
    for area in AREAS:
        mod = _module(area)
        found += [(area, n) for n, f in inspect.getmembers(mod, inspect.isfunction)
                  if f.__module__ == mod.__name__ and not n.startswith("_")]
    names = [n for _, n in found]
    dup = sorted({n for n in names if names.count(n) > 1})
    assert not dup, f"scenario names must be unique across areas: {dup}"
    return found


def get(area, name):
    """The scenario function ``name`` of ``area``."""
    return getattr(_module(area), name)
