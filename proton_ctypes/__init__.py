"""proton_ctypes: Triton's Proton profiler in pure Python.

``import proton_ctypes as proton`` gives the API of ``triton.profiler``: sessions
(``start``, ``activate``, ``deactivate``, ``finalize``, ``profile``), scopes, states,
metrics, hooks, ``data`` and phases.  GPU libraries are loaded only when a GPU backend
starts; without a GPU the host-only backend records everything but kernels.
"""
from .scope import scope, cpu_timed_scope, enter_scope, exit_scope
from .state import state, enter_state, exit_state, metadata_state
from .profile import start, activate, deactivate, finalize, profile, DEFAULT_PROFILE_NAME
from . import context, specs, mode, data, hooks, flags, metric

__all__ = [
    "scope", "cpu_timed_scope", "enter_scope", "exit_scope",
    "state", "enter_state", "exit_state", "metadata_state",
    "start", "activate", "deactivate", "finalize", "profile", "DEFAULT_PROFILE_NAME",
    "context", "specs", "mode", "data", "hooks", "flags", "metric",
]
