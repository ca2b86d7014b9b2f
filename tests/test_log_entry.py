"""The log entry ``(time_ns, code)`` (the contract in ``proton_ctypes/core/views.py``): the fast
paths (one plain view per thread: ``scopes``, ``states``, the launch hook) and the general
path (``core/general_path``, ``View.note``) write the same entries for the same events.

Each scenario runs twice in one session of the mock GPU backend (so the view logs): once as
it comes (the fast paths), once with the thread's fast-path view taken away, which sends
every event down the general path.  The codes each event appends are compared event by event.
"""
import pytest

import proton_ctypes as proton
from proton_ctypes.state import metadata_state
from proton_ctypes.core.threads import thread_ctx
from proton_ctypes.tree import callpath
from proton_ctypes.tree.codes import node_of

triton_compiler = pytest.importorskip("triton.compiler.compiler")


def _readable(code):
    path = "/".join(callpath.path(node_of(code)))
    return f"op:{path}" if code < 0 else path


def _run(events, general: bool):
    """``[(event name, [codes appended])]`` and the log's times, for ``events`` run in a fresh
    session; ``general``: with the fast-path view taken away."""
    proton.start("log", backend="mock", hook="triton")
    ctx = thread_ctx()
    with proton.scope("warm_up"):  # makes the thread's view
        pass
    view = ctx.views[0]
    assert ctx.view is view and view.logging
    if general:
        ctx.view = None  # stays None until the epoch moves: every event takes the general path
    written = []
    for name, event in events():
        before = len(view.log)
        event()
        new = view.log[before:]
        written.append((name, [_readable(c) for c in new[1::2]]))
    assert ctx.view is (None if general else view)
    times = view.log[0::2]
    proton.finalize()
    return written, times


def _scopes_and_states():
    a = proton.scope("a")
    st = proton.state("st")
    b = proton.scope("b", {"m": 1})
    c = proton.scope("c", {"tokens": 128, "flops": 2.5e9, "bytes (inc)": 4096})
    timed = proton.cpu_timed_scope("timed")
    md = metadata_state("k")
    return [
        ("enter a", a.__enter__),
        ("enter state st", st.__enter__),
        ("enter b with a metric under st", b.__enter__),
        ("exit b", lambda: b.__exit__(None, None, None)),
        ("enter state st again", st.__enter__),
        ("exit state", lambda: st.__exit__(None, None, None)),
        ("enter c with three metrics", c.__enter__),
        ("exit c", lambda: c.__exit__(None, None, None)),
        ("enter_scope d", lambda: proton.enter_scope("d")),
        ("enter_state e", lambda: proton.enter_state("e")),
        ("exit_state", proton.exit_state),
        ("exit_scope d with a metric", lambda: proton.exit_scope("d", metrics={"n": 2})),
        ("enter cpu_timed_scope", timed.__enter__),
        ("exit cpu_timed_scope", lambda: timed.__exit__(None, None, None)),
        ("enter metadata_state k", md.__enter__),
        ("exit metadata_state", lambda: md.__exit__(None, None, None)),
        ("exit a", lambda: a.__exit__(None, None, None)),
    ]


def _launch_op():
    from proton_ctypes.hooks import LaunchHook
    hook = LaunchHook()
    md = triton_compiler.LazyDict({"name": "k", "function": 0, "stream": 0})
    md.add(lambda: {"name": "k", "flops": 2}, ())
    a = proton.scope("a")
    return [
        ("enter a", a.__enter__),
        ("launch op k", lambda: hook.enter(md)),
        ("launch op k returns", lambda: hook.exit(md)),
        ("exit a", lambda: a.__exit__(None, None, None)),
    ]


def test_scopes_and_states_log_the_same_entries_on_the_fast_and_the_general_path():
    fast, fast_times = _run(_scopes_and_states, general=False)
    general, general_times = _run(_scopes_and_states, general=True)
    assert general == fast
    assert all(len(codes) >= 1 for _name, codes in fast)  # every event wrote its entry
    for times in (fast_times, general_times):
        assert times == sorted(times)


def test_a_launch_op_logs_the_same_entries_on_both_paths_but_one_no_kernel_can_fall_into():
    fast, _ = _run(_launch_op, general=False)
    general, _ = _run(_launch_op, general=True)
    fast_codes, general_codes = dict(fast), dict(general)
    assert fast_codes["launch op k"] == ["ROOT/a/__proton_launch_metadata/k", "op:ROOT/a/k"]
    # the general path clears the metadata state (logging the scope) before it opens the op;
    # only the hook's own bookkeeping runs between the two entries, no launch
    assert general_codes["launch op k"] == ["ROOT/a/__proton_launch_metadata/k", "ROOT/a", "op:ROOT/a/k"]
    for name in ("enter a", "launch op k returns", "exit a"):
        assert general_codes[name] == fast_codes[name]
