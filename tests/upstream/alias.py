"""Make ``triton.profiler`` resolve to ``proton_ctypes`` (``install_ours``), or make the real
``triton.profiler`` run host-only on a machine with no GPU (``install_real_on_cpu``).

Used by ``shim/sitecustomize.py`` so that the pytest process and every Python process it
starts (``proton``, ``python -m triton.profiler.proton``, ...) see the same profiler.

Aliasing rules (``install_ours``):

* ``triton.profiler`` *is* the module object ``proton_ctypes``; ``triton.profiler.X.Y`` is
  ``proton_ctypes.X.Y`` (same objects, nothing is executed twice);
  ``triton.profiler.proton`` is ``proton_ctypes.proton`` (``proton_ctypes.cli`` before the rename).
* Every ``proton_ctypes.*`` module already imported gets its ``triton.profiler.*`` name in
  ``sys.modules`` before anything asks for it, so ``import triton.profiler.profile`` finds it
  there and the import system never rebinds the attribute ``profile`` (the function) of the
  package to the submodule.
* ``python -m triton.profiler.proton`` runs ``proton_ctypes.proton``'s code as ``__main__``.
* The rest of ``triton`` stays the real one.
"""
from __future__ import annotations

import contextlib
import gc
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

ALIAS = "triton.profiler"
TARGET = "proton_ctypes"
#: first path component under triton.profiler -> candidate names under proton_ctypes
RENAMED = {"proton": ("proton", "cli")}

HERE = os.path.dirname(os.path.abspath(__file__))


def _target_candidates(fullname: str):
    rest = fullname[len(ALIAS):]
    if not rest:
        return [TARGET]
    head, *tail = rest[1:].split(".")
    return [".".join([TARGET, c, *tail]) for c in RENAMED.get(head, (head,))]


def sync_aliases(exclude: str = None) -> None:
    """Give every loaded ``proton_ctypes[.X]`` module its ``triton.profiler[.X]`` name."""
    for name, module in list(sys.modules.items()):
        if module is None or not (name == TARGET or name.startswith(TARGET + ".")):
            continue
        rest = name[len(TARGET):]
        alias = ALIAS + rest
        for new, olds in RENAMED.items():  # proton_ctypes.cli -> triton.profiler.proton
            for old in olds[1:]:
                if rest == "." + old and (TARGET + "." + new) not in sys.modules:
                    alias = f"{ALIAS}.{new}"
        if alias != exclude:
            sys.modules.setdefault(alias, module)


class _AliasLoader(importlib.abc.Loader):
    """Loads ``triton.profiler.X`` as the module ``proton_ctypes.X`` itself."""

    def __init__(self, target: str, target_spec):
        self.target = target
        self.target_spec = target_spec

    def create_module(self, spec):
        module = importlib.import_module(self.target)
        self.own_spec = module.__spec__
        return module

    def exec_module(self, module):
        # importlib always rebinds __spec__ to the alias spec: give the module its own back
        module.__spec__ = self.own_spec
        sync_aliases()

    # runpy (python -m triton.profiler.proton) runs the target's code as __main__
    def get_code(self, fullname):
        return self.target_spec.loader.get_code(self.target)

    def is_package(self, fullname):
        return self.target_spec.submodule_search_locations is not None

    def get_source(self, fullname):
        get = getattr(self.target_spec.loader, "get_source", None)
        return get(self.target) if get else None

    def get_filename(self, fullname):
        return self.target_spec.origin


class AliasFinder(importlib.abc.MetaPathFinder):
    """Meta-path finder mapping ``triton.profiler[.X]`` to ``proton_ctypes[.X]``."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != ALIAS and not fullname.startswith(ALIAS + "."):
            return None
        sync_aliases(exclude=fullname)
        if fullname in sys.modules:  # became loaded while syncing (normally not)
            return sys.modules[fullname].__spec__
        for cand in _target_candidates(fullname):
            module = sys.modules.get(cand)
            try:
                tspec = module.__spec__ if module is not None else importlib.util.find_spec(cand)
            except (ImportError, ValueError):
                tspec = None
            if tspec is None:
                continue
            spec = importlib.machinery.ModuleSpec(
                fullname, _AliasLoader(cand, tspec), origin=tspec.origin,
                is_package=tspec.submodule_search_locations is not None)
            spec.has_location = tspec.has_location
            return spec
        return None  # e.g. triton.profiler._rocm: proton_ctypes has no such module -> ImportError


def install_ours() -> None:
    """Alias ``triton.profiler`` to ``proton_ctypes`` in this process (idempotent)."""
    if any(isinstance(f, AliasFinder) for f in sys.meta_path):
        return
    for name in [n for n in sys.modules if n == ALIAS or n.startswith(ALIAS + ".")]:
        if not getattr(sys.modules[name], "__name__", "").startswith(TARGET):
            raise RuntimeError(f"the real {name} was imported before the alias was installed")
    sys.meta_path.insert(0, AliasFinder())


# --- real Proton on a CPU-only machine: the recipe of tests/oracle/real_proton.py ---

def _load_oracle():
    path = os.path.join(os.path.dirname(HERE), "oracle", "real_proton.py")
    spec = importlib.util.spec_from_file_location("_proton_upstream_real_proton", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def install_real_on_cpu(stub_dir: str = None) -> None:
    """Run the oracle recipe: stub libcupti/libcuda (``stub_dir``, built when None), the sm_90
    fake driver, no metric kernels; then ``triton.profiler`` is the real one, host-only."""
    oracle = _load_oracle()
    if stub_dir:
        oracle._STUB_DIRS[os.path.abspath(os.path.join(oracle.HERE, "libcuda_stub.c"))] = stub_dir
    oracle.load()


# --- real Proton of a newer triton release on a GPU machine: bench/proton_overlay.py ---

def install_real_overlay() -> None:
    """``triton.profiler`` is the Proton of the overlay named by ``PROTON_BENCH_OVERLAY`` (the
    benches' helper, loaded by path), over the installed triton."""
    path = os.path.join(os.path.dirname(os.path.dirname(HERE)), "bench", "proton_overlay.py")
    spec = importlib.util.spec_from_file_location("_proton_upstream_overlay", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    mod.real_proton()


# --- triton 3.6 lacks triton.testing.cuda_graph_without_gc (used by test_profile.py) ---

@contextlib.contextmanager
def cuda_graph_without_gc(*args, **kwargs):
    """Capture ``torch.cuda.graph(*args, **kwargs)`` with Python's cyclic GC paused."""
    import torch
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        with torch.cuda.graph(*args, **kwargs):
            yield
    finally:
        if was_enabled:
            gc.enable()


def ensure_cuda_graph_without_gc() -> bool:
    """Add :func:`cuda_graph_without_gc` to ``triton.testing`` when missing; True if added."""
    import triton.testing
    if hasattr(triton.testing, "cuda_graph_without_gc"):
        return False
    triton.testing.cuda_graph_without_gc = cuda_graph_without_gc
    return True
