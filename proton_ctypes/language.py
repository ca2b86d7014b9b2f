"""``proton.language``: device-side scopes and events inside ``@gluon.jit`` / ``@triton.jit`` code.

Usage::

    import proton_ctypes.language as pl

    @gluon.jit
    def kernel(...):
        pl.enter_scope("load")
        ...
        pl.exit_scope("load")
        with pl.scope("compute"):
            ...
        e = pl.allocate_event("tma")      # triton >= 3.7
        pl.start_event(e)
        ...
        pl.end_event(e)                   # may run in another warp

Each call emits a ``proton.record`` (or ``proton.allocate_event`` / ``proton.event``)
operation through Triton's own builders, and only while proton_ctypes' instrumentation
backend is active (``proton_ctypes.flags.flags.instrumentation_on``); otherwise the
calls compile to nothing, so instrumented kernels run unchanged without profiling.

As in Proton, only the Gluon semantic is enabled by default (Triton's higher-level IR
is rewritten too aggressively for scopes to stay meaningful); :func:`enable_semantic`
(``"triton"``) lifts that.  A call from an unsupported semantic raises
``TypeError("Unsupported semantic type: ...")``.
"""
from __future__ import annotations

from .core.optional import require
require("proton_ctypes.language", "triton", "triton")  # before the triton imports below: names what to install

from triton.language import core as tl  # noqa: E402
from triton.language.core import builtin  # noqa: E402

from .flags import flags  # noqa: E402


def _semantics():
    out = {}
    try:
        from triton.language.semantic import TritonSemantic  # lazy: triton is optional
        out["triton"] = TritonSemantic
    except ImportError:  # pragma: no cover - very old triton
        pass
    try:
        from triton.experimental.gluon.language._semantic import GluonSemantic  # lazy: triton is optional
        out["gluon"] = GluonSemantic
    except ImportError:  # pragma: no cover
        pass
    return out


_ALL_SEMANTICS = _semantics()
_SEMANTICS = {_ALL_SEMANTICS["gluon"]} if "gluon" in _ALL_SEMANTICS else set()


def _proton_ops():
    from triton._C.libtriton import proton as triton_proton  # lazy: triton is optional
    return triton_proton


def _check_supported_semantic(semantic) -> None:
    if not isinstance(semantic, tuple(_SEMANTICS)):
        raise TypeError(f"Unsupported semantic type: {type(semantic)}. "
                        f"Supported semantics are: {_SEMANTICS}")


def enable_semantic(semantic_name: str) -> None:
    """Allow scopes in kernels of ``semantic_name`` (``"triton"`` or ``"gluon"``)."""
    _SEMANTICS.add(_ALL_SEMANTICS[semantic_name])


def disable_semantic(semantic_name: str) -> None:
    """Disallow scopes in kernels of ``semantic_name``."""
    _SEMANTICS.remove(_ALL_SEMANTICS[semantic_name])


class _EventType(tl.base_type):
    """Front-end type of an event handle: an i32 in the IR, opaque to the kernel code."""

    def _unflatten_ir(self, handles, cursor):
        return Event(handles[cursor]), cursor + 1

    def _flatten_ir_types(self, builder, out):
        tl.int32._flatten_ir_types(builder, out)

    def __eq__(self, other):
        return isinstance(other, _EventType)

    def __hash__(self):
        return hash(_EventType)

    def mangle(self):
        return "PEvent"

    def __str__(self):
        return "proton.event"


_EVENT_TYPE = _EventType()


class Event(tl.base_value):
    """What :func:`allocate_event` returns; only :func:`start_event` / :func:`end_event` take it."""

    def __init__(self, handle):
        self.handle = handle
        self.type = _EVENT_TYPE

    def _flatten_ir(self, handles):
        handles.append(self.handle)

    def _set_name(self, builder, name):
        self.handle.set_loc(builder.create_name_loc(name, self.handle.get_loc()))


def record(is_start: tl.constexpr, scope_name: tl.constexpr, semantic):
    """Emit the start or end record of scope ``scope_name`` (nothing when not instrumenting)."""
    if not flags.instrumentation_on:
        return
    _check_supported_semantic(semantic)
    is_start = tl._unwrap_if_constexpr(is_start)
    scope_name = tl._unwrap_if_constexpr(scope_name)
    _proton_ops().create_proton_record(semantic.builder, is_start, scope_name)


@builtin
def enter_scope(name: tl.constexpr, _semantic=None):
    """Start scope ``name`` (a compile-time string) in every warp reaching this point."""
    record(is_start=True, scope_name=name, semantic=_semantic)


@builtin
def exit_scope(name: tl.constexpr, _semantic=None):
    """End scope ``name``."""
    record(is_start=False, scope_name=name, semantic=_semantic)


def _event_ops(what: str):
    ops = _proton_ops()
    fn = getattr(ops, what, None)
    if fn is None:
        import triton  # lazy: triton is optional
        raise RuntimeError(f"proton.language events need triton >= 3.7: this triton ({triton.__version__}) has no "
                           f"triton._C.libtriton.proton.{what}")
    return fn


@builtin
def allocate_event(name: tl.constexpr, _semantic=None):
    """A new async event named ``name``; its start and end may be recorded by different warps."""
    if not flags.instrumentation_on:
        return Event(handle=None)
    _check_supported_semantic(_semantic)
    name = tl._unwrap_if_constexpr(name)
    return Event(_event_ops("create_proton_allocate_event")(_semantic.builder, name))


def record_event(event, is_start: tl.constexpr, _semantic=None):
    """Emit the start or end record of ``event``."""
    if not flags.instrumentation_on:
        return
    _check_supported_semantic(_semantic)
    if not isinstance(event, Event):
        raise TypeError("expected an event returned by allocate_event")
    is_start = tl._unwrap_if_constexpr(is_start)
    _event_ops("create_proton_event")(_semantic.builder, is_start, event.handle)


@builtin
def start_event(event, _semantic=None):
    """Record the start of ``event``."""
    record_event(event, is_start=True, _semantic=_semantic)


@builtin
def end_event(event, _semantic=None):
    """Record the end of ``event``."""
    record_event(event, is_start=False, _semantic=_semantic)


class scope:
    """``with pl.scope("name"):`` inside a kernel: enter on entry, exit on exit."""

    def __init__(self, name: str, _semantic=None):
        self.name = name
        self.semantic = _semantic

    def __enter__(self):
        enter_scope(self.name, _semantic=self.semantic)

    def __exit__(self, exc_type, exc_value, traceback):
        exit_scope(self.name, _semantic=self.semantic)
