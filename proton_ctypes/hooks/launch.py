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
from ..recording import set_state as _set_state
from ..metric import set_metric_kernels, transform_tensor_metrics
from ..tree.metrics import add_plain
from ..state import get_metadata_state_name as metadata_state_name
from .hook import Hook

#: None outside a launch; _IN_HOOK while the hook evaluates metadata; (op id, name) during the launch
_busy = ContextVar("proton_ctypes_launch", default=None)
_IN_HOOK = ("in_hook",)

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
        #: compiled kernel name -> passes the filters (cleared by configure)
        self._seen = {}

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
        if _busy.get() is not None:
            return  # a launch inside launch_metadata, or a nested launch
        raw_name = metadata.data.get("name")
        if raw_name == "write_metric_record":
            return  # our device-metric kernel (Proton launches its own from C++, unhooked)
        if raw_name is not None:
            ok = self._seen.get(raw_name)
            if ok is None:
                ok = self._seen[raw_name] = self._matches_kernel_name(raw_name)
            if not ok:
                return
        token = _busy.set(_IN_HOOK)
        try:
            ctx = thread_ctx()
            # Proton evaluates the metadata (and prepares metric kernels) inside
            # metadata_state(raw_name): helper kernels land under that node, and the
            # state slot is empty afterwards.
            md_state = metadata_state_name(raw_name)
            _set_state(ctx, md_state)
            try:
                lazy = metadata.get()
                kernel_name = lazy["name"]
                if kernel_name != raw_name and not self._matches_kernel_name(kernel_name):
                    _busy.reset(token)
                    return
                plain = {}
                other = None
                for k, v in lazy.items():
                    if k in _RESERVED or v is None:
                        continue
                    t = type(v)
                    if t is int or t is float:
                        plain[k] = v
                    elif hasattr(v, "data_ptr") or isinstance(v, Number):
                        if other is None:
                            other = {}
                        other[k] = v
                tensor = None
                if other:
                    scalar, tensor = transform_tensor_metrics(other)
                    plain.update(scalar)
                    if tensor:
                        set_metric_kernels()
            finally:
                _set_state(ctx, None)
            sid = recording.next_id()
            targets = recording.op_prepare(ctx, kernel_name)
            if plain:
                if other is None and ctx.view is not None and len(targets) == 1:
                    # one view, plain numbers: straight into its sessions' metric dicts
                    view, node = targets[0]
                    for flex in view.flexes:
                        add_plain(flex, node, plain)
                else:
                    recording.add_metrics(ctx, sid, targets, plain)
            if tensor:
                from ..tensor_metrics import add_tensor_metrics
                _set_state(ctx, md_state)
                try:
                    add_tensor_metrics(ctx, sid, targets, tensor)
                finally:
                    _set_state(ctx, None)
            recording.op_open(ctx, targets)
            _busy.set((sid, kernel_name))
        except BaseException:
            _busy.reset(token)
            raise

    def exit(self, metadata) -> None:
        """Close the op opened by :meth:`enter`."""
        cur = _busy.get()
        if cur is None or cur is _IN_HOOK:
            return
        recording.op_exit(thread_ctx())
        _busy.set(None)
