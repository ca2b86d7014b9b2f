"""Process-wide profiler flags (no environment variables), as in Proton.

``flags.profiling_on`` turns every scope/state entry point into a no-op while False; it
becomes True at the first effective ``start`` and False again only in ``finalize()``.
Setting it (by us or by the user) calls every function registered with
:func:`on_profiling_change`: the event layer
then drops each thread's fast-path view, so the hot paths need not test the flag.
"""
from dataclasses import dataclass

#: called with no arguments whenever ``profiling_on`` is assigned
_listeners: list = []


def on_profiling_change(fn) -> None:
    """Call ``fn()`` (no arguments) whenever ``flags.profiling_on`` is assigned."""
    _listeners.append(fn)


@dataclass
class ProfilerFlags:
    """The three process-wide switches."""

    #: whether profiling is enabled (scopes and states record)
    profiling_on: bool = False
    #: whether intra-kernel instrumentation is enabled
    instrumentation_on: bool = False
    #: whether the program runs under the ``proton`` command
    command_line: bool = False

    def __setattr__(self, key, value):
        object.__setattr__(self, key, value)
        if key == "profiling_on":
            for fn in _listeners:
                fn()


flags = ProfilerFlags()
