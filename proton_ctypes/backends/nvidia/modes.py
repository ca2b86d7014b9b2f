"""CUPTI mode strings, and detecting another CUPTI user (torch.profiler) before starting."""
from __future__ import annotations

import math
import sys

#: Output formats ``periodic_flushing`` accepts (``:format=...``).
PERIODIC_FORMATS = ("hatchet", "hatchet_msgpack", "chrome_trace")


def parse_mode(mode) -> tuple:
    """Validate a CUPTI mode string; return ``(name, knobs)``.

    ``""``/None -> ``("", {})``; ``"periodic_flushing[:format=F]"`` with F one of
    hatchet, hatchet_msgpack, chrome_trace; ``"pcsampling[:interval=N]"`` ->
    ``("pcsampling", {"interval": N, "sampling_period": E})`` (see :func:`pc_sampling_period`);
    anything else ValueError with Proton's messages (the same as ``select.validate_mode``).
    """
    text = "" if mode is None else str(mode)
    if not text:
        return "", {}
    name, *options = text.split(":")
    if name == "pcsampling":
        return name, parse_pcsampling_options(options)
    if name != "periodic_flushing":
        raise ValueError(f"[PROTON] CuptiProfiler: unsupported mode: {text}")
    if not options or "=" not in options[0]:
        return name, {"format": "hatchet"}
    key, value = options[0].split("=", 1)
    if key != "format":
        raise ValueError(f"[PROTON] CuptiProfiler: unsupported option key: {key}")
    if value not in PERIODIC_FORMATS:
        raise ValueError(f"[PROTON] CuptiProfiler: unsupported format: {value}")
    return name, {"format": value}


#: ``proton.mode.PCSampling``'s default interval (cycles).
DEFAULT_PC_INTERVAL = 1000


def parse_pcsampling_options(options) -> dict:
    """``["interval=N"]`` (or ``[]``) -> ``{"interval": N, "sampling_period": E}``.

    A non-positive or non-integer interval raises ``ValueError("Interval must be a positive
    integer.")``, the error ``proton.mode.PCSampling`` raises; another option key raises
    ``ValueError("[PROTON] CuptiProfiler: unsupported option key: K")``.
    """
    interval = DEFAULT_PC_INTERVAL
    for opt in options:
        if not opt:
            continue
        key, _, value = opt.partition("=")
        if key != "interval":
            raise ValueError(f"[PROTON] CuptiProfiler: unsupported option key: {key}")
        try:
            interval = int(value)
        except ValueError:
            raise ValueError("Interval must be a positive integer.") from None
        if interval <= 0:
            raise ValueError("Interval must be a positive integer.")
    return {"interval": interval, "sampling_period": pc_sampling_period(interval)}


def pc_sampling_period(interval: int) -> int:
    """CUPTI's ``samplingPeriod`` for ``interval`` cycles: the exponent E of ``2**E`` nearest to
    it, clamped to CUPTI's valid 5..31.  The default interval 1000 gives 10, the exponent
    Proton's CUPTI backend always configures (``ConfigureData::DefaultFrequency``)."""
    return int(min(31, max(5, round(math.log2(interval)))))


def torch_profiler_active() -> bool:
    """Whether torch.profiler (Kineto, a CUPTI user) is profiling in this process right now."""
    torch = sys.modules.get("torch")
    try:
        return bool(torch is not None and torch._C._autograd._profiler_enabled())
    except Exception:
        return False
