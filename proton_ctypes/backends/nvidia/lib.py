"""libcupti through ctypes: finding and loading it, one declaration per function, checked calls.

Loading order (gpu-backends.md §1; the first that works wins, the winner is kept in
:attr:`CuptiLib.source` for the profile metadata):

0. ``TRITON_CUPTI_LIB_PATH`` — a directory holding ``libcupti.so*`` or a file;
1. a libcupti already mapped in this process (``/proc/self/maps``; ``import torch`` maps
   its own), so that no second copy is ever loaded;
2. ``cuda.pathfinder.load_nvidia_dynamic_lib("cupti")``;
3. the copy in the triton wheel, ``triton/backends/nvidia/lib/cupti/libcupti.so*``;
4. otherwise a :class:`RuntimeError` naming what is missing.

Every CUPTI function used by the backend is declared exactly once, in :data:`PROTOTYPES`.
:class:`CuptiLib` wraps the library: ``lib.call("cuptiX", ...)`` raises :class:`CuptiError`
(carrying ``cuptiGetResultString``'s text and the function name) on any non-zero result.
``load_cupti(lib=fake)`` accepts any object exposing the same function names (the CPU
tests' fake libcupti).
"""
from __future__ import annotations

import ctypes
import glob
import os
from typing import Optional

# ------------------------------------------------------------------ C types used in the prototypes
U8, U32, U64, SIZE_T, VOIDP = ctypes.c_uint8, ctypes.c_uint32, ctypes.c_uint64, ctypes.c_size_t, ctypes.c_void_p
P = ctypes.POINTER

#: ``void (*)(uint8_t **buffer, size_t *size, size_t *maxNumRecords)``
BUFFER_REQUEST_FUNC = ctypes.CFUNCTYPE(None, P(VOIDP), P(SIZE_T), P(SIZE_T))
#: ``void (*)(CUcontext ctx, uint32_t streamId, uint8_t *buffer, size_t size, size_t validSize)``
BUFFER_COMPLETE_FUNC = ctypes.CFUNCTYPE(None, VOIDP, U32, VOIDP, SIZE_T, SIZE_T)
#: ``void (*)(void *userdata, CUpti_CallbackDomain, CUpti_CallbackId, const void *cbdata)``
CALLBACK_FUNC = ctypes.CFUNCTYPE(None, VOIDP, U32, U32, VOIDP)

#: One declaration per CUPTI function the backend uses: name -> argtypes (all return CUptiResult).
PROTOTYPES = {
    "cuptiGetVersion": [P(U32)],
    "cuptiGetResultString": [ctypes.c_int, P(ctypes.c_char_p)],
    "cuptiGetTimestamp": [P(U64)],
    "cuptiSetThreadIdType": [ctypes.c_int],
    "cuptiActivityEnable": [ctypes.c_int],
    "cuptiActivityDisable": [ctypes.c_int],
    "cuptiActivityEnableDriverApi": [U32, U8],
    "cuptiActivityEnableRuntimeApi": [U32, U8],
    "cuptiActivityRegisterCallbacks": [BUFFER_REQUEST_FUNC, BUFFER_COMPLETE_FUNC],
    "cuptiActivityFlushAll": [U32],
    "cuptiActivityGetNextRecord": [VOIDP, SIZE_T, P(VOIDP)],
    "cuptiActivityGetNumDroppedRecords": [VOIDP, U32, P(SIZE_T)],
    "cuptiActivityPushExternalCorrelationId": [ctypes.c_int, U64],
    "cuptiActivityPopExternalCorrelationId": [ctypes.c_int, P(U64)],
    "cuptiSubscribe": [P(VOIDP), CALLBACK_FUNC, VOIDP],
    "cuptiUnsubscribe": [VOIDP],
    "cuptiEnableCallback": [U32, VOIDP, ctypes.c_int, U32],
    "cuptiGetGraphNodeId": [VOIDP, P(U64)],
    # PC sampling (cupti_pcsampling.h): each takes a pointer to its CUpti_*Params struct
    # (structs in cupti_pcsampling_layout.py)
    "cuptiPCSamplingGetNumStallReasons": [VOIDP],
    "cuptiPCSamplingGetStallReasons": [VOIDP],
    "cuptiPCSamplingSetConfigurationAttribute": [VOIDP],
    "cuptiPCSamplingEnable": [VOIDP],
    "cuptiPCSamplingDisable": [VOIDP],
    "cuptiPCSamplingStart": [VOIDP],
    "cuptiPCSamplingStop": [VOIDP],
    "cuptiPCSamplingGetData": [VOIDP],
    "cuptiGetSassToSourceCorrelation": [VOIDP],
    "cuptiGetCubinCrc": [VOIDP],
}

# ------------------------------------------------------------------ constants (cupti_*.h, checked by layout_check.c)
SUCCESS = 0
ERROR_MAX_LIMIT_REACHED = 12
ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED = 39
FLUSH_FORCED = 1
THREAD_ID_TYPE_SYSTEM = 1
EXTERNAL_CORRELATION_KIND_CUSTOM0 = 3

CB_DOMAIN_DRIVER_API = 1
CB_DOMAIN_RUNTIME_API = 2
CB_DOMAIN_RESOURCE = 3
CB_SITE_ENTER = 0

RESOURCE_GRAPH_CREATED = 9
RESOURCE_GRAPHNODE_CREATED = 13
RESOURCE_GRAPHNODE_CLONED = 20

#: Driver launch callback ids kept by the deny-list (cupti_driver_cbid.h).
DRIVER_LAUNCH_CBIDS = {
    "cuLaunchKernel": 307, "cuLaunchKernel_ptsz": 442, "cuLaunchKernelEx": 652, "cuLaunchKernelEx_ptsz": 653,
    "cuLaunchCooperativeKernel": 477, "cuLaunchCooperativeKernel_ptsz": 478,
    "cuGraphLaunch": 514, "cuGraphLaunch_ptsz": 515,
}
#: Runtime launch callback ids kept by the deny-list (cupti_runtime_cbid.h).
RUNTIME_LAUNCH_CBIDS = {
    "cudaLaunchKernel_v7000": 211, "cudaLaunchKernel_ptsz_v7000": 214,
    "cudaLaunchKernelExC_v11060": 430, "cudaLaunchKernelExC_ptsz_v11060": 431,
    "cudaLaunchCooperativeKernel_v9000": 269, "cudaLaunchCooperativeKernel_ptsz_v9000": 270,
    "cudaGraphLaunch_v10000": 311, "cudaGraphLaunch_ptsz_v10000": 312,
}
#: Graph-launch ids among them (their kernels carry the graph launch's correlation id).
GRAPH_LAUNCH_CBIDS = {514, 515, 311, 312}
#: Callback ids probed by the deny loop (ids that do not exist fail harmlessly).
MAX_CBID = 1000


class CuptiError(RuntimeError):
    """A CUPTI function returned a non-zero ``CUptiResult``."""

    def __init__(self, function: str, code: int, text: str):
        super().__init__(f"[PROTON] {function} failed: CUPTI error {code}: {text}")
        self.function = function
        self.code = code
        self.text = text


# ------------------------------------------------------------------ locating the library
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
        import cuda.pathfinder as pathfinder
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
        import importlib.util
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


def declare(lib) -> None:
    """Give every function of :data:`PROTOTYPES` its argtypes and an int restype (real libraries only)."""
    for name, argtypes in PROTOTYPES.items():
        fn = getattr(lib, name)
        fn.argtypes = argtypes
        fn.restype = ctypes.c_int


class CuptiLib:
    """A loaded libcupti (or a fake with the same function names) with checked calls."""

    def __init__(self, lib, source: str, path: Optional[str]):
        self.lib = lib
        self.source = source
        self.path = path
        version = U32()
        self.call("cuptiGetVersion", ctypes.byref(version))
        self.version = int(version.value)

    def fn(self, name: str):
        """The raw function ``name`` (returns the CUptiResult; for hot paths that check it themselves)."""
        return getattr(self.lib, name)

    def result_string(self, code: int) -> str:
        """``cuptiGetResultString`` text for ``code`` (never raises)."""
        text = ctypes.c_char_p()
        try:
            if getattr(self.lib, "cuptiGetResultString")(int(code), ctypes.byref(text)) == SUCCESS and text.value:
                return text.value.decode(errors="replace")
        except Exception:
            pass
        return "unknown error"

    def check(self, name: str, code: int) -> None:
        """Raise :class:`CuptiError` for a non-zero result ``code`` returned by ``name``."""
        if code != SUCCESS:
            raise CuptiError(name, int(code), self.result_string(code))

    def call(self, name: str, *args) -> None:
        """Call ``name(*args)`` and raise :class:`CuptiError` unless it returns CUPTI_SUCCESS."""
        code = getattr(self.lib, name)(*args)
        if code != SUCCESS:
            raise CuptiError(name, int(code), self.result_string(code))

    def try_call(self, name: str, *args) -> int:
        """Call ``name(*args)`` and return its result code without raising (probing loops only)."""
        return int(getattr(self.lib, name)(*args))


def load_cupti(lib=None, path: Optional[str] = None) -> CuptiLib:
    """Load libcupti (or wrap ``lib``, an object with the CUPTI function names) as a :class:`CuptiLib`.

    ``path`` forces a file; otherwise :func:`find_cupti` picks one.  A real library is
    opened with ``RTLD_GLOBAL`` (dlopen of an already mapped path returns the same handle)
    and gets its declarations from :data:`PROTOTYPES`.
    """
    if lib is not None:
        return CuptiLib(lib, "injected", None)
    source = "explicit"
    if path is None:
        source, path = find_cupti()
    try:
        handle = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    except OSError as e:
        raise RuntimeError(f"proton_ctypes: could not load libcupti from {path} ({source}): {e}") from e
    missing = [name for name in PROTOTYPES if not hasattr(handle, name)]
    if missing:
        raise RuntimeError(f"proton_ctypes: {path} lacks CUPTI functions {missing}")
    declare(handle)
    return CuptiLib(handle, source, path)
