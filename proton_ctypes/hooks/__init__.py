"""Hooks called by Triton's runtime around kernel loads and launches."""
from .hook import Hook, HookManager
from .instrumentation import InstrumentationHook
from .launch import LaunchHook

__all__ = ["Hook", "HookManager", "InstrumentationHook", "LaunchHook"]
