"""``proton_ctypes:env:NAME=VALUE`` implementations: proton_ctypes with one environment switch set.

An A/B of one of proton_ctypes's diagnostic switches is only worth something inside one
interleaved run, beside Proton and the plain proton_ctypes, on the same warm machine: the
hosts differ more than most switches do.  ``bench/longrun.py`` and ``bench/threads.py`` accept
such an implementation in ``--impls``; its worker sets the variable before proton_ctypes is
imported, and its rows say ``"impl": "proton_ctypes"`` with ``"variant": "env:NAME=VALUE"``.
Several switches go in one variant separated by ``+``
(``proton_ctypes:env:A=1+B=0``).
"""
from __future__ import annotations

import os

#: the prefix of such an implementation
PREFIX = "proton_ctypes:env:"
#: the prefix of a CUPTI floor's implementation name (``bench/cupti_floor.py``)
FLOOR_PREFIX = "floor:"


def is_env_variant(impl: str) -> bool:
    """Whether ``impl`` names proton_ctypes with environment switches."""
    return impl.startswith(PREFIX)


def switches(impl: str) -> dict:
    """``{NAME: VALUE}`` of an env variant; ValueError for a malformed one."""
    out = {}
    for item in impl[len(PREFIX):].split("+"):
        name, eq, value = item.partition("=")
        if not name or not eq:
            raise ValueError(f"{impl!r}: expected {PREFIX}NAME=VALUE[+NAME=VALUE...]")
        out[name] = value
    return out


def apply(impl: str) -> str:
    """Set an env variant's variables (in this process, before proton_ctypes is imported) and
    return the implementation it runs: ``proton_ctypes``; any other ``impl`` is returned as is."""
    if not is_env_variant(impl):
        return impl
    os.environ.update(switches(impl))
    return "proton_ctypes"


def row_fields(impl: str) -> dict:
    """The row keys of ``impl``'s results: ``{"impl": ...}`` plus ``"variant"`` for an env variant,
    and ``{"impl": "bare", "floor": NAME}`` for a CUPTI floor ``floor:NAME`` (``bench/cupti_floor.py``:
    no profiler, so a bare row)."""
    if impl.startswith(FLOOR_PREFIX):
        return {"impl": "bare", "floor": impl[len(FLOOR_PREFIX):]}
    if not is_env_variant(impl):
        return {"impl": impl}
    return {"impl": "proton_ctypes", "variant": impl[len("proton_ctypes:"):]}
