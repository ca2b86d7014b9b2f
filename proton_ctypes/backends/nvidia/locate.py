"""Finding libcupti (why this order: ``docs/collection.md``); the first source that works wins.

0. ``TRITON_CUPTI_LIB_PATH`` — a directory holding ``libcupti.so*`` or a file;
1. a libcupti already mapped in this process (``/proc/self/maps``; ``import torch`` maps
   its own), so that no second copy is ever loaded;
2. ``cuda.pathfinder.load_nvidia_dynamic_lib("cupti")``;
3. the copy in the triton wheel, ``triton/backends/nvidia/lib/cupti/libcupti.so*``;
4. otherwise a :class:`RuntimeError` naming what is missing.
"""
from __future__ import annotations

import glob
import importlib.util
import os
from typing import Optional


def _from_env() -> Optional[str]:
    """The library named by ``TRITON_CUPTI_LIB_PATH`` (a directory or a file), if set."""
    value = os.environ.get("TRITON_CUPTI_LIB_PATH")
    if not value:
        return None
    if os.path.isdir(value):
        found = sorted(glob.glob(os.path.join(value, "libcupti.so*")), key=len)
        if not found:
            raise RuntimeError(f"[PROTON] TRITON_CUPTI_LIB_PATH={value!r} holds no libcupti.so*")
        return found[0]
    if os.path.isfile(value):
        return value
    raise RuntimeError(f"[PROTON] TRITON_CUPTI_LIB_PATH={value!r} is neither a file nor a directory")


def mapped_cupti(maps_path: str = "/proc/self/maps") -> Optional[str]:
    """Path of a libcupti already mapped into this process, or None."""
    try:
        with open(maps_path) as f:
            for line in f:
                path = line.split(maxsplit=5)[-1].strip() if line.count(" ") >= 5 else ""
                if "/libcupti.so" in path and os.path.exists(path):
                    return path
    except OSError:
        return None
    return None


def _from_pathfinder():
    """A loaded libcupti from cuda.pathfinder, or None (pathfinder missing or no such library)."""
    try:
        import cuda.pathfinder as pathfinder  # optional (cuda-python); looked for only when 0 and 1 found nothing
    except ImportError:
        return None
    if "cupti" not in getattr(pathfinder, "SUPPORTED_NVIDIA_LIBNAMES", ("cupti",)):
        return None
    try:
        loaded = pathfinder.load_nvidia_dynamic_lib("cupti")
    except Exception:  # DynamicLibNotFoundError and relatives
        return None
    return getattr(loaded, "abs_path", None)


def triton_wheel_cupti() -> Optional[str]:
    """Path of the libcupti shipped in the triton wheel, or None."""
    try:
        spec = importlib.util.find_spec("triton")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for root in spec.submodule_search_locations:
        found = sorted(glob.glob(os.path.join(root, "backends", "nvidia", "lib", "cupti", "libcupti.so*")), key=len)
        if found:
            return found[0]
    return None


def find_cupti() -> tuple:
    """Return ``(source, path)`` of the libcupti to load, following the documented order."""
    path = _from_env()
    if path:
        return "TRITON_CUPTI_LIB_PATH", path
    path = mapped_cupti()
    if path:
        return "mapped", path
    path = _from_pathfinder()
    if path:
        return "cuda.pathfinder", path
    path = triton_wheel_cupti()
    if path:
        return "triton wheel", path
    raise RuntimeError("proton_ctypes: libcupti not found; set TRITON_CUPTI_LIB_PATH or install nvidia-cuda-cupti "
                       "(searched: TRITON_CUPTI_LIB_PATH, libraries mapped in this process, cuda.pathfinder, "
                       "triton/backends/nvidia/lib/cupti)")
