"""Backend names, automatic selection, mode validation and one instance per backend.

``backend=None`` picks what the active Triton driver targets: ``cupti`` on CUDA,
``rocprofiler`` (else ``roctracer``) on ROCm; when no GPU driver or runtime is usable the
host-only backend is chosen and one ``UserWarning`` says what was missing.
"""
from __future__ import annotations

import warnings

from .host import HostBackend

KNOWN = ("cupti", "rocprofiler", "roctracer", "instrumentation", "host")

#: display names used in Proton's mode errors
PROFILER_NAMES = {"cupti": "CuptiProfiler", "rocprofiler": "RocprofSDKProfiler",
                  "roctracer": "RoctracerProfiler", "host": "HostProfiler", "mock": "CuptiProfiler",
                  "instrumentation": "InstrumentationProfiler"}

#: modes each backend accepts (by the part before the first ':')
MODES = {"cupti": ("pcsampling", "periodic_flushing"), "rocprofiler": ("pcsampling", "periodic_flushing"),
         "roctracer": ("periodic_flushing",), "host": ("periodic_flushing",),
         "mock": ("pcsampling", "periodic_flushing")}

_factories = {}
_instances = {}
_warned = False


def register(name: str, factory) -> None:
    """Make ``backend=name`` available (used for test doubles)."""
    _factories[name] = factory
    _instances.pop(name, None)


def unregister(name: str) -> None:
    """Forget a backend registered with :func:`register` (its instance too)."""
    _factories.pop(name, None)
    _instances.pop(name, None)


def _default_factory(name):
    if name == "host":
        return HostBackend
    if name == "cupti":
        from .cupti import CuptiBackend
        return CuptiBackend
    if name == "rocprofiler":
        from .rocprof import RocprofilerBackend
        return RocprofilerBackend
    if name == "roctracer":
        from .roctracer import RoctracerBackend
        return RoctracerBackend
    raise ValueError(f"[PROTON] Unknown profiler: {name}")


def validate_name(name: str) -> None:
    """Raise Proton's ``ValueError`` for an unknown backend name."""
    if name not in KNOWN and name not in _factories:
        raise ValueError(f"[PROTON] Unknown profiler: {name}")


def get(name: str):
    """The process-wide instance of backend ``name`` (created on first use)."""
    inst = _instances.get(name)
    if inst is None:
        factory = _factories.get(name) or _default_factory(name)
        inst = _instances[name] = factory()
    return inst


def target_backend():
    """The active Triton driver's target backend (``"cuda"``, ``"hip"``) or None."""
    try:
        import triton
        return triton.runtime.driver.active.get_current_target().backend
    except Exception as e:  # no driver, no GPU, broken install
        return e


def auto_select() -> str:
    """Resolve ``backend=None`` to a backend name (see module docstring)."""
    global _warned
    target = target_backend()
    if target == "cuda":
        return "cupti"
    if target == "hip":
        try:
            from .rocprof import load_rocprofiler
            load_rocprofiler()
            return "rocprofiler"
        except Exception:
            return "roctracer"
    if not _warned:
        _warned = True
        why = f"{type(target).__name__}: {target}" if isinstance(target, BaseException) else f"target {target!r}"
        warnings.warn(f"proton_ctypes: no usable GPU driver ({why}); using the host-only backend: "
                      "scopes, states and metrics are recorded, kernels are not", UserWarning, stacklevel=3)
    return "host"


def validate_mode(backend: str, mode: str) -> None:
    """Raise Proton's ``ValueError`` for a mode the backend does not know."""
    if not mode or backend == "instrumentation":
        return
    parts = mode.split(":")
    base = parts[0]
    prof = PROFILER_NAMES.get(backend, backend)
    if base not in MODES.get(backend, ()):
        raise ValueError(f"[PROTON] {prof}: unsupported mode: {base}")
    if base == "periodic_flushing":
        periodic_format(backend, mode)


def periodic_format(backend: str, mode: str) -> str:
    """The output format of a ``periodic_flushing[:format=F]`` mode (Proton's errors)."""
    parts = mode.split(":")
    prof = PROFILER_NAMES.get(backend, backend)
    if len(parts) < 2 or "=" not in parts[1]:
        return "hatchet"
    key, value = parts[1].split("=", 1)
    if key != "format":
        raise ValueError(f"[PROTON] {prof}: unsupported option key: {key}")
    if value not in ("hatchet_msgpack", "chrome_trace", "hatchet"):
        raise ValueError(f"[PROTON] {prof}: unsupported format: {value}")
    return value
