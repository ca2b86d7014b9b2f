"""``proton-viewer``: print a Proton tree profile (or several as one), compare, gate regressions, write HTML.

Pure Python (numpy, msgpack and the standard library); it reads profile files only and imports neither
triton nor the rest of proton_ctypes.  Output is byte-identical to Proton 3.9's viewer except where
proton_ctypes deliberately differs (README, "Differences from Proton"): see :mod:`.cli` and the modules it names.  Several files,
globs and period series are aggregated node by node: see :mod:`.inputs` and :mod:`.aggregate`.

The Python API of ``triton.profiler.viewer`` (``read``, ``parse``, ``derive_metrics``, ``filter_frames``,
``format_frames``, ``apply_diff_profile``, ... on hatchet GraphFrames) is importable from here too: see
:mod:`.frames`.  It needs llnl-hatchet and pandas (``pip install proton_ctypes[hatchet]``), which are
imported only when one of those names is first used.
"""

from .cli import main

# name -> submodule that defines it (loaded on first access, so the command needs neither hatchet nor pandas)
_FRAME_API = {
    "apply_diff_profile": "frames", "emit_warnings": "frames", "filter_frames": "frames",
    "format_frames": "frames", "get_raw_metrics": "frames", "parse": "frames", "print_tree": "frames",
    "read": "frames", "remove_frames": "frames", "show_metrics": "frames",
    "derive_metrics": "frame_metrics", "get_min_time_bytes": "frame_metrics",
    "get_min_time_flops": "frame_metrics", "match_available_metrics": "frame_metrics",
}

__all__ = ["main"]


def __getattr__(name):
    module = _FRAME_API.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module  # lazy: the frame API loads hatchet on first use
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_FRAME_API))
