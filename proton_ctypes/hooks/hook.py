"""The ``Hook`` interface and ``HookManager``, which dispatches Triton's runtime hooks.

``HookManager`` keeps the active hooks sorted by priority (highest first) and, per
session, which hooks that session holds.  ``init_handle``/``enter`` call hooks in that
order, ``destroy_handle``/``exit`` in reverse (first in, last out).  Its dispatchers are
in Triton's hook chains while any hook is active, and are kept in step with every change
(Proton adds them at ``register`` only, so a session re-activated after all hooks went
inactive is left without them).

One deliberate shortcut: while exactly one hook is active, that hook's own ``enter`` and
``exit`` sit in Triton's launch chains instead of the dispatchers, which saves a Python
call per launch and calls the same code.
"""
from __future__ import annotations

import os
from abc import abstractmethod
from collections import defaultdict
from typing import Any, Dict, Optional

from . import runtime


class Hook:
    """Base class of profiler hooks; subclasses implement the runtime callbacks."""

    priority: int = 0

    @abstractmethod
    def init_handle(self, module: Any, function: Any, name: str, metadata_group: Dict[str, str], hash: str) -> None:
        """Called after a kernel is loaded onto the device."""
        raise NotImplementedError

    def destroy_handle(self, module: Any, function: Any, name: str, metadata_group: Dict[str, str], hash: str) -> None:
        """Called when a kernel is unloaded (triton >= 3.9); nothing by default."""

    @abstractmethod
    def enter(self, metadata) -> None:
        """Called right before a kernel launch with the launch's lazy metadata."""
        raise NotImplementedError

    @abstractmethod
    def exit(self, metadata) -> None:
        """Called right after a kernel launch."""
        raise NotImplementedError

    @abstractmethod
    def activate(self) -> None:
        """Called when the hook becomes active in some session."""
        raise NotImplementedError

    @abstractmethod
    def deactivate(self) -> None:
        """Called when no session keeps the hook active any more."""
        raise NotImplementedError


class HookManager:
    """Process-wide registry of hooks per session (all static)."""

    active_hooks: list = []
    session_hooks: Dict[int, Dict[Hook, bool]] = defaultdict(lambda: defaultdict(bool))

    @staticmethod
    def init_handle(module, function, name, metadata_group, hash) -> None:
        """Dispatch a kernel load to every active hook, by priority."""
        for hook in HookManager.active_hooks:
            hook.init_handle(module, function, name, metadata_group, hash)

    @staticmethod
    def destroy_handle(module, function, name, metadata_group, hash) -> None:
        """Dispatch a kernel unload, in reverse priority order."""
        for hook in reversed(HookManager.active_hooks):
            hook.destroy_handle(module, function, name, metadata_group, hash)

    @staticmethod
    def enter(metadata) -> None:
        """Dispatch a launch enter, by priority."""
        for hook in HookManager.active_hooks:
            hook.enter(metadata)

    @staticmethod
    def exit(metadata) -> None:
        """Dispatch a launch exit, in reverse priority order."""
        for hook in reversed(HookManager.active_hooks):
            hook.exit(metadata)

    @staticmethod
    def _sort() -> None:
        HookManager.active_hooks.sort(key=lambda h: h.priority, reverse=True)

    @staticmethod
    def _rewire() -> None:
        """Put what the active hooks need into Triton's hook chains (see the module doc)."""
        active = HookManager.active_hooks
        if not active:
            runtime.wire({})
            return
        targets = {point: getattr(HookManager, meth) for point, meth in runtime.POINTS.items()}
        if len(active) == 1:
            targets["launch_enter_hook"] = active[0].enter
            targets["launch_exit_hook"] = active[0].exit
        runtime.wire(targets)

    @staticmethod
    def activate(session: Optional[int] = None) -> None:
        """Mark the hooks of ``session`` (all sessions when None) active."""
        sessions = list(HookManager.session_hooks.keys()) if session is None else [session]
        for s in sessions:
            for hook in HookManager.session_hooks[s]:
                if hook not in HookManager.active_hooks:
                    hook.activate()
                    HookManager.active_hooks.append(hook)
                HookManager.session_hooks[s][hook] = True
        HookManager._sort()
        HookManager._rewire()

    @staticmethod
    def deactivate(session: Optional[int] = None) -> None:
        """Mark the hooks of ``session`` inactive; deactivate hooks no session holds."""
        sessions = list(HookManager.session_hooks.keys()) if session is None else [session]
        off = set()
        for s in sessions:
            for hook in HookManager.session_hooks[s]:
                if hook in HookManager.active_hooks:
                    off.add(hook)
                HookManager.session_hooks[s][hook] = False
        for hook in off:
            if not any(h[hook] for h in HookManager.session_hooks.values()):
                hook.deactivate()
                HookManager.active_hooks.remove(hook)
        HookManager._rewire()

    @staticmethod
    def register(hook: Hook, session: int) -> None:
        """Give ``hook`` to ``session`` and install the dispatchers in Triton's runtime."""
        HookManager.session_hooks[session][hook] = True
        if hook not in HookManager.active_hooks:
            hook.activate()
            HookManager.active_hooks.append(hook)
        HookManager._sort()
        HookManager._rewire()

    @staticmethod
    def unregister(session: Optional[int] = None) -> None:
        """Forget ``session``'s hooks (all with None); uninstall when none remain active."""
        if session is not None and session not in HookManager.session_hooks:
            return
        if session is None:
            for hook in HookManager.active_hooks:
                hook.deactivate()
            HookManager.active_hooks.clear()
            HookManager.session_hooks.clear()
        else:
            popped = HookManager.session_hooks.pop(session)
            for hook, on in popped.items():
                if not on:
                    continue
                if not any(h[hook] for h in HookManager.session_hooks.values()):
                    hook.deactivate()
                    HookManager.active_hooks.remove(hook)
        HookManager._rewire()


def _forget_after_fork() -> None:
    """The child of a fork holds no session (see core.manager), so no hook either."""
    HookManager.active_hooks.clear()
    HookManager.session_hooks.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)
