"""proton_ctypes: Triton's Proton profiler in pure Python.

``import proton_ctypes as proton`` gives the API of ``triton.profiler``: sessions
(``start``, ``activate``, ``deactivate``, ``finalize``, ``profile``), scopes, states,
metrics, hooks, ``data`` and phases.  GPU libraries are loaded only when a GPU backend
starts; without a GPU the host-only backend records everything but kernels.
"""
import os as _os

from ._version import __version__
from ._rocm import configure_runtime

try:  # as 3.9: pick TheRock's ROCm runtime before any GPU library loads (None without it)
    _hsa_runtime_handle = configure_runtime()
except Exception:  # a broken ROCm wheel install must not break the import; start reports it
    _hsa_runtime_handle = None


def _rocm_register_early():
    """On an AMD GPU machine (``/dev/kfd``), register with rocprofiler-sdk before HIP starts.

    Older SDKs accept a tool only before the HIP runtime initialises; importing
    proton_ctypes before torch/triton touch the GPU is then enough.  Any failure is left
    for ``start`` to report.
    """
    if _os.environ.get("PROTON_CTYPES_ROCM_EARLY", "1" if _os.path.exists("/dev/kfd") else "0") != "1":
        return
    try:
        from .backends.rocprof import configure_early  # lazy: only on AMD machines
        configure_early()
    except Exception:
        pass


_rocm_register_early()

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
