"""``InstrumentationHook``: the hook behind ``backend="instrumentation"``.

As Proton's (3.9) it interprets the mode, allows one active instance, and on
``activate`` registers Triton's proton passes with Triton's compiler (3.6's
``compiler.instrumentation`` object or 3.9's ``register_instrumentation``), sets
``flags.instrumentation_on`` (read by :mod:`proton_ctypes.language`), installs a
128-byte aligned profile-buffer allocator and sets
``triton.knobs.compilation.instrumentation_mode``; ``deactivate`` undoes all of it.
``init_handle`` reads each loaded kernel's scope names from its TTGIR and its warps and
scratch size from its metadata; ``exit`` copies the launch's buffer to the host, decodes
it and files the scope cycles under the kernel node of every active instrumentation
session (libproton's ``exitInstrumentedOp``, without libproton).

Differences from Proton (all where Proton misbehaves):

* a launch of a kernel without ``proton.language`` records is not handed the previous
  launch's buffer (Proton decodes that stale buffer with the wrong kernel's layout);
* ``mode="default:granularity=warp"`` as a *string* works (Proton compares the raw
  string with ``GRANULARITY.WARP`` at decode time and refuses it); a granularity other
  than ``warp``, which Proton's decoder refuses at the first launch, is refused at
  ``start`` with the same message.
"""
from __future__ import annotations

from typing import Any, Dict, Optional

import numpy as np

from ..backends.instrumentation import passes
from ..backends.instrumentation.allocator import ProfileAllocator
from ..backends.instrumentation.layout import host_buffer_bytes
from ..backends.instrumentation.metadata import KERNELS, from_metadata_group
from ..backends.instrumentation.modes import check_supported, interpret_mode
from ..backends.instrumentation.passes import backend_name
from ..core.threads import thread_ctx
from ..core.flags import flags
from ..core.instrumentation import record_launch
from ..core.states import metadata_state
from .hook import Hook


class InstrumentationHook(Hook):
    """Instrumentation of ``proton.language`` scopes (priority 0, one active at a time)."""

    priority: int = 0
    #: only one instance may be active at a time
    active_count: int = 0
    #: 3.9: when True, each launch's buffer is also copied to :attr:`host_buffer` with a header
    enable_host_buffer: bool = False
    host_buffer: Optional[Any] = None
    #: minimum buffer size (bytes) and alignment handed to the passes, as in Proton
    profile_buffer_size: int = 1
    profile_buffer_alignment: int = 128

    def __init__(self, mode_obj=None):
        self.mode = interpret_mode(mode_obj)
        self.allocator = ProfileAllocator(self, self.profile_buffer_alignment, self.profile_buffer_size,
                                          guard=metadata_state)
        #: function handle -> KernelInfo of the loaded kernels (process-wide, as libproton's)
        self.kernels: Dict[Any, Any] = KERNELS
        self.metadata_path: Dict[Any, Optional[str]] = {}
        self._registration = None
        self._instrumentation_backend: Optional[str] = None
        self._previous_mode = None

    @property
    def buffer(self):
        """The most recent profile buffer (Proton's ``hook.buffer``)."""
        return self.allocator.last

    @buffer.setter
    def buffer(self, value) -> None:
        self.allocator.last = value

    # ----------------------------------------------------------------------------- lifecycle
    def activate(self) -> None:
        """Register the passes, the allocator and the mode (see module docstring).

        Raises:
            RuntimeError: another instrumentation hook is active (Proton's message), or the
                target backend is neither CUDA nor HIP (``Unsupported backend: ...``).
            ValueError: a granularity other than ``warp``.
        """
        if InstrumentationHook.active_count > 0:
            raise RuntimeError("Only one instance of the instrumentation hook can be active at a time.")
        import triton  # lazy: triton is optional and slow to import
        from triton.runtime._allocation import set_profile_allocator  # lazy: optional triton

        device = triton.runtime.driver.active.get_current_device()
        backend_name = passes.backend_name()
        check_supported(self.mode, backend_name)
        self._registration = passes.register(self.mode, backend_name, device, self.profile_buffer_size,
                                             self.profile_buffer_alignment)
        self._instrumentation_backend = backend_name
        InstrumentationHook.active_count += 1
        flags.instrumentation_on = True
        set_profile_allocator(self.allocator)
        triton.knobs.compilation.instrumentation_mode = str(self.mode)

    def deactivate(self) -> None:
        """Unregister the passes, the allocator and the mode; forget the buffers."""
        if InstrumentationHook.active_count == 0:
            return
        InstrumentationHook.active_count -= 1
        if self._registration is not None:
            self._registration.remove()
            self._registration = None
            self._instrumentation_backend = None
        flags.instrumentation_on = False
        import triton  # lazy: triton is optional and slow to import
        from triton.runtime._allocation import NullAllocator, set_profile_allocator  # lazy: optional triton
        triton.knobs.compilation.instrumentation_mode = ""
        set_profile_allocator(NullAllocator())
        InstrumentationHook.host_buffer = None
        self.allocator.take()
        self.buffer = None

    # ----------------------------------------------------------------------------- kernels
    def init_handle(self, module: Any, function: Any, name: str, metadata_group: Dict[str, str], hash: str) -> None:
        """Read the kernel's scopes (TTGIR) and layout (metadata JSON) when it is loaded.

        Raises:
            RuntimeError: ``IR path not found in metadata for function ...`` (Proton's).
        """
        if not function:
            return
        backend = self._instrumentation_backend or backend_name()
        try:
            info = from_metadata_group(name, metadata_group, backend)
        except RuntimeError:
            raise RuntimeError(f"IR path not found in metadata for function {function}") from None
        self.kernels[function] = info
        self.metadata_path[function] = info.metadata_path

    def destroy_handle(self, module: Any, function: Any, name: str, metadata_group: Dict[str, str], hash: str) -> None:
        """Forget an unloaded kernel (triton >= 3.9)."""
        if not function:
            return
        self.kernels.pop(function, None)
        self.metadata_path.pop(function, None)

    # ----------------------------------------------------------------------------- launches
    def enter(self, metadata) -> None:
        """Nothing to do before the launch (the allocator already ran)."""
        if InstrumentationHook.enable_host_buffer:
            InstrumentationHook.host_buffer = None

    def exit(self, metadata) -> None:
        """Copy the launch's buffer to the host, decode it and attribute its scopes."""
        buf = self.allocator.take()
        if buf is None:
            return
        data = metadata.data
        func = data.get("function")
        info = self.kernels.get(func)
        if info is None or not info.instrumented:
            return
        host = _to_host(buf, data.get("stream"))
        device = getattr(getattr(buf, "device", None), "index", None)
        if not isinstance(device, int):
            import triton  # lazy: triton is optional and slow to import
            device = triton.runtime.driver.active.get_current_device()
        target = "HIP" if self._instrumentation_backend == "amd" else "CUDA"
        record_launch(thread_ctx(), info, host, device, target, self.mode)
        if InstrumentationHook.enable_host_buffer:
            self._populate_host_buffer(info, host)

    def _populate_host_buffer(self, info, host) -> None:
        """3.9's binary trace for external tools: a header, then the raw buffer."""
        import torch  # lazy: torch is optional
        raw = host_buffer_bytes(info, host, self.mode)
        InstrumentationHook.host_buffer = torch.frombuffer(bytearray(raw), dtype=torch.uint8)


def _to_host(buf, stream):
    """The bytes of device tensor ``buf`` once the launch on ``stream`` has finished."""
    if isinstance(buf, np.ndarray):
        return buf
    import torch  # lazy: torch is optional
    cur = torch.cuda.current_stream(buf.device)
    if stream and int(stream) != int(cur.cuda_stream):
        with torch.cuda.stream(torch.cuda.ExternalStream(int(stream), device=buf.device)):
            return buf.cpu().numpy()
    return buf.cpu().numpy()

