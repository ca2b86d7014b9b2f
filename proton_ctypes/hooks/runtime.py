"""Wiring of HookManager's dispatchers into Triton's runtime hook points.

triton 3.6-3.9 expose ``knobs.runtime.kernel_load_end_hook``, ``launch_enter_hook``
and ``launch_exit_hook`` (3.9 adds ``kernel_unload_hook``); each is a chain with
``add``/``remove`` in recent versions or a plain settable attribute in older ones.
"""
from __future__ import annotations

_POINTS = (("kernel_load_end_hook", "init_handle"), ("kernel_unload_hook", "destroy_handle"),
           ("launch_enter_hook", "enter"), ("launch_exit_hook", "exit"))
_installed = set()


def _runtime_knobs():
    try:
        import triton.knobs as knobs
        return knobs.runtime
    except Exception:
        return None


def install(manager) -> None:
    """Add the manager's dispatchers to every hook point this triton has (idempotent)."""
    rt = _runtime_knobs()
    if rt is None:
        return
    for point, meth in _POINTS:
        if not hasattr(rt, point):
            continue
        fn = getattr(manager, meth)
        chain = getattr(rt, point)
        if hasattr(chain, "add"):
            chain.add(fn)
        elif point not in _installed:
            setattr(rt, point, fn)
        _installed.add(point)


def uninstall(manager) -> None:
    """Remove the dispatchers again."""
    if not _installed:
        return
    rt = _runtime_knobs()
    if rt is None:
        return
    for point, meth in _POINTS:
        if point not in _installed or not hasattr(rt, point):
            continue
        fn = getattr(manager, meth)
        chain = getattr(rt, point)
        if hasattr(chain, "remove"):
            try:
                chain.remove(fn)
            except (ValueError, KeyError):
                pass
        elif chain is fn:
            setattr(rt, point, None)
        _installed.discard(point)
