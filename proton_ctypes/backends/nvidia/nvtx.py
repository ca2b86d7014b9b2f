"""NVTX ranges as scopes: the knob and the injection of CUPTI into NVTX.

As Proton's CUPTI profiler does: with ``TRITON_ENABLE_NVTX`` on (the default; Proton's
``getBoolEnv``: ``1``, ``true`` or ``on``, any case), the backend points
``NVTX_INJECTION64_PATH`` at the libcupti it loaded, so that NVTX -- which reads the variable
once, at the first NVTX call of the process -- loads CUPTI as its tool and CUPTI's NVTX
callbacks fire; :class:`NvtxHooks`, a part of :class:`~.callbacks.CallbackHub`, turns
``nvtxRangePushA`` / ``nvtxRangePop`` into scope enter/exit.  An NVTX call made before the first
start (NVTX already initialised without CUPTI) means no NVTX callbacks for the life of the
process, in Proton as here.
"""
from __future__ import annotations

import ctypes
import os
from typing import Optional

from . import layout as L
from .cbids import CB_DOMAIN_NVTX, NVTX_RANGE_POP, NVTX_RANGE_PUSH_A
from .lib import CuptiError

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


class NvtxHooks:
    """NVTX ranges as scopes, for :class:`~.callbacks.CallbackHub` (which owns the subscriber,
    ``_enabled``, ``nvtx_scopes``, ``nvtx_errors`` and ``nvtx_unmatched``).  Nothing raises into CUPTI."""

    def enable_nvtx_callbacks(self, scopes) -> None:
        """NVTX ranges become scopes through ``scopes = (enter(name), exit())``; raises
        :class:`CuptiError` when CUPTI refuses the NVTX callbacks (nothing is then switched on)."""
        self.nvtx_scopes = scopes
        try:
            self.lib.enable_nvtx_callbacks(self.subscriber)
        except CuptiError:
            self.nvtx_scopes = None
            self.lib.disable_nvtx_callbacks(self.subscriber)
            raise
        self._enabled.extend((CB_DOMAIN_NVTX, cbid) for cbid in (NVTX_RANGE_PUSH_A, NVTX_RANGE_POP))

    def _on_nvtx(self, cbid, data) -> None:
        """nvtxRangePushA: enter a scope named by its message; nvtxRangePop: exit the innermost
        NVTX-opened scope of this thread (``CUpti_NvtxData`` at ``data``)."""
        scopes = self.nvtx_scopes
        if scopes is None:
            return
        try:
            if cbid == NVTX_RANGE_PUSH_A:
                params = ctypes.c_void_p.from_address(data + L.NVTXDATA_PARAMS_OFFSET).value if data else None
                raw = ctypes.c_char_p.from_address(params + L.NVTX_PUSH_A_MESSAGE_OFFSET).value if params else None
                scopes[0](raw.decode("utf-8", "replace") if raw else "")
            elif cbid == NVTX_RANGE_POP:
                if not scopes[1]():
                    self.nvtx_unmatched += 1
        except Exception:
            self.nvtx_errors += 1
