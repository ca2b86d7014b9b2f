"""The profile-buffer allocator Triton calls before each instrumented launch.

Triton's launcher asks ``_allocation._profile_allocator(size, alignment, stream)`` for
``grid * num_ctas * profile_scratch_size`` bytes, only for kernels whose compilation
reserved profile scratch (kernels without ``proton.language`` records ask nothing).  As
in Proton, the buffer is a zeroed ``torch.uint8`` CUDA tensor of the size rounded up to
the 128-byte alignment, allocated under the guard the hook passes in (Proton 3.9 allocates
under ``metadata_state()``; the hook layer hands that state in, so this backend module
never imports the profiler's engine).

Unlike Proton, which keeps only "the last buffer" (so a launch of a kernel without
records is handed the previous launch's stale buffer), the allocator remembers the
buffer for the launch it was called for, per thread; :meth:`take` hands it to the exit
hook of that launch only.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Callable, ContextManager, Optional

ALIGNMENT = 128


class ProfileAllocator:
    """``allocator(size, alignment, stream)`` for ``triton.runtime._allocation``."""

    def __init__(self, hook, alignment: int = ALIGNMENT, min_size: int = 1,
                 guard: Callable[[], ContextManager] = contextlib.nullcontext):
        """``guard()`` is entered around each allocation (the hook passes ``metadata_state``)."""
        self.hook = hook
        self.alignment = alignment
        self.min_size = min_size
        self.guard = guard
        self._tls = threading.local()
        #: the most recent buffer (what Proton's hook calls ``buffer``)
        self.last = None

    def __call__(self, size: int, alignment: int, stream: Optional[int]):
        if alignment != self.alignment:
            raise RuntimeError(f"Alignment mismatch: {alignment} != {self.alignment}")
        aligned = (size + alignment - 1) // alignment * alignment
        aligned = max(aligned, self.min_size)
        buf = self.allocate(aligned)
        self._tls.pending = buf
        self.last = buf
        return buf

    def allocate(self, nbytes: int):
        """A zeroed device buffer of ``nbytes`` bytes, allocated under :attr:`guard`."""
        import torch  # lazily: importing torch costs seconds, and only an instrumented launch needs it
        with self.guard():
            return torch.zeros((nbytes,), dtype=torch.uint8, device="cuda")

    def take(self):
        """The buffer allocated for the current launch on this thread (once), else None."""
        buf = getattr(self._tls, "pending", None)
        self._tls.pending = None
        return buf
