"""``backend="instrumentation"``: intra-kernel scopes (``proton.language``).

Instrumenting kernels needs Triton's proton compiler passes and a decoder of the
device profile buffer; proton_ctypes does not provide them yet, so the backend is
refused with a clear error instead of silently profiling nothing.  The mode objects
(:mod:`proton_ctypes.mode`) and mode strings are fully supported.
"""
from __future__ import annotations

from .hook import Hook

NOT_YET = ("[PROTON] proton_ctypes: backend='instrumentation' is not available yet: it needs Triton's proton "
           "compiler passes (convert-proton-to-protongpu, allocate-proton-shared-memory, the NVIDIA/AMD "
           "lowering) registered through Triton's instrumentation hooks and a decoder of the profile buffer")


class InstrumentationHook(Hook):
    """The hook Proton registers with the instrumentation backend (refused here)."""

    priority = 0
    active_count = 0

    def __init__(self, mode=None):
        self.mode = mode

    def init_handle(self, module, function, name, metadata_group, hash) -> None:
        """Would read the kernel's scope names from its TTGIR."""

    def enter(self, metadata) -> None:
        """Would hand the profile buffer to the launch."""

    def exit(self, metadata) -> None:
        """Would decode the profile buffer after the launch."""

    def activate(self) -> None:
        """Refused: see the module docstring."""
        if InstrumentationHook.active_count > 0:
            raise RuntimeError("Only one instance of the instrumentation hook can be active at a time.")
        raise NotImplementedError(NOT_YET)

    def deactivate(self) -> None:
        """Nothing was activated."""


def refuse_unsupported(mode) -> None:
    """Validate ``mode`` like Proton, then refuse the backend with a clear error."""
    if isinstance(mode, str) and mode:
        parse_mode_string(mode)
    raise NotImplementedError(NOT_YET)


def parse_mode_string(mode: str):
    """Parse ``name[:key=value]*`` into a mode object (Proton's errors for bad input)."""
    from .. import mode as modes
    parts = mode.split(":")
    name, opts = parts[0], {}
    for opt in parts[1:]:
        if "=" not in opt:
            raise ValueError(f"Malformed instrumentation option: '{opt}'")
        k, v = opt.split("=", 1)
        opts[k] = v
    classes = {"default": modes.Default, "mma": modes.MMA}
    if name not in classes:
        raise ValueError(f"Unknown mode: {mode}")
    if "buffer_size" in opts:
        opts["buffer_size"] = int(opts["buffer_size"])
    return classes[name](**opts)
