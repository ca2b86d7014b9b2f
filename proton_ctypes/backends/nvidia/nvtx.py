"""NVTX ranges as scopes: the knob and the injection of CUPTI into NVTX.

As Proton's CUPTI profiler does: with ``TRITON_ENABLE_NVTX`` on (the default; Proton's
``getBoolEnv``: ``1``, ``true`` or ``on``, any case), the backend points
``NVTX_INJECTION64_PATH`` at the libcupti it loaded, so that NVTX -- which reads the variable
once, at the first NVTX call of the process -- loads CUPTI as its tool and CUPTI's NVTX
callbacks fire; :class:`~.callbacks.CallbackHub` turns ``nvtxRangePushA`` / ``nvtxRangePop``
into scope enter/exit.  An NVTX call made before the first start (NVTX already initialised
without CUPTI) means no NVTX callbacks for the life of the process, in Proton as here.
"""
from __future__ import annotations

import os
from typing import Optional

ENABLE_ENV = "TRITON_ENABLE_NVTX"
INJECTION_ENV = "NVTX_INJECTION64_PATH"


def enabled() -> bool:
    """``TRITON_ENABLE_NVTX`` as Proton reads it (unset: on)."""
    value = os.environ.get(ENABLE_ENV)
    if value is None:
        return True
    return value.strip().lower() in ("1", "true", "on")


def inject(cupti_path: Optional[str]) -> Optional[str]:
    """Set ``NVTX_INJECTION64_PATH`` to ``cupti_path`` unless it is set already (a tool such as
    Nsight Systems keeps its own); return the value set, or None when nothing was set."""
    if not cupti_path or os.environ.get(INJECTION_ENV):
        return None
    value = os.path.abspath(cupti_path)
    os.environ[INJECTION_ENV] = value
    return value


def withdraw(value: Optional[str]) -> None:
    """Remove ``NVTX_INJECTION64_PATH`` again if it still holds ``value`` (what :func:`inject` set)."""
    if value is not None and os.environ.get(INJECTION_ENV) == value:
        del os.environ[INJECTION_ENV]
