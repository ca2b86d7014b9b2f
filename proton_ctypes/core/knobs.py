"""Proton's knobs (``triton.knobs.proton``) and the environment defaults ``start`` exports.

When triton is imported its knob objects are the source of truth (users may set them
in code); otherwise the environment variables and Proton's defaults are used, so that
importing proton_ctypes never imports triton.
"""
from __future__ import annotations

import os
import importlib.util
import sys


def _triton_dir():
    spec = None
    try:
        spec = importlib.util.find_spec("triton")
    except Exception:
        pass
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def _defaults():
    tdir = _triton_dir()
    lib = os.path.join(tdir, "backends", "nvidia", "lib") if tdir else None
    return {
        "TRITON_PROTON_DISABLE": "0",
        "TRITON_CUPTI_LIB_PATH": os.path.join(lib, "cupti") if lib else None,
        "TRITON_CUPTI_LIB_BLACKWELL_PATH": os.path.join(lib, "cupti-blackwell") if lib else None,
        "TRITON_ROCTX_LIBRARY": "libroctx64.so",
        "TRITON_PROFILE_BUFFER_SIZE": "67108864",
        "TRITON_PROFILE_METRIC_BUFFER_SIZE": "67108864",
        "TRITON_ENABLE_NVTX": "1",
        "TRITON_ENABLE_HW_TRACE": "0",
    }


def _truthy(v) -> bool:
    return str(v).strip().lower() in ("1", "true", "on", "yes")


def disabled() -> bool:
    """``triton.knobs.proton.disable`` (if triton is loaded) or ``TRITON_PROTON_DISABLE``."""
    triton = sys.modules.get("triton")
    knobs = getattr(triton, "knobs", None) if triton else None
    if knobs is not None and hasattr(knobs, "proton"):
        try:
            return bool(knobs.proton.disable)
        except Exception:
            pass
    return _truthy(os.environ.get("TRITON_PROTON_DISABLE", "0"))


#: not exported: proton_ctypes prefers a CUPTI already mapped in the process (torch's), and an
#: exported default would make child processes load triton's older copy beside it
_NOT_EXPORTED = ("TRITON_CUPTI_LIB_PATH",)


def export_defaults(backend: str, arch=None) -> None:
    """Set every unset knob env var to its current value, as Proton's ``start`` does
    (except ``TRITON_CUPTI_LIB_PATH``, see ``_NOT_EXPORTED``)."""
    triton = sys.modules.get("triton")
    knobs = getattr(triton, "knobs", None) if triton else None
    blackwell = backend == "cupti" and arch is not None and arch >= 100
    pk = getattr(knobs, "proton", None) if knobs is not None else None
    if pk is not None and hasattr(pk, "knob_descriptors"):
        for attr, desc in pk.knob_descriptors.items():
            key = desc.key
            if os.environ.get(key) is not None or key in _NOT_EXPORTED:
                continue
            if key == "TRITON_CUPTI_LIB_PATH" and blackwell and hasattr(pk, "cupti_lib_blackwell_dir"):
                os.environ[key] = str(pk.cupti_lib_blackwell_dir)
                continue
            val = getattr(pk, attr, None)
            if val is None:
                continue
            if isinstance(val, bool):
                os.environ[key] = "1" if val else "0"
            else:
                os.environ[key] = str(val)
        return
    d = _defaults()
    for key, val in d.items():
        if os.environ.get(key) is None and val is not None and key not in _NOT_EXPORTED:
            if key == "TRITON_CUPTI_LIB_PATH" and blackwell and d["TRITON_CUPTI_LIB_BLACKWELL_PATH"]:
                val = d["TRITON_CUPTI_LIB_BLACKWELL_PATH"]
            os.environ[key] = val
