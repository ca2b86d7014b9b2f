"""The host-only backend: everything but kernels.

Selected by ``backend=None`` when no GPU driver or runtime can be used (with one
``UserWarning`` per process) or explicitly with ``backend="host"``.  Scopes, states,
metrics, ``cpu_timed_scope``, the python context and every writer work; no kernel
nodes are produced and the device block is ``{}``.
"""
from __future__ import annotations


class HostBackend:
    """A backend with no device: start/flush/stop do nothing."""

    name = "host"
    device_type = ""

    def __init__(self):
        self.dropped = 0
        self.running = False

    def start(self, sink, mode, python_context=None) -> None:
        """Nothing to collect; remember that a session uses us."""
        self.running = True

    def flush(self) -> None:
        """No device records exist."""

    def stop(self) -> None:
        """Nothing to stop."""
        self.running = False

    def device_info(self, devices) -> dict:
        """No devices: the device block is empty."""
        return {}
