"""``LaunchHook`` (``hook="triton"``): launch metadata of Triton kernels as metrics.

For each launch whose kernel defines ``launch_metadata``, the returned dict's ``name``
names the kernel's node and every other numeric (or tensor) value becomes a metric of
that node (``flops*``/``bytes`` feed the viewer's roofline columns).  ``configure``
takes ``include``/``exclude`` regexes over the compiled kernel name; a launch that the
compiled name already rules out never evaluates its metadata.
"""
from __future__ import annotations

import re
from numbers import Number
from typing import Optional


from ..core import general_path
from ..core.registry import G
from ..core.threads import resync, tls, thread_ctx
from ..tree import callpath
from ..tree.codes import op_code
from ..core.general_path import set_state as _set_state
from ..core.metric_values import transform_tensor_metrics
from ..core.tensor_metrics import ensure_kernels as set_metric_kernels
from ..core.tensor_metrics import add_tensor_metrics
from ..tree import metric_plans
from ..tree import metrics as tmetrics
from ..core.states import get_metadata_state_name as metadata_state_name
from .hook import Hook, HookManager


#: values of ``ThreadCtx.launch`` besides None (outside a launch) and the view of an op
#: opened by the fast path: the hook is evaluating metadata; an op of the general path is open
_IN_HOOK = ("in_hook",)
_OPEN = ("open",)
#: our device-metric kernel, which Proton launches from C++ (unhooked): never an op
KERNEL_NAME = "write_metric_record"

_RESERVED = frozenset({"name", "function", "stream"})


def _log_context(log, v) -> None:
    """Log ``v``'s scope context again (the metadata state is over, no op was opened)."""
    if log is not None:
        # the log entry (time_ns, code): the contract is in core/views.py
        log.append(v.now())
        log.append(v.top)


next_id = general_path.next_id


class LaunchVar:
    """One of Proton's launch context variables, read from the calling thread's launch state.

    Proton 3.9 keeps ``id``, ``op_name``, ``enabled`` and ``in_hook`` in ``ContextVar``s
    that its hook sets on every launch; here the hook records that state on the thread
    anyway, so these are read-only views of it (``get()`` as a ``ContextVar``'s), and a
    launch pays no ``ContextVar.set``.
    """

    __slots__ = ("name", "_read", "default")

    def __init__(self, name: str, read, default=None):
        self.name = name
        self._read = read
        #: the value of a thread that has not launched yet (``ContextVar(default=...)``)
        self.default = default

    def get(self, *default):
        """The thread's value; ``default`` (or the variable's own default) when it has none."""
        ctx = tls.__dict__.get("ctx")   # no AttributeError raised (and caught) on a thread without one
        value = None if ctx is None else self._read(ctx)
        if value is None:
            return default[0] if default else self.default
        return value

    def __repr__(self):
        return f"<LaunchVar name={self.name!r}>"


#: scope id of the thread's latest launch op (a fresh id per launch), None before any
id = LaunchVar("id", lambda ctx: ctx.op_id)  # noqa: A001 -- Proton's name
#: kernel name of the thread's latest launch op
op_name = LaunchVar("op_name", lambda ctx: ctx.op_name)
#: whether the thread is inside a launch the hook handles (from enter until exit)
enabled = LaunchVar("enabled", lambda ctx: ctx.launch is not None, False)
#: whether the thread is evaluating a launch's metadata
in_hook = LaunchVar("in_hook", lambda ctx: ctx.launch is _IN_HOOK, False)


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

    def init_handle(self, module, function, name, metadata_group, hash) -> None:
        """Nothing to do when a kernel is loaded."""

    def activate(self) -> None:
        """Nothing to set up."""

    def deactivate(self) -> None:
        """Nothing to tear down."""

    def enter(self, metadata) -> None:
        """Evaluate the launch's metadata and open an op named after it."""
        try:
            ctx = tls.ctx
        except AttributeError:
            ctx = thread_ctx()
        if ctx.launch is not None:
            if ctx.launch is _IN_HOOK or len(HookManager.active_hooks) > 1:
                return  # launched by launch_metadata, or by another hook inside this launch
            # an op still open while this hook is the only one: the last launch raised
            # before Triton called the exit hook (no Python runs between a launch's two
            # hooks); close it, or every later launch of this thread would be lost, as it
            # is in Proton
            self.exit(metadata)
        raw_name = metadata.data.get("name")
        seen = self._seen.get(raw_name)
        if seen is None:
            seen = self._seen[raw_name] = (raw_name != KERNEL_NAME and self._matches_kernel_name(raw_name),
                                           metadata_state_name(raw_name))
        if not seen[0]:
            return  # ruled out by name, or our own device-metric kernel (Proton's are unhooked)
        if ctx.epoch != G.epoch:
            resync(ctx)
        v = ctx.view
        if v is None or ctx.state is not None:
            self._enter_general(ctx, metadata, raw_name, seen[1])
            return
        # Fast path: one plain view (one session group, no python context).
        # Proton evaluates the metadata inside metadata_state(name): kernels launched by
        # launch_metadata land under that state node.
        md_state = seen[1]
        kids = v.kids
        md_node = kids.get(md_state)
        if md_node is None:
            md_node = v.context_node(md_state)
        log = v.log if v.logging else None
        ctx.launch = _IN_HOOK
        ctx.state = md_state
        if log is not None:
            # the log entry (time_ns, code): the contract is in core/views.py
            log.append(v.now())
            log.append(md_node)
        try:
            lazy = metadata.get()
        except BaseException:
            ctx.state = ctx.launch = None
            _log_context(log, v)
            raise
        ctx.state = ctx.launch = None
        kernel_name = lazy["name"]
        # ``metadata.data`` now holds the evaluated dict: compare with the compiled name
        if kernel_name != raw_name and not self._matches_kernel_name(kernel_name):
            _log_context(log, v)
            return
        node = kids.get(kernel_name)
        if node is None:
            node = callpath.child(v.top, kernel_name)
        plan = v.plans.get(node)
        if plan is not None and plan.fits(lazy):
            plan.apply(v.flexes, node, lazy)
        else:
            try:
                planned = self._add_unplanned(v, node, lazy)
            except BaseException:
                _log_context(log, v)  # a type mismatch: no op opened, the scope is the context again
                raise
            if not planned:
                _log_context(log, v)  # a tensor or another number type: the general path
                self._enter_general(ctx, metadata, raw_name, md_state)
                return
        if log is not None:
            # the log entry (time_ns, code): the contract is in core/views.py
            log.append(v.now())
            log.append(op_code(node))
        ctx.op_id = next_id()
        ctx.op_name = kernel_name
        ctx.launch = v

    @staticmethod
    def _add_unplanned(v, node, lazy) -> bool:
        """Add ``lazy``'s plain metrics to ``node`` in ``v``'s flexes and plan the next launch.

        Returns False, having added nothing, if a metric value is not an ``int``/``float``."""
        plain = {}
        for k, val in lazy.items():
            t = type(val)
            if t is int or t is float:
                if k not in _RESERVED:
                    plain[k] = val
            elif val is not None and k not in _RESERVED and LaunchHook._is_supported_metric_value(val):
                return False
        if node not in v.created:
            v.created[node] = v.now()
        if plain:
            tmetrics.add(v.flexes, node, plain)
        v.plans[node] = metric_plans.plan(v.flexes, node, lazy, _RESERVED)
        return True

    def _enter_general(self, ctx, metadata, raw_name, md_state) -> None:
        """Every other case: several views, states, tensors, python context."""
        ctx.launch = _IN_HOOK
        try:
            _set_state(ctx, md_state)
            try:
                lazy = metadata.get()
                kernel_name = lazy["name"]
                if kernel_name != raw_name and not self._matches_kernel_name(kernel_name):
                    ctx.launch = None
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
            sid = general_path.next_id()
            targets = general_path.op_prepare(ctx, kernel_name)
            if plain:
                general_path.add_op_metrics(targets, plain)
            if tensor:
                _set_state(ctx, md_state)
                try:
                    add_tensor_metrics(ctx, sid, targets, tensor)
                finally:
                    _set_state(ctx, None)
            general_path.op_open(ctx, targets)
            ctx.op_id = sid
            ctx.op_name = kernel_name
            ctx.launch = _OPEN
        except BaseException:
            ctx.launch = None
            raise

    def exit(self, metadata) -> None:
        """Close the op opened by :meth:`enter`."""
        try:
            ctx = tls.ctx
        except AttributeError:
            return
        op = ctx.launch
        if op is None or op is _IN_HOOK:
            return
        ctx.launch = None
        if op is ctx.view and ctx.epoch == G.epoch:
            if op.logging:
                log = op.log
                # the log entry (time_ns, code): the contract is in core/views.py
                log.append(op.now())
                log.append(op.top)
        else:
            general_path.op_exit(ctx)

