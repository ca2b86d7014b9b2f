"""Sessions: ``start``, ``activate``, ``deactivate``, ``finalize`` and the ``profile`` decorator."""
from __future__ import annotations

import functools
from typing import Optional, Union

from .core import knobs, manager, naming, optional, signatures
from .backends import select
from .flags import flags
from .hooks.hook import Hook, HookManager
from .hooks.instrumentation import InstrumentationHook
from .hooks.launch import LaunchHook
from .backends.mode_types import BaseMode

DEFAULT_PROFILE_NAME = "proton"


def _mode_str(backend: str, mode) -> str:
    if backend == "instrumentation":
        prefix = select.target_backend()
        prefix = prefix if isinstance(prefix, str) else "cuda"
        return f"{prefix}:{mode}" if mode else prefix
    return str(mode) if mode else ""


def start(
    name: Optional[str] = None,
    *,
    context: Optional[str] = "shadow",
    data: Optional[str] = "tree",
    backend: Optional[str] = None,
    mode: Optional[Union[str, BaseMode]] = None,
    hook: Optional[Union[str, Hook]] = None,
) -> Optional[int]:
    """Start a profiling session and return its id.

    Usage::

        session = proton.start("my_profile", hook="triton")
        run()
        proton.finalize()          # writes ./my_profile.hatchet

    Args:
        name: path of the output without extension (default ``"proton"``, relative to the
            working directory at finalize); a live session of the same name is reused.
        context: ``"shadow"`` (the scope stack) or ``"python"`` (the Python call stack).
        data: ``"tree"`` (aggregated call-path tree) or ``"trace"`` (timeline of events).
        backend: ``None`` (automatic), ``"cupti"``, ``"rocprofiler"``, ``"roctracer"``,
            ``"instrumentation"`` or ``"host"`` (no device: scopes, states and metrics only).
        mode: backend mode, a string such as ``"periodic_flushing:format=hatchet"`` or a
            :class:`~proton_ctypes.mode.BaseMode`.
        hook: ``"triton"`` for launch metadata of Triton kernels, or a :class:`Hook`.

    Returns:
        The session id, or None when running under the ``proton`` command or when
        profiling is disabled (``TRITON_PROTON_DISABLE=1``).

    Raises:
        TypeError: an argument of the wrong type (the message names it).
        ValueError: an unknown context, data, backend, mode or hook (Proton's messages).
        ImportError: ``hook="triton"`` or ``backend="instrumentation"`` without triton.
        RuntimeError: the backend cannot start (no GPU for a GPU backend, ...).
    Every argument is checked before the session is created: a ``start`` that raises
    leaves no session behind.
    """
    if flags.command_line or knobs.disabled():
        return None
    flags.profiling_on = True
    name = naming.default_name(DEFAULT_PROFILE_NAME) if name is None else name
    backend = select.auto_select() if backend is None else backend
    mode_str = _mode_str(backend, mode)
    select.check_environment(backend)
    signatures.check("start", ("name", name, str), ("context", context, str), ("data", data, str),
                     ("backend", backend, str), ("mode", mode_str, str))
    # every argument is checked before anything is created: a start that raises leaves no
    # session behind (Proton creates the session before it rejects the hook)
    manager.validate(name, context, data, backend, mode_str)
    if not (hook is None or hook == "triton" or isinstance(hook, Hook)):
        raise ValueError(f"Unsupported hook: {hook!r}")
    if hook == "triton" or backend == "instrumentation":
        optional.require("hook='triton'" if hook == "triton" else "backend='instrumentation'", "triton", "triton")
    hooks = [LaunchHook() if hook == "triton" else hook] if hook is not None else []
    if backend == "instrumentation":
        hooks.append(InstrumentationHook(mode))
    existed = manager.live_named(name) is not None
    session = manager.create(name, context, data, backend, mode_str)
    knobs.export_defaults(backend)
    registered = []
    try:
        for h in hooks:
            HookManager.register(h, session)
            registered.append(h)
    except BaseException:  # a hook that cannot activate: the new session goes too
        if not existed:
            HookManager.session_hooks[session] = {h: True for h in registered}
            HookManager.unregister(session)  # deactivates what did activate
            manager.discard(session)
        raise
    return session


def _cli_guard(session, verb: str) -> Optional[int]:
    if flags.command_line:
        if session is None:
            return 0  # proton_ctypes: no argument means the command's session (README, differences)
        if session != 0:
            raise ValueError(f"Only one session can be {verb} when running from the command line.")
    return session


def activate(session: Optional[int] = None) -> None:
    """Resume recording for ``session`` (all sessions when None).

    Raises:
        IndexError: unknown session id.
    """
    session = _cli_guard(session, "activated")
    if session is not None:
        signatures.check("activate", ("session", session, int))
    HookManager.activate(session)
    manager.set_active(session, True)


def deactivate(session: Optional[int] = None, flushing: bool = False) -> None:
    """Pause recording for ``session`` (all when None); its data stays in memory.

    Args:
        session: the session id, or None for every session.
        flushing: first bring pending device records into the session.
    """
    session = _cli_guard(session, "deactivated")
    if session is not None:
        signatures.check("deactivate", ("session", session, int), ("flushing", flushing, bool))
    HookManager.deactivate(session)
    manager.set_active(session, False, flushing)


def finalize(session: Optional[int] = None, output_format: Optional[str] = "") -> None:
    """Flush, write and close ``session`` (every session when None).

    Args:
        session: the session id, or None for all (which also turns profiling off).
        output_format: ``"hatchet"`` (default for tree data), ``"hatchet_msgpack"`` or
            ``"chrome_trace"`` (default for trace data), case-insensitive.

    The file is ``<name>.<format>`` (``<name>.part_<k>.<format>`` per phase after
    ``data.advance_phase``), written whole or not at all; missing folders of ``name`` are
    created.

    Raises:
        TypeError: an argument of the wrong type (the message names it).
        ValueError: an unknown output format, or one the session's data cannot be written in;
            the session stays alive.
        OSError: a file could not be written (permissions, a full disk); nothing of that
            session is lost: it stays alive, so ``finalize`` can be called again.
    """
    if session is not None:
        signatures.check("finalize", ("session", session, int))
    signatures.check("finalize", ("output_format", output_format, str))
    HookManager.unregister(session)
    if session is None:
        flags.profiling_on = False
        manager.finalize_all(output_format)
    else:
        if flags.command_line and session != 0:
            raise ValueError("Only one session can be finalized when running from the command line.")
        manager.finalize(session, output_format)


def _profiling(func, name=None, context="shadow", data="tree", backend=None, mode=None, hook=None):
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        session = start(name, context=context, data=data, backend=backend, mode=mode, hook=hook)
        ret = func(*args, **kwargs)
        deactivate(session)
        return ret

    return wrapper


def profile(func=None, *, name: Optional[str] = None, context: Optional[str] = "shadow",
            data: Optional[str] = "tree", backend: Optional[str] = None, mode: Optional[str] = None,
            hook: Optional[Union[str, Hook]] = None):
    """Decorator that starts a session around each call and deactivates it afterwards.

    Usage: ``@proton.profile`` or ``@proton.profile(name="run", hook="triton")``; call
    :func:`finalize` to write the file.  Arguments are those of :func:`start`.
    """
    if func is None:
        def decorator(f):
            return _profiling(f, name=name, context=context, data=data, backend=backend, mode=mode, hook=hook)

        return decorator
    return _profiling(func, name=name, context=context, data=data, backend=backend, mode=mode, hook=hook)
