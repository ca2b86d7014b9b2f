"""Process-wide profiler flags (no environment variables), as in Proton.

``flags.profiling_on`` turns every scope/state entry point into a no-op while False; it
becomes True at the first effective ``start`` and False again only in ``finalize()``.
"""
from dataclasses import dataclass


@dataclass
class ProfilerFlags:
    """The three process-wide switches."""

    #: whether profiling is enabled (scopes and states record)
    profiling_on: bool = False
    #: whether intra-kernel instrumentation is enabled
    instrumentation_on: bool = False
    #: whether the program runs under the ``proton`` command
    command_line: bool = False


flags = ProfilerFlags()
