"""States: a per-thread label appended as the last frame of whatever is recorded.

``with proton.state("optimizer"):`` files kernels launched inside under
``<current scope path>/optimizer/<kernel>`` and puts a scope entered inside at
``<path>/<scope>/optimizer``.  A thread has a single state slot: the innermost state
wins and leaving any state clears the slot (the outer one is not restored), as in Proton.
Also as in Proton: entering or leaving a state while no session is active changes nothing,
and a successful ``finalize`` clears the slot of the thread that called it.
"""
from __future__ import annotations

from functools import wraps

from . import general_path, signatures
from .registry import G
from .threads import tls, thread_ctx
from .flags import flags
from ..tree import callpath

#: name of the state around launch-metadata evaluation and metric-kernel work
COMPUTE_METADATA_SCOPE_NAME = callpath.METADATA_FRAME
#: prefix of the per-kernel metadata state name (filed as two frames: see tree.callpath)
COMPUTE_METADATA_SCOPE_PREFIX = callpath.METADATA_PREFIX

_child = callpath.child
_flags = flags


def _set(name) -> None:
    """Set (None: clear) the calling thread's state.  ``state.__enter__``/``__exit__`` inline
    the fast path below (a call costs ~15 % of a state)."""
    try:
        ctx = tls.ctx
    except AttributeError:
        ctx = thread_ctx()
    v = ctx.view
    if v is not None:
        if name is None:
            node = v.top
        else:  # the node first: a name refused there leaves the state slot and the log as they were
            try:
                node = v.kids[name]
            except (KeyError, TypeError):  # TypeError: an unhashable name, refused by state_child
                node = general_path.state_child(v.top, name)
        ctx.state = name
        c = v.cursor
        if c is not None:
            log = v.log
            # the log entry (time_ns, code), or the last one's code rewritten: core/views.py
            if c.last is log and not c.words[c.i]:
                log[-1] = node
            else:
                log.append(v.now())
                log.append(node)
                if c.last is c:  # no buffer request or context change since the clock read
                    c.last = log
        elif v.logging:
            log = v.log
            # the log entry (time_ns, code): the contract is in core/views.py
            log.append(v.now())
            log.append(node)
        return
    _set_slow(ctx, name)


def _set_slow(ctx, name) -> None:
    """:func:`_set` for a thread without a fast-path view (several views, python context, ...).

    As in Proton, a state entered or left while no session is active changes nothing (a
    session activated later does not see it; one left stays set)."""
    if name is not None and type(name) is not str:  # refused even with no session, as in Proton
        raise signatures.state_name(name)
    if not G.active:
        return
    general_path.set_state(ctx, name)


class state:
    """A context manager and decorator that sets the thread's state while it is entered.

    Usage::

        with proton.state("optimizer"):
            step()

    Args:
        name: the frame name appended below the current scope path.
    """

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __enter__(self):
        # a thread's fast-path view exists only while profiling is on (threads.resync)
        try:
            ctx = tls.ctx
        except AttributeError:
            ctx = thread_ctx()
        v = ctx.view
        if v is not None:
            if v.logging:
                name = self.name
                # the node first: a name refused there leaves the state slot and the log as they were
                try:  # a subscript, not dict.get (~5 ns less); a miss (first use, a name not a str) is rare
                    node = v.kids[name]
                except (KeyError, TypeError):  # TypeError: an unhashable name, refused by state_child
                    node = general_path.state_child(v.top, name)
                ctx.state = name
                c = v.cursor
                log = v.log
                # the log entry (time_ns, code), or the last one's code rewritten: core/views.py
                if c is None:
                    log.append(v.now())
                    log.append(node)
                elif c.last is log and not c.words[c.i]:
                    log[-1] = node
                else:
                    log.append(v.now())
                    log.append(node)
                    if c.last is c:  # no buffer request or context change since the clock read
                        c.last = log
            else:
                if type(self.name) is not str:
                    raise signatures.state_name(self.name)
                ctx.state = self.name
        elif _flags.profiling_on:
            _set_slow(ctx, self.name)
        return self

    def __exit__(self, exc_type, exc_value, traceback) -> None:
        try:
            ctx = tls.ctx
        except AttributeError:
            ctx = thread_ctx()
        v = ctx.view
        if v is not None:
            ctx.state = None
            c = v.cursor
            if c is not None:
                log = v.log
                # the log entry (time_ns, code), or the last one's code rewritten: core/views.py
                if c.last is log and not c.words[c.i]:
                    log[-1] = v.top
                else:
                    log.append(v.now())
                    log.append(v.top)
                    if c.last is c:  # no buffer request or context change since the clock read
                        c.last = log
            elif v.logging:
                log = v.log
                # the log entry (time_ns, code): the contract is in core/views.py
                log.append(v.now())
                log.append(v.top)
        elif _flags.profiling_on:
            _set_slow(ctx, None)

    def __call__(self, func):
        @wraps(func)
        def wrapper(*args, **kwargs):
            if flags.profiling_on:
                _set(self.name)
            ret = func(*args, **kwargs)
            if flags.profiling_on:
                _set(None)
            return ret

        return wrapper


class metadata_state(state):
    """The state Proton uses around launch-metadata work; the viewer hides its nodes.

    Args:
        kernel_name: when given, the state is ``__proton_launch_metadata:<kernel_name>``.
    """

    def __init__(self, kernel_name=None) -> None:
        super().__init__(get_metadata_state_name(kernel_name))


def enter_state(name: str) -> None:
    """Set the thread's state to ``name`` (replacing any current state)."""
    if type(name) is not str:
        raise signatures.state_name(name)
    _set(name)


def exit_state() -> None:
    """Clear the thread's state (harmless when none is set)."""
    _set(None)


def get_metadata_state_name(kernel_name=None) -> str:
    """``__proton_launch_metadata`` or ``__proton_launch_metadata:<kernel_name>``."""
    if not kernel_name:
        return COMPUTE_METADATA_SCOPE_NAME
    return f"{COMPUTE_METADATA_SCOPE_PREFIX}{kernel_name}"
