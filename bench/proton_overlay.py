"""Real Proton of another Triton release, for the benches: the ``proton`` implementation.

The GPU machine has triton 3.6, whose Proton lacks what later releases added (device-tensor
metrics captured with CUDA graphs, among others), and a whole newer triton wheel is too large to
carry there. Proton itself is small and stands apart from the rest of Triton: its Python package
``triton.profiler`` and its C++ library ``triton/_C/libproton.so`` (which needs nothing of
``libtriton.so``). An *overlay* is those files taken from a newer wheel, plus the pure-Python
``triton/_instrumentation.py`` the newer profiler imports (and the runtime hook points it
registers at and the installed triton lacks stand in empty, :data:`NEWER_HOOK_POINTS`):

    python bench/proton_overlay.py build triton-3.9.0-cp312-abi3-....whl .upstream/proton39

With ``PROTON_BENCH_OVERLAY=.upstream/proton39`` every bench's ``proton`` implementation is that
Proton, loaded over the installed Triton (:func:`real_proton`); without it, the installed one.
The overlay is upstream code: it lives in an ignored cache and is never committed.
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import subprocess
import sys
import zipfile

#: the folder of an overlay (:func:`build`); unset: the installed triton's own Proton
OVERLAY_ENV = "PROTON_BENCH_OVERLAY"
#: what an overlay takes from a triton wheel: Proton's library, its package, and the module of
#: triton's that the newer package imports and older triton releases lack
LIBPROTON = "triton/_C/libproton.so"
PROFILER_DIR = "triton/profiler/"
EXTRA_MODULES = ("triton/_instrumentation.py",)


def build(wheel: str, dest: str) -> list:
    """Extract Proton's files from the triton ``wheel`` into ``dest``; returns their paths.
    ``libproton.so`` loses its debug sections where ``strip`` is installed (26 MB -> 2 MB for
    triton 3.9: what a device machine is carried is limited)."""
    with zipfile.ZipFile(wheel) as z:
        names = [n for n in z.namelist()
                 if n == LIBPROTON or n in EXTRA_MODULES or (n.startswith(PROFILER_DIR) and not n.endswith("/"))]
        if LIBPROTON not in names or not any(n.startswith(PROFILER_DIR) for n in names):
            raise ValueError(f"{wheel}: no {LIBPROTON} and {PROFILER_DIR} in it (not a triton wheel with Proton?)")
        for n in names:
            z.extract(n, dest)
    strip = shutil.which("strip")
    if strip:
        subprocess.run([strip, "--strip-debug", os.path.join(dest, LIBPROTON)], check=False, capture_output=True)
    return [os.path.join(dest, n) for n in names]


def _load(name: str, path: str, package_dir: str = None):
    spec = importlib.util.spec_from_file_location(
        name, path, submodule_search_locations=[package_dir] if package_dir else None)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def install(overlay: str):
    """Make ``triton.profiler`` (and ``triton._C.libproton``) the overlay's, over the installed
    triton; returns the profiler module. Call it before anything imports the installed one."""
    import triton
    if "triton.profiler" in sys.modules or "triton._C.libproton" in sys.modules:
        raise RuntimeError("proton_overlay.install: triton's own Proton is imported already")
    _load("triton._C.libproton", os.path.join(overlay, LIBPROTON))
    for rel in EXTRA_MODULES:
        path = os.path.join(overlay, rel)
        name = rel[:-len(".py")].replace("/", ".")
        if os.path.exists(path) and importlib.util.find_spec(name) is None:
            setattr(triton, name.rsplit(".", 1)[1], _load(name, path))
    _add_missing_hooks()
    package = os.path.join(overlay, PROFILER_DIR)
    profiler = _load("triton.profiler", os.path.join(package, "__init__.py"), package)
    triton.profiler = profiler
    return profiler


#: runtime hook points a newer Proton registers at that older triton releases lack (3.9 added
#: ``kernel_unload_hook``): an empty chain of the same kind stands in, which never fires
NEWER_HOOK_POINTS = ("kernel_unload_hook",)


def _add_missing_hooks() -> None:
    import triton.knobs as knobs
    runtime = knobs.runtime
    for point in NEWER_HOOK_POINTS:
        if not hasattr(runtime, point):
            setattr(runtime, point, type(runtime.kernel_load_end_hook)())


def real_proton(environ=None):
    """The ``proton`` of the benches: the overlay named by :data:`OVERLAY_ENV`, else the
    installed ``triton.profiler``."""
    overlay = (os.environ if environ is None else environ).get(OVERLAY_ENV)
    if overlay:
        return install(overlay)
    import triton.profiler as proton
    return proton


def command_prefix(environ=None) -> str:
    """``PROTON_BENCH_OVERLAY=... `` when an overlay is in use (for a results file's command)."""
    overlay = (os.environ if environ is None else environ).get(OVERLAY_ENV)
    return f"{OVERLAY_ENV}={overlay} " if overlay else ""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="extract Proton's files from a triton wheel")
    b.add_argument("wheel")
    b.add_argument("dest")
    a = ap.parse_args()
    for path in build(a.wheel, a.dest):
        print(path)


if __name__ == "__main__":
    main()
