"""The host-only backend: everything but kernels.

Selected by ``backend=None`` when no GPU driver or runtime can be used (with one
``UserWarning`` per process) or explicitly with ``backend="host"``.  Scopes, states,
metrics, ``cpu_timed_scope``, the python context and every writer work; no kernel
nodes are produced and the device block is ``{}``.
"""
from __future__ import annotations

from .base import Backend


class HostBackend(Backend):
    """A backend with no device: the contract's defaults (nothing to flush, stop or describe)."""

    name = "host"
    device_type = ""

    def __init__(self):
        self.running = False

    def start(self, sink, mode, python_context=None) -> None:
        """Nothing to collect; remember that a session uses us."""
        self.running = True

    def stop(self) -> None:
        """Nothing to stop."""
        self.running = False
