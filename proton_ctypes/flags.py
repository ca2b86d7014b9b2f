"""Process-wide profiler flags, as ``triton.profiler.flags``: ``flags.profiling_on``,
``flags.instrumentation_on`` and ``flags.command_line`` (no environment variables)."""
from .core.flags import ProfilerFlags, flags

__all__ = ["ProfilerFlags", "flags"]
