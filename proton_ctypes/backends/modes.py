"""Backend modes (``start(mode=...)``): the one parser, with Proton's rules and messages, and
the typed value it returns.

A mode string is ``name[:key=value[:...]]``.  It is parsed once, when the session is created
(:func:`proton_ctypes.backends.select.parse_mode`, which knows what each backend accepts), into
a :class:`Mode`; the session keeps it and its backend is started with it.  Nothing reads the
string again.  Proton's rules:

* an unknown name: ``ValueError("[PROTON] <Profiler>: unsupported mode: <name>")``;
* ``periodic_flushing[:format=F]``: only the first option is read (as Proton's
  ``setPeriodicFlushingMode``); an option without ``=`` keeps the default ``hatchet``; a key
  other than ``format`` raises ``unsupported option key: <key>``, a format that is not in the
  writers' table (:data:`proton_ctypes.writers.FORMATS`) ``unsupported format: <F>``;
* ``pcsampling[:interval=N]``: ``interval`` is the only key (else ``unsupported option key``),
  a positive integer (else ``proton.mode.PCSampling``'s ``"Interval must be a positive
  integer."``), 1000 by default.

Names are matched exactly (lower case).  The instrumentation backend's string is
``<device>[:<instrumentation mode>]``: only the device prefix is the backend's (the
instrumentation mode itself is interpreted by its hook, :mod:`.instrumentation.modes`).
"""
from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Sequence

from ..writers import FORMATS


class ModeKind(enum.Enum):
    """What a mode asks of its backend."""

    #: no mode (``""`` or None): collect, deliver at flush
    PLAIN = ""
    #: write each closed phase to its part file as soon as it is flushed (timed flushes on a GPU)
    PERIODIC_FLUSHING = "periodic_flushing"
    #: CUPTI / rocprofiler-sdk program-counter sampling
    PC_SAMPLING = "pcsampling"
    #: the instrumentation backend's ``<device>[:...]``
    INSTRUMENTATION = "instrumentation"


#: the format ``periodic_flushing`` writes when none is given
DEFAULT_PERIODIC_FORMAT = "hatchet"
#: ``proton.mode.PCSampling``'s default interval (cycles)
DEFAULT_PC_INTERVAL = 1000
INTERVAL_ERROR = "Interval must be a positive integer."


@dataclass(frozen=True)
class Mode:
    """A backend mode, parsed once (:func:`parse`).  Two modes are equal when their strings are
    (Proton refuses a second session of one backend whose mode string differs)."""

    #: the mode string as given (for the instrumentation backend: ``<device>[:<mode>]``)
    text: str = ""
    kind: ModeKind = ModeKind.PLAIN
    #: the name Proton's errors give the backend that parsed it (``CuptiProfiler``, ...)
    profiler: str = ""
    #: ``periodic_flushing``: the output format of the part files
    format: str = DEFAULT_PERIODIC_FORMAT
    #: ``pcsampling``: the sampling interval in cycles
    interval: int = DEFAULT_PC_INTERVAL
    #: the instrumentation backend: the device prefix as given (``cuda``, ``hip``, ...)
    device: str = ""

    @property
    def periodic_flushing(self) -> bool:
        """Whether closed phases are written at each flush."""
        return self.kind is ModeKind.PERIODIC_FLUSHING

    @property
    def pc_sampling(self) -> bool:
        """Whether program counters are sampled."""
        return self.kind is ModeKind.PC_SAMPLING


#: no mode at all
NO_MODE = Mode()


def parse(profiler: str, accepted: Sequence[ModeKind], mode) -> Mode:
    """Validate ``mode`` (a string, a mode object or None) for a backend that accepts the kinds
    ``accepted`` and whose errors name it ``profiler``; return the :class:`Mode`.

    Raises ``ValueError`` with Proton's messages (module docstring).
    """
    text = "" if mode is None else str(mode)
    if ModeKind.INSTRUMENTATION in accepted:
        return Mode(text, ModeKind.INSTRUMENTATION, profiler, device=text.split(":")[0])
    if not text:
        return Mode(text, ModeKind.PLAIN, profiler)
    name, *options = text.split(":")
    kind = next((k for k in accepted if k.value == name), None)
    if kind is None or kind is ModeKind.PLAIN:
        raise ValueError(f"[PROTON] {profiler}: unsupported mode: {name}")
    if kind is ModeKind.PERIODIC_FLUSHING:
        return Mode(text, kind, profiler, format=_periodic_format(profiler, options))
    return Mode(text, kind, profiler, interval=_pc_interval(profiler, options))


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
