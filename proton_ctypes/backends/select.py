"""The table of backends, automatic selection, mode parsing and one instance per backend.

:data:`BACKENDS` is the one list of what ``backend=`` accepts: per name, the name Proton's
errors give the profiler, the class (imported when first selected), the modes it accepts and
its environment check.

``backend=None`` picks what the active Triton driver targets: ``cupti`` on CUDA,
``rocprofiler`` (else ``roctracer``) on ROCm; when no GPU driver or runtime is usable the
host-only backend is chosen and one ``UserWarning`` says why in one line.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, replace
from typing import Callable, Optional, Tuple

from .amd.lib import check_amd_env
from .base import Backend
from .host import HostBackend
from .modes import Mode, ModeKind, parse


# The GPU backends are imported when first selected, never before: each costs 40-90 ms to
# import (ctypes structures, record layouts) and only one of them is ever used.
def _cupti():
    from .cupti import CuptiBackend  # lazy: see above
    return CuptiBackend


def _rocprofiler():
    from .rocprof import RocprofilerBackend  # lazy: see above
    return RocprofilerBackend


def _roctracer():
    from .roctracer import RoctracerBackend  # lazy: see above
    return RoctracerBackend


def _instrumentation():
    from .instrumentation.devices import InstrumentationBackend  # lazy: see above
    return InstrumentationBackend


@dataclass(frozen=True)
class BackendEntry:
    """One row of :data:`BACKENDS`."""

    #: what users pass as ``backend=``
    name: str
    #: the name Proton's mode errors give the profiler
    profiler: str
    #: returns the backend factory (its class): imported on first use
    load: Callable[[], Callable[[], Backend]]
    #: the mode kinds ``mode=`` may name (:class:`.modes.ModeKind`)
    modes: Tuple[ModeKind, ...]
    #: raises Proton's error when the environment rules the backend out (before a session exists)
    check_env: Optional[Callable[[], None]] = None


_GPU_MODES = (ModeKind.PC_SAMPLING, ModeKind.PERIODIC_FLUSHING)

#: every backend, by the name ``backend=`` takes
BACKENDS = {e.name: e for e in (
    BackendEntry("cupti", "CuptiProfiler", _cupti, _GPU_MODES),
    BackendEntry("rocprofiler", "RocprofSDKProfiler", _rocprofiler, _GPU_MODES, check_amd_env),
    BackendEntry("roctracer", "RoctracerProfiler", _roctracer, (ModeKind.PERIODIC_FLUSHING,), check_amd_env),
    BackendEntry("instrumentation", "InstrumentationProfiler", _instrumentation, (ModeKind.INSTRUMENTATION,)),
    BackendEntry("host", "HostProfiler", lambda: HostBackend, (ModeKind.PERIODIC_FLUSHING,)),
)}
#: the names of :data:`BACKENDS` (the ``proton`` command's choices)
NAMES = tuple(BACKENDS)

#: backends registered with :func:`register` (test doubles, or a known name's stand-in)
_registered = {}
_instances = {}
_warned = False


def register(name: str, factory, like: str = "cupti") -> None:
    """Make ``backend=name`` create its backend with ``factory`` (test doubles).  A name of
    :data:`BACKENDS` keeps its row otherwise; a new name takes the profiler name and modes of
    backend ``like``."""
    row = BACKENDS.get(name) or replace(BACKENDS[like], name=name, check_env=None)
    _registered[name] = replace(row, load=lambda: factory)
    _instances.pop(name, None)


def unregister(name: str) -> None:
    """Forget a backend registered with :func:`register` (its instance too)."""
    _registered.pop(name, None)
    _instances.pop(name, None)


def entry(name: str) -> BackendEntry:
    """The row of backend ``name``; Proton's ``ValueError`` for an unknown name."""
    row = _registered.get(name) or BACKENDS.get(name)
    if row is None:
        raise ValueError(f"[PROTON] Unknown profiler: {name}")
    return row


def validate_name(name: str) -> None:
    """Raise Proton's ``ValueError`` for an unknown backend name."""
    entry(name)


def check_environment(name: str) -> None:
    """Raise Proton's error when the environment rules backend ``name`` out (the AMD backends:
    ``HIP_VISIBLE_DEVICES``/``CUDA_VISIBLE_DEVICES`` set); nothing for unknown names."""
    row = BACKENDS.get(name)
    if row is not None and row.check_env is not None:
        row.check_env()


def parse_mode(name: str, mode) -> Mode:
    """``mode`` (a string, a mode object or None) parsed for backend ``name``: the session's
    :class:`.modes.Mode`.  Raises Proton's ``ValueError`` for a mode the backend does not know."""
    row = entry(name)
    return parse(row.profiler, row.modes, mode)


def get(name: str) -> Backend:
    """The process-wide instance of backend ``name`` (created on first use)."""
    inst = _instances.get(name)
    if inst is None:
        inst = _instances[name] = entry(name).load()()
    return inst


def target_backend():
    """The active Triton driver's target backend (``"cuda"``, ``"hip"``) or the exception."""
    try:
        import triton  # only here: importing triton takes seconds and it may be absent (host-only installs)
        return triton.runtime.driver.active.get_current_target().backend
    except Exception as e:  # no driver, no GPU, broken install
        return e


def host_reason(target) -> str:
    """Why there is no GPU backend for Triton's ``target`` (what :func:`target_backend` gave),
    in a few words: ``"triton is not installed"``, ``"no GPU driver"``, ..."""
    if isinstance(target, ImportError):
        if (target.name or "").split(".")[0] == "triton":
            return "triton is not installed"
        return f"triton cannot be imported ({type(target).__name__}: {target})"
    if isinstance(target, BaseException):
        return "no GPU driver"
    return f"no profiler for Triton's target {target!r}"


def choose():
    """Resolve ``backend=None``: ``(backend name, None)``, or ``("host", why)`` when no GPU
    backend applies (see :func:`host_reason`)."""
    target = target_backend()
    if target == "cuda":
        return "cupti", None
    if target == "hip":
        try:
            from .rocprof import load_rocprofiler  # imported on ROCm only (see _cupti)
            load_rocprofiler()
            return "rocprofiler", None
        except Exception:
            return "roctracer", None
    return "host", host_reason(target)


def auto_select() -> str:
    """Resolve ``backend=None`` to a backend name (see module docstring)."""
    global _warned
    name, why = choose()
    if why is not None and not _warned:
        _warned = True
        warnings.warn(f"proton_ctypes: {why}: host-only backend (no kernel records); "
                      'backend="host" silences this', UserWarning, stacklevel=3)
    return name
