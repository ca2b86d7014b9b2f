"""``LaunchHook`` (``hook="triton"``): launch metadata of Triton kernels as metrics.

For each launch whose kernel defines ``launch_metadata``, the returned dict's ``name``
names the kernel's node and every other numeric (or tensor) value becomes a metric of
that node (``flops*``/``bytes`` feed the viewer's roofline columns).  ``configure``
takes ``include``/``exclude`` regexes over the compiled kernel name; a launch that the
compiled name already rules out never evaluates its metadata.
"""
from __future__ import annotations

import re
from contextvars import ContextVar
from numbers import Number
from typing import Optional

from .. import recording
from ..events import thread_ctx
from ..metric import set_metric_kernels, transform_tensor_metrics
from ..state import metadata_state
from .hook import Hook

op_name = ContextVar("op_name", default=None)
id = ContextVar("id", default=None)  # noqa: A001 - Proton's name
enabled = ContextVar("enabled", default=False)
in_hook = ContextVar("in_hook", default=False)

_RESERVED = frozenset({"name", "function", "stream"})


class LaunchHook(Hook):
    """Process-wide singleton hook recording launch metadata (priority 100)."""

    priority = 100
    _reserved_metadata_keys = set(_RESERVED)
    _instance = None

    def __new__(cls, *args, **kwargs):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
            cls._instance._initialized = False
        return cls._instance

    def __init__(self):
        if getattr(self, "_initialized", False):
            return
        self.configure(include=None, exclude=None)
        self._initialized = True

    def configure(self, *, include: Optional[str] = None, exclude: Optional[str] = None) -> None:
        """Only record kernels whose name matches ``include`` and does not match ``exclude``.

        Both are regular expressions applied with ``re.match`` (anchored at the start).
        """
        self._include_re = re.compile(include) if include else None
        self._exclude_re = re.compile(exclude) if exclude else None

    def _matches_kernel_name(self, kernel_name) -> bool:
        if kernel_name is None:
            return True
        if self._include_re is not None and self._include_re.match(kernel_name) is None:
            return False
        if self._exclude_re is not None and self._exclude_re.match(kernel_name) is not None:
            return False
        return True

    @staticmethod
    def _is_supported_metric_value(value) -> bool:
        if value is None:
            return False
        return hasattr(value, "data_ptr") or isinstance(value, Number)

    @staticmethod
    def _extract_metrics(lazy_metadata: dict) -> dict:
        return {k: v for k, v in lazy_metadata.items()
                if k not in _RESERVED and LaunchHook._is_supported_metric_value(v)}

    def init_handle(self, module, function, name, metadata_group, hash) -> None:
        """Nothing to do when a kernel is loaded."""

    def activate(self) -> None:
        """Nothing to set up."""

    def deactivate(self) -> None:
        """Nothing to tear down."""

    def enter(self, metadata) -> None:
        """Evaluate the launch's metadata and open an op named after it."""
        if enabled.get() or in_hook.get():
            return
        enabled.set(True)
        in_hook.set(True)
        raw_name = metadata.data.get("name")
        if not self._matches_kernel_name(raw_name):
            enabled.set(False)
            in_hook.set(False)
            return
        with metadata_state(raw_name):
            lazy = metadata.get()
        kernel_name = lazy["name"]
        if not self._matches_kernel_name(kernel_name):
            enabled.set(False)
            in_hook.set(False)
            return
        fn_metrics = LaunchHook._extract_metrics(lazy)
        with metadata_state(raw_name):
            if fn_metrics:
                set_metric_kernels()
            scalar, tensor = transform_tensor_metrics(fn_metrics)
        sid = recording.next_id()
        ctx = thread_ctx()
        targets = recording.op_prepare(ctx, kernel_name)
        with metadata_state(raw_name):
            if scalar:
                recording.add_metrics(ctx, sid, targets, scalar)
            if tensor:
                from ..tensor_metrics import add_tensor_metrics
                add_tensor_metrics(ctx, sid, targets, tensor)
        recording.op_open(ctx, targets)
        id.set(sid)
        op_name.set(kernel_name)
        in_hook.set(False)

    def exit(self, metadata) -> None:
        """Close the op opened by :meth:`enter`."""
        if in_hook.get() or not enabled.get():
            return
        recording.op_exit(thread_ctx())
        enabled.set(False)
