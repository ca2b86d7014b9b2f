"""Scopes, as ``triton.profiler.scope``: ``scope``, ``cpu_timed_scope``, ``enter_scope``,
``exit_scope``.  The fast paths live in :mod:`.core.scopes`; these are the same objects."""
from .core.scopes import cpu_timed_scope, enter_scope, exit_scope, scope

__all__ = ["scope", "cpu_timed_scope", "enter_scope", "exit_scope"]
