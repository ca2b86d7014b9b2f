"""Shared pieces of the AMD backends: finding and wrapping the ROCm libraries
(:class:`VendorLib`), the AMD environment check and clock calibration.

Loading order for a ROCm library (the first that works wins; the winner is kept as the
loader's ``source`` for the profile metadata):

1. the knobs Proton uses: ``<KNOB>_LIB_PATH`` is a directory (or a file) and
   ``<KNOB>_LIBRARY`` the file name inside it (or a path of its own), as
   ``triton.knobs.proton`` and the TheRock preload set them;
2. a copy already mapped in this process (``/proc/self/maps``), so that no second copy of
   a tool library is ever loaded next to torch's;
3. the ROCm install: ``$ROCM_PATH/lib`` then ``/opt/rocm/lib``;
4. the plain name through the dynamic loader (``LD_LIBRARY_PATH``);
5. otherwise ``RuntimeError("[PROTON] Could not load `<name>`")``, Proton's wording.

:class:`VendorLib` is the one wrapper of a loaded vendor library (rocprofiler-sdk's
:class:`~.sdk_api.SdkLib` and roctracer's :class:`~.tracer_api.TracerLib` keep only what
differs: their prototypes, their error type and where the error text comes from): it
loads the library, declares every function once, and ``call`` raises the library's
:class:`VendorError` carrying the vendor's own error string for any status but success.

Nothing here imports the API layer; nothing runs per kernel launch.
"""
from __future__ import annotations

import ctypes
import os
import time
from typing import Callable, ClassVar, Dict, List, NamedTuple, Optional, Tuple, Type

from ..base import tightest_offset

ROCPROFILER_SDK_SONAME = "librocprofiler-sdk.so"
ROCTRACER_SONAME = "libroctracer64.so"
HSA_SONAME = "libhsa-runtime64.so"
#: Bytes of the vendor's activity buffer (``TRITON_PROFILE_BUFFER_SIZE``'s default, as Proton's).
DEFAULT_BUFFER_BYTES = 64 << 20

#: (path knob, library knob) per library, as in ``triton.knobs.proton``.
KNOBS = {
    ROCPROFILER_SDK_SONAME: ("TRITON_ROCPROFILER_SDK_LIB_PATH", "TRITON_ROCPROFILER_SDK_LIBRARY"),
    ROCTRACER_SONAME: ("TRITON_ROCTRACER_LIB_PATH", "TRITON_ROCTRACER_LIBRARY"),
    HSA_SONAME: ("TRITON_HSA_RUNTIME_PATH", "TRITON_HSA_RUNTIME_LIBRARY"),
}


class LibraryNotFound(RuntimeError):
    """A ROCm library could not be loaded; the message is Proton's."""


class Loaded(NamedTuple):
    """A loaded library and where it came from (``"knob"``, ``"mapped"``, ``"rocm"``, ``"ldpath"``)."""

    lib: object
    path: str
    source: str


# ---------------------------------------------------------------------------- loading
def mapped_paths(soname: str) -> List[str]:
    """Paths of already-mapped objects whose file name starts with ``soname``."""
    found = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.rstrip("\n").split(None, 5)[-1]
                if os.path.basename(path).startswith(soname) and path not in found:
                    found.append(path)
    except OSError:
        pass
    return found


def candidates(soname: str, environ=None) -> List[Tuple[str, str]]:
    """The ``(path, source)`` pairs tried, in order, to load ``soname`` (see module docstring)."""
    env = os.environ if environ is None else environ
    path_knob, lib_knob = KNOBS.get(soname, (None, None))
    out = []
    lib_dir = env.get(path_knob, "") if path_knob else ""
    lib_name = env.get(lib_knob, "") if lib_knob else ""
    if lib_dir:
        if os.path.isfile(lib_dir):
            out.append((lib_dir, "knob"))
        else:
            out.append((os.path.join(lib_dir, lib_name or soname), "knob"))
    elif lib_name:
        out.append((lib_name, "knob"))
    out.extend((p, "mapped") for p in mapped_paths(soname))
    roots = [env.get("ROCM_PATH", ""), "/opt/rocm"]
    for root in roots:
        if root:
            out.append((os.path.join(root, "lib", soname), "rocm"))
    out.append((soname, "ldpath"))
    seen, uniq = set(), []
    for p, s in out:
        if p not in seen:
            seen.add(p)
            uniq.append((p, s))
    return uniq


def load_library(soname: str, lib=None, opener: Callable = None, environ=None) -> Loaded:
    """Load ``soname`` (or take ``lib``, an object with the same function names: the tests' fakes).

    ``opener`` defaults to ``ctypes.CDLL`` with ``RTLD_GLOBAL`` (rocprofiler-sdk needs its
    registration library globally visible, Proton promotes it the same way).
    Raises :class:`LibraryNotFound` (a ``RuntimeError``) with Proton's message.
    """
    if lib is not None:
        return Loaded(lib, getattr(lib, "path", "<injected>"), "injected")
    opener = opener or (lambda p: ctypes.CDLL(p, mode=ctypes.RTLD_GLOBAL))
    errors = []
    for path, source in candidates(soname, environ):
        if source != "ldpath" and os.sep in path and not os.path.exists(path):
            continue
        try:
            return Loaded(opener(path), path, source)
        except OSError as e:
            errors.append(f"{path}: {e}")
    err = LibraryNotFound(f"[PROTON] Could not load `{soname}`")
    err.tried = errors
    raise err


def library_available(soname: str, environ=None) -> bool:
    """True when ``soname`` can be loaded (it is then kept loaded: dlopen is reference counted)."""
    try:
        load_library(soname, environ=environ)
        return True
    except LibraryNotFound:
        return False


def declare(lib, prototypes: Dict[str, tuple]) -> None:
    """Give each function of ``prototypes`` (name -> (restype, argtypes)) its types, in a real
    library only (a fake's Python methods take no declarations); functions it lacks are skipped."""
    if not isinstance(lib, ctypes.CDLL):
        return
    for name, (restype, argtypes) in prototypes.items():
        fn = getattr(lib, name, None)
        if fn is not None:
            fn.restype, fn.argtypes = restype, argtypes


def c_string(value) -> Optional[str]:
    """A ``const char*`` result as text: bytes from ctypes, or an address (fakes), or None."""
    if isinstance(value, int):
        value = ctypes.string_at(value) if value else None
    if not value:
        return None
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


# ---------------------------------------------------------------------------- the library wrapper
class VendorError(RuntimeError):
    """A vendor library call returned a failing status; the message carries the vendor's text."""

    def __init__(self, func: str, status: int, text: str):
        super().__init__(f"[PROTON] {func} failed: {text} (status {status})")
        self.func, self.status, self.text = func, status, text


#: status returned by a call the library does not export
STATUS_NOT_EXPORTED = -1


class VendorLib:
    """A loaded, declared, checked ROCm library (or a fake exposing the same function names).

    Subclasses set :attr:`SONAME`, :attr:`PROTOTYPES`, :attr:`ERROR` and :meth:`error_text`.
    """

    #: the library's file name (see :func:`load_library`)
    SONAME: ClassVar[str] = ""
    #: name -> (restype, argtypes) of every function used
    PROTOTYPES: ClassVar[Dict[str, tuple]] = {}
    #: the exception a failing call raises
    ERROR: ClassVar[Type[VendorError]] = VendorError
    SUCCESS: ClassVar[int] = 0

    def __init__(self, lib, path: str = "", source: str = ""):
        self.lib, self.path, self.source = lib, path, source
        declare(lib, self.PROTOTYPES)
        self._fn = {name: fn for name in self.PROTOTYPES if (fn := getattr(lib, name, None)) is not None}

    @classmethod
    def load(cls, lib=None, environ=None, opener: Callable = None):
        """Load :attr:`SONAME` (or wrap ``lib``) as described in the module docstring."""
        loaded = load_library(cls.SONAME, lib=lib, opener=opener, environ=environ)
        return cls(loaded.lib, loaded.path, loaded.source)

    def has(self, name: str) -> bool:
        """Whether the library exports ``name``."""
        return name in self._fn

    def raw(self, name: str, *args):
        """Call ``name`` and return its result unchecked."""
        try:
            fn = self._fn[name]
        except KeyError:
            raise self.ERROR(name, STATUS_NOT_EXPORTED, f"function not exported by this {self.SONAME}") from None
        return fn(*args)

    def call(self, name: str, *args) -> None:
        """Call ``name``; raise :attr:`ERROR` with the vendor's text unless it returns success."""
        status = self.raw(name, *args)
        if status != self.SUCCESS:
            raise self.ERROR(name, int(status), self.error_text(int(status)))

    def error_text(self, status: int) -> str:
        """The vendor's text for a failed call's ``status``."""
        return f"status {status}"


# ---------------------------------------------------------------------------- environment
def check_amd_env(environ=None) -> None:
    """Raise Proton's ``ValueError`` when ``HIP_VISIBLE_DEVICES`` or ``CUDA_VISIBLE_DEVICES`` is set.

    Checked in that order; any value counts, even an empty string (Proton tests ``is not None``).
    """
    env = os.environ if environ is None else environ
    for var in ("HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES"):
        if var in env:
            raise ValueError(f"Proton does not work when the environment variable {var} is set on AMD GPUs. "
                             "Please unset it and use `ROCR_VISIBLE_DEVICES` instead")


# ---------------------------------------------------------------------------- modes
class ModeNotImplemented(NotImplementedError, ValueError):
    """A mode Proton knows but proton_ctypes does not implement (both error types catch it)."""


# ---------------------------------------------------------------------------- clocks
#: Python clocks the vendor clock is compared with. rocprofiler-sdk stamps with
#: CLOCK_BOOTTIME (source/lib/common/utility.hpp); roctracer with the HSA system clock.
PY_CLOCKS = (("realtime", time.time_ns),
             ("monotonic", time.monotonic_ns),
             ("boottime", (lambda: time.clock_gettime_ns(time.CLOCK_BOOTTIME))
              if hasattr(time, "CLOCK_BOOTTIME") else time.monotonic_ns))

#: |offset| under which a vendor clock *is* that Python clock (``docs/collection.md``, the join).
CLOCK_TOLERANCE_NS = 50_000


class Calibration(NamedTuple):
    """``vendor_ns + offset_ns`` is ``time.time_ns()``; ``clock`` names the matching Python clock
    (None when none matched: the clocks disagree and the backend falls back)."""

    clock: Optional[str]
    offset_ns: int
    window_ns: int
    agrees: bool


def calibrate(read_vendor: Callable[[], int], pairs: int = 64,
              tolerance_ns: int = CLOCK_TOLERANCE_NS) -> Calibration:
    """Compare a vendor timestamp reader with ``time.time_ns`` and the other Python clocks.

    The offset to ``time.time_ns()`` comes from the pair with the smallest read window.
    ``agrees`` is True when the vendor clock matches one Python clock within
    ``tolerance_ns`` (then a fixed offset converts it exactly: those clocks advance
    together) and the best read window itself is under the tolerance.
    """
    window, vendor_minus_realtime = tightest_offset(read_vendor, time.time_ns, pairs)
    to_realtime = -vendor_minus_realtime
    match, best = None, None
    for name, reader in PY_CLOCKS:
        _w, off = tightest_offset(read_vendor, reader, max(8, pairs // 4))
        if abs(off) <= tolerance_ns and (best is None or abs(off) < best):
            match, best = name, abs(off)
    agrees = match is not None and window <= tolerance_ns
    return Calibration(match, int(to_realtime), int(window), agrees)


def attribution_override(environ=None) -> Optional[str]:
    """``PROTON_CTYPES_ATTRIBUTION`` (``"timestamp"`` or ``"extcorr"``) when set, else None."""
    env = os.environ if environ is None else environ
    v = env.get("PROTON_CTYPES_ATTRIBUTION", "").strip().lower()
    return v if v in ("timestamp", "extcorr") else None
