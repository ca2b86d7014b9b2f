"""Backend mode strings (``start(mode=...)``): the one parser, with Proton's rules and messages.

A mode string is ``name[:key=value[:...]]``.  Which names a backend accepts is
:data:`MODES`; Proton's errors name the profiler (:data:`PROFILER_NAMES`):

* an unknown name: ``ValueError("[PROTON] <Profiler>: unsupported mode: <name>")``;
* ``periodic_flushing[:format=F]``: only the first option is read (as Proton's
  ``setPeriodicFlushingMode``); an option without ``=`` keeps the default ``hatchet``; a key
  other than ``format`` raises ``unsupported option key: <key>``, a format that is not in the
  writers' table (:data:`proton_ctypes.writers.FORMATS`) ``unsupported format: <F>``;
* ``pcsampling[:interval=N]``: ``interval`` is the only key (else ``unsupported option key``),
  a positive integer (else ``proton.mode.PCSampling``'s ``"Interval must be a positive
  integer."``), 1000 by default.

Names are matched exactly (lower case): the session layer keys periodic flushing on the
literal ``periodic_flushing`` prefix.  The instrumentation backend's modes are its own
(:mod:`.instrumentation.modes`).
"""
from __future__ import annotations

from typing import Sequence, Tuple

from ..writers import FORMATS

PERIODIC_FLUSHING = "periodic_flushing"
PC_SAMPLING = "pcsampling"

#: display names used in Proton's mode errors
PROFILER_NAMES = {"cupti": "CuptiProfiler", "rocprofiler": "RocprofSDKProfiler",
                  "roctracer": "RoctracerProfiler", "host": "HostProfiler", "mock": "CuptiProfiler",
                  "instrumentation": "InstrumentationProfiler"}

#: modes each backend accepts (the part before the first ':')
MODES = {"cupti": (PC_SAMPLING, PERIODIC_FLUSHING), "rocprofiler": (PC_SAMPLING, PERIODIC_FLUSHING),
         "roctracer": (PERIODIC_FLUSHING,), "host": (PERIODIC_FLUSHING,),
         "mock": (PC_SAMPLING, PERIODIC_FLUSHING)}

#: the format ``periodic_flushing`` writes when none is given
DEFAULT_PERIODIC_FORMAT = "hatchet"
#: ``proton.mode.PCSampling``'s default interval (cycles)
DEFAULT_PC_INTERVAL = 1000
INTERVAL_ERROR = "Interval must be a positive integer."


def parse_mode(backend: str, mode) -> Tuple[str, dict]:
    """Validate ``mode`` (a string, a mode object or None) for ``backend``; return ``(name, options)``.

    ``""``/None -> ``("", {})``; ``periodic_flushing`` -> ``{"format": F}``; ``pcsampling`` ->
    ``{"interval": N}``.  Raises ``ValueError`` with Proton's messages (module docstring).
    """
    text = "" if mode is None else str(mode)
    if not text:
        return "", {}
    name, *options = text.split(":")
    profiler = PROFILER_NAMES.get(backend, backend)
    if name not in MODES.get(backend, ()):
        raise ValueError(f"[PROTON] {profiler}: unsupported mode: {name}")
    if name == PERIODIC_FLUSHING:
        return name, {"format": _periodic_format(profiler, options)}
    return name, {"interval": _pc_interval(profiler, options)}


def _periodic_format(profiler: str, options: Sequence[str]) -> str:
    if not options or "=" not in options[0]:
        return DEFAULT_PERIODIC_FORMAT
    key, value = options[0].split("=", 1)
    if key != "format":
        raise ValueError(f"[PROTON] {profiler}: unsupported option key: {key}")
    if value not in FORMATS:
        raise ValueError(f"[PROTON] {profiler}: unsupported format: {value}")
    return value


def _pc_interval(profiler: str, options: Sequence[str]) -> int:
    interval = DEFAULT_PC_INTERVAL
    for option in options:
        if not option:
            continue
        key, _, value = option.partition("=")
        if key != "interval":
            raise ValueError(f"[PROTON] {profiler}: unsupported option key: {key}")
        try:
            interval = int(value)
        except ValueError:
            raise ValueError(INTERVAL_ERROR) from None
        if interval <= 0:
            raise ValueError(INTERVAL_ERROR)
    return interval
