"""Wiring of hook callables into Triton's runtime hook points.

triton 3.6-3.9 expose ``knobs.runtime.kernel_load_end_hook``, ``launch_enter_hook``
and ``launch_exit_hook`` (3.9 adds ``kernel_unload_hook``); each is a chain with
``add``/``remove`` in recent versions or a plain settable attribute in older ones.

:func:`wire` keeps exactly one callable of ours per hook point: the one asked for last.
"""
from __future__ import annotations

#: hook point -> the HookManager method that dispatches it
POINTS = {"kernel_load_end_hook": "init_handle", "kernel_unload_hook": "destroy_handle",
          "launch_enter_hook": "enter", "launch_exit_hook": "exit"}
#: hook point -> the callable of ours installed there now
_installed: dict = {}


def _runtime_knobs():
    try:
        import triton.knobs as knobs  # lazy: triton is optional and slow to import
        return knobs.runtime
    except Exception:
        return None


def _remove(rt, point, fn) -> None:
    chain = getattr(rt, point)
    if hasattr(chain, "remove"):
        try:
            chain.remove(fn)
        except (ValueError, KeyError):
            pass
    elif chain is fn or chain == fn:
        setattr(rt, point, None)


def _add(rt, point, fn) -> None:
    chain = getattr(rt, point)
    if hasattr(chain, "add"):
        chain.add(fn)
    else:
        setattr(rt, point, fn)


def wire(targets: dict) -> None:
    """Install ``targets[point]`` at each hook point (None: ours removed from that point).

    Points this triton lacks are skipped; a point already holding the same callable is
    left alone, so calling this again with the same targets changes nothing.
    """
    if not _installed and not any(targets.values()):
        return  # nothing of ours to add or remove: don't import triton (host-only sessions never need it)
    rt = _runtime_knobs()
    if rt is None:
        return
    for point in POINTS:
        if not hasattr(rt, point):
            continue
        new, old = targets.get(point), _installed.get(point)
        if old is not None and old == new:
            continue
        if old is not None:
            _remove(rt, point, old)
            del _installed[point]
        if new is not None:
            _add(rt, point, new)
            _installed[point] = new


def installed(point: str):
    """The callable of ours now installed at ``point`` (None if none)."""
    return _installed.get(point)
