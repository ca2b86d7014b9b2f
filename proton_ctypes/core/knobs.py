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


#: Proton's knob for the size of each activity buffer (``triton.knobs.proton.profile_buffer_size``)
BUFFER_SIZE_ENV = "TRITON_PROFILE_BUFFER_SIZE"
#: what :func:`export_defaults` itself put into the environment, by variable: a value still there
#: is Proton's default, not the user's choice (:func:`user_value`)
_exported = {}

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
                _export(key, str(pk.cupti_lib_blackwell_dir))
                continue
            val = getattr(pk, attr, None)
            if val is None:
                continue
            _export(key, ("1" if val else "0") if isinstance(val, bool) else str(val))
        return
    d = _defaults()
    for key, val in d.items():
        if os.environ.get(key) is None and val is not None and key not in _NOT_EXPORTED:
            if key == "TRITON_CUPTI_LIB_PATH" and blackwell and d["TRITON_CUPTI_LIB_BLACKWELL_PATH"]:
                val = d["TRITON_CUPTI_LIB_BLACKWELL_PATH"]
            _export(key, val)


def _export(key: str, value: str) -> None:
    os.environ[key] = value
    _exported[key] = value


def user_value(key: str):
    """The environment's value of ``key``, unless it is only the default :func:`export_defaults`
    put there (a knob set in code sets its variable too, so it counts as the user's)."""
    val = os.environ.get(key)
    return None if val is None or _exported.get(key) == val else val


def activity_buffer_bytes():
    """The activity-buffer size the user chose with ``TRITON_PROFILE_BUFFER_SIZE`` (or its knob),
    in bytes; None when they chose none, and the backend keeps its own default.

    Raises:
        RuntimeError: a value that is not a positive integer (triton's knob message for a
            non-integer; Proton itself fails inside CUPTI's buffer request).
    """
    val = user_value(BUFFER_SIZE_ENV)
    if val is None:
        return None
    try:
        size = int(val)
    except ValueError:
        raise RuntimeError(f"Unable to use {BUFFER_SIZE_ENV}={val}: expected int") from None
    if size <= 0:
        raise RuntimeError(f"Unable to use {BUFFER_SIZE_ENV}={val}: expected a positive number of bytes")
    return size
