"""Mode objects for ``start(mode=...)``; ``str(mode)`` is the mode string libproton parses.

``PCSampling(interval=...)`` for the cupti/rocprofiler backends; ``Default`` and ``MMA``
for the instrumentation backend, whose string fields are mapped to enum members whose
``str`` reads like Triton's (``METRIC_TYPE.CYCLE``, ``GRANULARITY.WARP`` ...).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import List

__all__ = ["METRIC_TYPE", "SAMPLING_STRATEGY", "BUFFER_STRATEGY", "BUFFER_TYPE", "GRANULARITY", "metric_types",
           "buffer_strategies", "buffer_types", "sampling_strategies", "granularities", "Optimize", "optimizations",
           "BaseMode", "PCSampling", "InstrumentationMode", "Default", "MMA"]


class _Enum(Enum):
    def __str__(self):
        return f"{type(self).__name__}.{self.name}"


METRIC_TYPE = _Enum("METRIC_TYPE", ["CYCLE"])
SAMPLING_STRATEGY = _Enum("SAMPLING_STRATEGY", ["NONE", "SELECTIVE"])
BUFFER_STRATEGY = _Enum("BUFFER_STRATEGY", ["CIRCULAR", "FLUSH"])
BUFFER_TYPE = _Enum("BUFFER_TYPE", ["SHARED", "GLOBAL"])
GRANULARITY = _Enum("GRANULARITY", ["CTA", "WARP", "WARP_2", "WARP_4", "WARP_8", "WARP_GROUP", "WARP_GROUP_2",
                                    "WARP_GROUP_4", "WARP_GROUP_8"])

metric_types = {"cycle": METRIC_TYPE.CYCLE}
buffer_strategies = {"circular": BUFFER_STRATEGY.CIRCULAR, "flush": BUFFER_STRATEGY.FLUSH}
buffer_types = {"shared": BUFFER_TYPE.SHARED, "global": BUFFER_TYPE.GLOBAL}
sampling_strategies = {"none": SAMPLING_STRATEGY.NONE, "selective": SAMPLING_STRATEGY.SELECTIVE}
granularities = {g.name.lower(): g for g in GRANULARITY}


class Optimize(Enum):
    """Instrumentation optimisations (``optimizations="time_shift,clock32"``)."""

    TIMESHIFT = "time_shift"
    SCHED_STORES = "sched_stores"
    SCHED_BARRIERS = "sched_barriers"
    CLOCK32 = "clock32"

    def __str__(self):
        return self.value


optimizations = {o.value: o for o in Optimize}


@dataclass(frozen=True)
class BaseMode:
    """A profiling mode; ``name`` is the mode's keyword."""

    name: str


@dataclass(frozen=True)
class PCSampling(BaseMode):
    """Program-counter sampling every ``interval`` cycles (must be positive)."""

    name: str = field(default="pcsampling", init=False)
    interval: int = 1000

    def __post_init__(self):
        if self.interval <= 0:
            raise ValueError("Interval must be a positive integer.")

    def __str__(self):
        return f"{self.name}:interval={self.interval}"


@dataclass(frozen=True)
class InstrumentationMode(BaseMode):
    """Options shared by the instrumentation modes (strings are mapped to enums)."""

    metric_type: METRIC_TYPE = METRIC_TYPE.CYCLE
    sampling_strategy: SAMPLING_STRATEGY = SAMPLING_STRATEGY.NONE
    sampling_options: str = ""
    granularity: GRANULARITY = GRANULARITY.WARP
    buffer_strategy: BUFFER_STRATEGY = BUFFER_STRATEGY.CIRCULAR
    buffer_type: BUFFER_TYPE = BUFFER_TYPE.SHARED
    buffer_size: int = 0
    optimizations: List[Optimize] = field(default_factory=list)

    def __post_init__(self):
        for fname, lookup in (("metric_type", metric_types), ("sampling_strategy", sampling_strategies),
                              ("granularity", granularities), ("buffer_strategy", buffer_strategies),
                              ("buffer_type", buffer_types)):
            value = getattr(self, fname)
            if isinstance(value, str):
                if value not in lookup:
                    raise ValueError(f"Unknown {fname}: {value}")
                object.__setattr__(self, fname, lookup[value])
        opts = self.optimizations
        if isinstance(opts, str):
            names = [o.strip() for o in opts.split(",")] if opts else []
            for o in names:
                if o not in optimizations:
                    raise ValueError(f"Unknown optimization: {o}")
            object.__setattr__(self, "optimizations", [optimizations[o] for o in names])

    def __str__(self):
        opts = ",".join(str(o) for o in self.optimizations)
        return (f"{self.name}:metric_type={self.metric_type}:sampling_strategy={self.sampling_strategy}"
                f":sampling_options={self.sampling_options}:granularity={self.granularity}"
                f":buffer_strategy={self.buffer_strategy}:buffer_type={self.buffer_type}"
                f":buffer_size={self.buffer_size}:optimizations={opts}")


@dataclass(frozen=True)
class Default(InstrumentationMode):
    """The default instrumentation mode."""

    name: str = field(default="default", init=False)


@dataclass(frozen=True)
class MMA(InstrumentationMode):
    """Instrumentation focused on matrix-multiply units."""

    name: str = field(default="mma", init=False)
