"""Backend names, automatic selection, mode validation and one instance per backend.

``backend=None`` picks what the active Triton driver targets: ``cupti`` on CUDA,
``rocprofiler`` (else ``roctracer``) on ROCm; when no GPU driver or runtime is usable the
host-only backend is chosen and one ``UserWarning`` says what was missing.
"""
from __future__ import annotations

import warnings

from .host import HostBackend
from .modes import DEFAULT_PERIODIC_FORMAT, parse_mode

KNOWN = ("cupti", "rocprofiler", "roctracer", "instrumentation", "host")

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
    # The GPU backends are imported when first selected, never before: each costs 40-90 ms to
    # import (ctypes structures, record layouts) and only one of them is ever used.
    if name == "host":
        return HostBackend
    if name == "cupti":
        from .cupti import CuptiBackend  # lazy: a vendor backend costs 40-90 ms to import
        return CuptiBackend
    if name == "rocprofiler":
        from .rocprof import RocprofilerBackend  # lazy: a vendor backend costs 40-90 ms to import
        return RocprofilerBackend
    if name == "roctracer":
        from .roctracer import RoctracerBackend  # lazy: a vendor backend costs 40-90 ms to import
        return RoctracerBackend
    if name == "instrumentation":
        from .instrumentation.devices import InstrumentationBackend  # lazy: a vendor backend costs 40-90 ms to import
        return InstrumentationBackend
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
        import triton  # only here: importing triton takes seconds and it may be absent (host-only installs)
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
            from .rocprof import load_rocprofiler  # imported on ROCm only (see _default_factory)
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
    """Raise Proton's ``ValueError`` for a mode the backend does not know (:func:`.modes.parse_mode`)."""
    if backend != "instrumentation":  # its modes are checked by its hook (.instrumentation.modes)
        parse_mode(backend, mode)


def periodic_format(backend: str, mode: str) -> str:
    """The output format of a ``periodic_flushing[:format=F]`` mode (Proton's errors)."""
    return parse_mode(backend, mode)[1].get("format", DEFAULT_PERIODIC_FORMAT)
