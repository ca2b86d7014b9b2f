"""The ``instrumentation`` backend as the session manager sees it: a target device and its
device block.

It has no device activity of its own to collect: every instrumented launch is decoded
by the hook when the launch returns (as libproton does), so ``flush`` and ``stop`` keep the
contract's defaults.  It knows the target (``cuda``/``hip``, the device prefix of the mode,
libproton's ``Unknown device type`` otherwise) and writes the device block of the
hatchet file from the Triton driver's device properties.

Triton is imported inside the functions that use it (``# lazy``): it is optional (no wheels
on macOS and Windows), it takes seconds to import, and this module is imported without it.
"""
from __future__ import annotations

from typing import Iterable

from ..base import Backend
from ..modes import Mode

#: the device block's key for each device prefix of the mode (case-insensitive)
TARGETS = {"cuda": "CUDA", "hip": "HIP"}


class InstrumentationBackend(Backend):
    """Backend ``"instrumentation"``: decoding happens in the launch hook."""

    name = "instrumentation"
    #: no kernel records: the call-path join of the other backends is not used
    device_type = ""

    def __init__(self):
        self.running = False
        self.target = TARGETS["cuda"]
        self._props = {}

    def start(self, sink, mode: Mode, python_context=None) -> None:
        """Take the target from the mode's device prefix (``cuda`` or ``hip``).

        Raises:
            RuntimeError: ``[PROTON] Unknown device type: <prefix>`` (libproton's).
        """
        target = TARGETS.get(mode.device.lower())
        if target is None:
            raise RuntimeError(f"[PROTON] Unknown device type: {mode.device}")
        self.target = target
        self.running = True

    def stop(self) -> None:
        """Nothing to release."""
        self.running = False

    def _properties(self, device: int) -> dict:
        props = self._props.get(device)
        if props is None:
            import triton  # lazy
            drv = triton.runtime.driver.active
            props = dict(drv.utils.get_device_properties(device))
            props["_arch"] = drv.get_current_target().arch
            self._props[device] = props
        return props

    def device_info(self, devices: Iterable[int]) -> dict:
        """``{"CUDA": {"0": {arch, bus_width, clock_rate, memory_clock_rate, num_sms}}}``."""
        devices = sorted({int(d) for d in devices})
        if not devices:
            return {}
        out = {}
        for d in devices:
            try:
                p = self._properties(d)
            except Exception:
                p = {}
            arch = p.get("arch", p.get("_arch", ""))
            if self.target == TARGETS["cuda"]:
                arch = p.get("_arch", arch)
            out[str(d)] = {
                "arch": str(arch).split(":")[0] if arch is not None else "",
                "bus_width": int(p.get("mem_bus_width", 0) or 0),
                "clock_rate": int(p.get("sm_clock_rate", 0) or 0),
                "memory_clock_rate": int(p.get("mem_clock_rate", 0) or 0),
                "num_sms": int(p.get("multiprocessor_count", 0) or 0),
            }
        return {self.target: out}

