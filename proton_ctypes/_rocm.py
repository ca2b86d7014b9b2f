"""ROCm runtime selection for TheRock (ROCm installed as Python wheels, ``rocm_sdk``).

With TheRock, one process can see several ROCm runtimes: the wheel's and a system one.
Before any GPU library is loaded, :func:`configure_runtime` points Triton and the
profiler's AMD backends at the wheel's libraries (``TRITON_LIBHIP_PATH``, the
``TRITON_HSA_RUNTIME_*``, ``TRITON_ROCPROFILER_SDK_*``, ``TRITON_ROCTRACER_*`` and
``TRITON_ROCTX_LIBRARY`` variables), leaving alone every variable the user set, then loads
HSA globally and has ``rocm_sdk`` preload the rest, as Proton 3.9 does at import.  Without
TheRock (no ``rocm_sdk``, or a library missing) nothing happens and ``None`` is returned.
"""
from __future__ import annotations

import ctypes
import functools
import os
from pathlib import Path

#: rocm_sdk library names this module resolves (HSA is found next to amdhip64)
THEROCK_LIBRARIES = ("amdhip64", "rocprofiler-sdk", "rocprofiler-sdk-roctx", "roctracer64", "roctx64")
HSA_SONAME = "libhsa-runtime64.so.1"

#: library -> (folder variable, file-name variable) set from its path
_DIR_AND_FILE_VARS = {
    "hsa-runtime64": ("TRITON_HSA_RUNTIME_PATH", "TRITON_HSA_RUNTIME_LIBRARY"),
    "rocprofiler-sdk": ("TRITON_ROCPROFILER_SDK_LIB_PATH", "TRITON_ROCPROFILER_SDK_LIBRARY"),
    "roctracer64": ("TRITON_ROCTRACER_LIB_PATH", "TRITON_ROCTRACER_LIBRARY"),
}
#: library -> the variables whose presence (set by the user) means: do not preload it
_PRELOAD_UNLESS = (
    ("amdhip64", ("TRITON_LIBHIP_PATH",)),
    ("roctx64", ("TRITON_ROCTX_LIB_PATH", "TRITON_ROCTX_LIBRARY")),
    ("rocprofiler-sdk", ("TRITON_ROCPROFILER_SDK_LIB_PATH", "TRITON_ROCPROFILER_SDK_LIBRARY")),
    ("rocprofiler-sdk-roctx", ("TRITON_ROCPROFILER_SDK_LIB_PATH", "TRITON_ROCPROFILER_SDK_LIBRARY")),
    ("roctracer64", ("TRITON_ROCTRACER_LIB_PATH", "TRITON_ROCTRACER_LIBRARY")),
)


@functools.lru_cache
def find_therock_rocm_libraries():
    """``{name: path}`` of TheRock's runtime libraries (plus ``hsa-runtime64``), or None
    when ``rocm_sdk`` is not installed or one of them is missing."""
    try:
        import rocm_sdk  # lazy: only on a TheRock ROCm install
        found = {name: str(rocm_sdk.find_libraries(name)[0]) for name in THEROCK_LIBRARIES}
    except (ImportError, FileNotFoundError):
        return None
    hsa = Path(found["amdhip64"]).parent / HSA_SONAME
    if not hsa.is_file():
        return None
    found["hsa-runtime64"] = str(hsa)
    return found


def _setenv(key: str, value: str) -> None:
    """Set ``key`` as Triton's knobs do (they may be told not to touch the environment)."""
    try:
        from triton.knobs import setenv  # lazy: triton is optional
    except ImportError:
        os.environ[key] = value
    else:
        setenv(key, value)


def _set_therock_runtime_environment(libraries):
    """Point the library variables at ``libraries``; return the variable names that were
    already set (the user's choices, left as they are)."""
    user_set = set(os.environ)
    if "TRITON_LIBHIP_PATH" not in user_set:
        _setenv("TRITON_LIBHIP_PATH", libraries["amdhip64"])
    for name, (dir_var, file_var) in _DIR_AND_FILE_VARS.items():
        if dir_var in user_set or file_var in user_set:
            continue
        path = Path(libraries[name])
        _setenv(dir_var, str(path.parent))
        _setenv(file_var, path.name)
    if "TRITON_ROCTX_LIB_PATH" not in user_set and "TRITON_ROCTX_LIBRARY" not in user_set:
        _setenv("TRITON_ROCTX_LIBRARY", libraries["roctx64"])
    return user_set


def _preload_therock_runtime(explicit_overrides):
    """Have ``rocm_sdk`` preload every library the user did not point elsewhere."""
    import rocm_sdk  # lazy: only on a TheRock ROCm install
    names = [name for name, unless in _PRELOAD_UNLESS if not any(v in explicit_overrides for v in unless)]
    if names:
        rocm_sdk.preload_libraries(*names)


def _load_hsa_runtime():
    """Load HSA with global symbols and keep it (``rocm_sdk`` does not register it)."""
    path = Path(os.environ.get("TRITON_HSA_RUNTIME_LIBRARY", HSA_SONAME))
    folder = os.environ.get("TRITON_HSA_RUNTIME_PATH")
    if not path.is_absolute() and folder:
        path = Path(folder) / path
    return ctypes.CDLL(str(path), mode=ctypes.RTLD_GLOBAL | os.RTLD_NOW)


def configure_runtime():
    """Select and preload TheRock's ROCm runtime; the HSA library handle, or None without
    TheRock.  Call it before any GPU library is loaded."""
    libraries = find_therock_rocm_libraries()
    if libraries is None:
        return None
    user_set = _set_therock_runtime_environment(libraries)
    handle = _load_hsa_runtime()
    _preload_therock_runtime(user_set)
    return handle
