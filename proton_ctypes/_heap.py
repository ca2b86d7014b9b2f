"""Keep glibc's heap from handing a collector's numpy temporaries back to the kernel at every drain.

A drain of tens of thousands of kernels makes a few hundred numpy arrays of a few hundred KiB to a
few MiB each, and frees them all before the next drain.  glibc serves a request over its mmap
threshold with a fresh mapping, unmapped again when freed, and gives the heap top back to the
kernel once it exceeds its trim threshold.  Both start at 128 KiB and follow the largest mapped
block freed so far, while a drain's arrays together reach several times that.  So every drain's
arrays landed on freshly zeroed pages: over the tests' fake libcupti (``bench/drain_cpu.py``'s
loop) 0.02 page faults per kernel, and 70 to 110 ns of kernel (system) time per kernel of a
drain's 490 to 530 ns of CPU.

The rule they follow: freeing a mapped block raises the mmap threshold to its size and the trim
threshold to twice it (up to 32 MiB).  A program that freed one large array has them raised
already; :func:`raise_thresholds` does the same once, freeing a :data:`RAISE_TO_BYTES` block that
it never touched.  The same loop then made 0.003 faults per kernel and 4 to 22 ns of system time
(404 to 460 ns of CPU).  What a program gives up: freed blocks up to :data:`RAISE_TO_BYTES` are
kept in the heap for reuse, and up to twice that of free heap top stays mapped.  Elsewhere than
glibc (musl, macOS) nothing is done.
"""
from __future__ import annotations

import os

from ._libc import libc

#: the block freed: glibc then serves requests up to this size from its heap, and trims the heap
#: top only past twice it
RAISE_TO_BYTES = 16 * 1024 * 1024
#: ``0`` leaves glibc's thresholds as they are (an A/B of this module on one host)
RAISE_ENV = "PROTON_CTYPES_RAISE_MALLOC_THRESHOLDS"

_done = False


def raise_thresholds() -> bool:
    """Raise glibc's mmap and trim thresholds once per process (module docstring); whether this
    call did.  Never raises."""
    global _done
    if _done or os.environ.get(RAISE_ENV, "1").strip() == "0":
        return False
    _done = True
    try:
        c = libc()
        if not hasattr(c, "gnu_get_libc_version"):
            return False
        block = c.malloc(RAISE_TO_BYTES)
        if not block:
            return False
        c.free(block)
        return True
    except (OSError, TypeError, AttributeError):
        return False
