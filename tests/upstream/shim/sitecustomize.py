"""Started by tests/upstream/run.py through PYTHONPATH: every Python process of an upstream
run (pytest and the commands its tests start) gets the profiler chosen by the runner.

PROTON_UPSTREAM_IMPL=ours   triton.profiler[.X] is proton_ctypes[.X] (tests/upstream/alias.py)
PROTON_UPSTREAM_IMPL=real   the real triton.profiler; with PROTON_UPSTREAM_ORACLE=1 (no GPU)
                            host-only through the oracle recipe, stubs from PROTON_UPSTREAM_STUBS;
                            with PROTON_BENCH_OVERLAY (a GPU machine), the Proton of a newer
                            triton release over the installed one (bench/proton_overlay.py)
"""
import importlib.machinery
import importlib.util
import os
import sys


def _load_alias():
    here = os.path.dirname(os.path.abspath(__file__))
    name = "_proton_upstream_alias"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, os.path.join(os.path.dirname(here), "alias.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _chain():
    """Run the sitecustomize this one shadows, if the environment has one."""
    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is not None and spec.origin and os.path.abspath(spec.origin) != os.path.abspath(__file__):
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)


_chain()
_impl = os.environ.get("PROTON_UPSTREAM_IMPL")
if _impl == "ours":
    _load_alias().install_ours()
elif _impl == "real" and os.environ.get("PROTON_UPSTREAM_ORACLE") == "1":
    _load_alias().install_real_on_cpu(os.environ.get("PROTON_UPSTREAM_STUBS") or None)
elif _impl == "real" and os.environ.get("PROTON_BENCH_OVERLAY"):
    _load_alias().install_real_overlay()
