"""CUPTI mode strings, and detecting another CUPTI user (torch.profiler) before starting."""
from __future__ import annotations

import sys

#: Output formats ``periodic_flushing`` accepts (``:format=...``).
PERIODIC_FORMATS = ("hatchet", "hatchet_msgpack", "chrome_trace")


def parse_mode(mode) -> tuple:
    """Validate a CUPTI mode string; return ``(name, knobs)``.

    ``""``/None -> ``("", {})``; ``"periodic_flushing[:format=F]"`` with F one of
    hatchet, hatchet_msgpack, chrome_trace; ``"pcsampling..."`` raises NotImplementedError;
    anything else ValueError with Proton's messages (the same as ``select.validate_mode``).
    """
    text = "" if mode is None else str(mode)
    if not text:
        return "", {}
    name, *options = text.split(":")
    if name == "pcsampling":
        raise NotImplementedError("[PROTON] CuptiProfiler: pcsampling mode is not supported by proton_ctypes yet")
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


def torch_profiler_active() -> bool:
    """Whether torch.profiler (Kineto, a CUPTI user) is profiling in this process right now."""
    torch = sys.modules.get("torch")
    try:
        return bool(torch is not None and torch._C._autograd._profiler_enabled())
    except Exception:
        return False
