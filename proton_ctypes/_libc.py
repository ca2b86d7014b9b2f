"""The C library's ``malloc`` and ``free``, declared once for the whole package.

CUPTI hands back strings it allocated with ``malloc`` (the source file names of PC sampling), which
the backend frees; :mod:`._heap` allocates and frees one block to raise glibc's heap thresholds.
The process's own symbols (``ctypes.CDLL(None)``) give the allocator that every library loaded in
it uses.  A leaf module: it imports nothing of the package.
"""
from __future__ import annotations

import ctypes
import functools


@functools.lru_cache(maxsize=None)
def libc() -> ctypes.CDLL:
    """The process's C library with ``malloc`` and ``free`` declared (loaded at the first call).
    Raises ``OSError`` or ``TypeError`` where it cannot be loaded that way (Windows)."""
    lib = ctypes.CDLL(None)
    lib.malloc.restype, lib.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    lib.free.restype, lib.free.argtypes = None, [ctypes.c_void_p]
    return lib
