"""Contexts: ``context.depth``, the shadow scope stack seen
from threads and from later sessions, and ``context="python"``.

A thread's stack in a session starts, at its first scope, as a copy of the current stack of
the thread that started the session.  Expected values are those real Proton 3.9 gives
(``conformance/scenarios/context.py``).
"""
import asyncio
import gc
import sys
import threading
import weakref

import pytest

import proton_ctypes as proton
from conftest import find, read_tree, written


# --- context.depth --------------------------------------------------------------------------

def test_depth_counts_the_open_scopes_of_the_session():
    s = proton.start("dp", backend="host")
    got = [proton.context.depth(s)]
    with proton.scope("a"):
        with proton.scope("b"):
            got.append(proton.context.depth(s))
    got.append(proton.context.depth(s))
    assert got == [0, 2, 0]


def test_depth_does_not_count_states():
    s = proton.start("dp", backend="host")
    with proton.scope("a"):
        with proton.state("st"):
            assert proton.context.depth(s) == 1


def test_depth_is_none_while_profiling_is_off():
    assert proton.context.depth() is None
    proton.start("dp", backend="host")
    proton.finalize()
    assert proton.context.depth() is None


def test_depth_of_an_unknown_session_raises_index_error():
    proton.start("dp", backend="host")
    with pytest.raises(IndexError) as e:
        proton.context.depth(99)
    assert str(e.value) == "[PROTON] Session has not been initialized: 99"


def test_depth_of_a_python_context_session_is_the_depth_of_the_python_stack():
    # as Proton: every frame of the calling thread, depth's own included; scopes and states do not count
    def frames():
        f, n = sys._getframe(1), 0
        while f is not None:
            n += 1
            f = f.f_back
        return n
    s = proton.start("py", backend="host", context="python")
    here = frames()
    with proton.scope("a"), proton.state("st"):
        assert proton.context.depth(s) == here + 1
    assert (lambda: proton.context.depth(s))() == here + 2


def test_depth_in_a_new_thread_is_the_inherited_depth():
    s = proton.start("dp", backend="host")
    got = []
    with proton.scope("a"):
        with proton.scope("b"):
            t = threading.Thread(target=lambda: got.append(proton.context.depth(s)))
            t.start()
            t.join()
    assert got == [2]


# --- the shadow stack across threads ---------------------------------------------------------

def test_threads_record_under_the_scope_open_in_the_starting_thread():
    proton.start("th", backend="host")

    def work(i):
        with proton.scope(f"t{i}"):
            with proton.scope("inner", {"n": 1}):
                pass
    with proton.scope("outer"):
        ts = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    proton.finalize()
    expected = {"outer": {}}
    for i in range(8):
        expected |= {f"outer/t{i}": {}, f"outer/t{i}/inner": {"n": 1}}
    assert written("th") == expected


def test_a_thread_copies_the_starting_threads_stack_at_its_first_scope_not_at_its_creation():
    proton.start("cf", backend="host")
    ev1, ev2 = threading.Event(), threading.Event()

    def work():
        ev1.wait()
        with proton.scope("t"):
            pass
        ev2.set()
    t = threading.Thread(target=work)
    t.start()
    with proton.scope("m"):
        pass
    with proton.scope("n"):
        ev1.set()
        ev2.wait()
    t.join()
    proton.finalize()
    assert written("cf") == {"m": {}, "n": {}, "n/t": {}}


def test_the_starting_thread_of_a_session_is_the_one_that_called_start():
    ev1, ev2 = threading.Event(), threading.Event()

    def starter():
        proton.start("sth", backend="host")
        with proton.scope("A"):
            ev1.set()
            ev2.wait()
    t = threading.Thread(target=starter)
    t.start()
    ev1.wait()
    with proton.scope("m"):
        pass
    ev2.set()
    t.join()
    proton.finalize()
    assert written("sth") == {"A": {}, "A/m": {}}


# --- the shadow stack across sessions --------------------------------------------------------

def test_a_session_started_inside_a_scope_does_not_see_that_scope():
    proton.start("o1", backend="host")
    with proton.scope("a"):
        proton.start("o2", backend="host")
        with proton.scope("b"):
            pass
    proton.finalize()
    assert written("o1") == {"a": {}, "a/b": {}}
    assert written("o2") == {"b": {}}


def test_exiting_a_scope_opened_before_a_later_session_started_closes_it_quietly():
    # a deliberate difference (README): Proton raises RuntimeError("[PROTON] Context stack is empty") and keeps "a" open in o1
    proton.start("o1", backend="host")
    with proton.scope("a"):
        proton.start("o2", backend="host")
    with proton.scope("c"):
        pass
    proton.finalize()
    assert written("o1") == {"a": {}, "c": {}}
    assert written("o2") == {"c": {}}


# --- context="python" -----------------------------------------------------------------------

def _chain(root):
    """Names from ROOT down its first children, and the deepest node."""
    names, node = [], root
    while node["children"]:
        node = node["children"][0]
        names.append(node["frame"]["name"])
    return names, node


def test_python_context_nodes_are_the_call_stack_frames_named_file_line_at_function():
    proton.start("py", backend="host", context="python")

    def inner():
        with proton.scope("x", {"m": 1}):
            pass

    def outer():
        inner()
    for _ in range(2):
        outer()
    proton.finalize()
    root, _ = read_tree("py.hatchet")
    names, deepest = _chain(root)
    user = [n for n in names if n.startswith(__file__ + ":")]
    assert [n.rsplit("@", 1)[1] for n in user] == [
        "test_python_context_nodes_are_the_call_stack_frames_named_file_line_at_function", "outer", "inner"]
    assert all(n.split(":", 1)[1].split("@")[0].isdigit() for n in user)
    assert "x" not in names  # scope names are not nodes
    assert deepest["metrics"] == {"m": 2} and deepest["frame"]["type"] == "function"


def _own_frames_below(node, user_function):
    """The functions of the profiler's own frames on the path from the frame of
    ``user_function`` down to the node holding the metric ``m`` (the only one)."""
    def path_to_metric(n, path):
        if "m" in n["metrics"]:
            return path
        for c in n["children"]:
            found = path_to_metric(c, path + [c["frame"]["name"]])
            if found is not None:
                return found
        return None
    path = path_to_metric(node, [])
    user = max(i for i, name in enumerate(path) if name.endswith("@" + user_function))
    return [name.rsplit("@", 1)[1] for name in path[user + 1:]]


@pytest.mark.parametrize("form, own", [
    ("with scope", ["__enter__", "_enter_scope"]),
    ("scope decorator", ["wrapper", "_enter_scope"]),
    ("with cpu_timed_scope", ["__enter__", "_enter_scope", "_enter_scope"]),
    ("cpu_timed_scope decorator", ["wrapper", "_enter_scope", "_enter_scope"]),
    ("enter_scope", ["enter_scope"]),
])
def test_python_context_path_ends_in_the_profilers_own_frames_as_protons_does(form, own):
    # Proton 3.9 (conformance oracle): scope.__enter__ -> _enter_scope; a decorator's wrapper ->
    # _enter_scope; cpu_timed_scope._enter_scope -> scope._enter_scope; enter_scope alone
    proton.start("own", backend="host", context="python")

    def user():
        if form == "with scope":
            with proton.scope("x", {"m": 1}):
                pass
        elif form == "with cpu_timed_scope":
            with proton.cpu_timed_scope("x", {"m": 1}):
                pass
        elif form == "enter_scope":
            proton.enter_scope("x", metrics={"m": 1})
            proton.exit_scope()
        else:
            kind = proton.scope if form == "scope decorator" else proton.cpu_timed_scope
            kind("x", {"m": 1})(lambda: None)()
    user()
    proton.finalize()
    root, _ = read_tree("own.hatchet")
    assert _own_frames_below(root, "user") == own


def test_python_context_files_each_call_site_under_its_own_line():
    proton.start("py2", backend="host", context="python")

    def leaf():
        with proton.scope("x", {"m": 1}):
            pass

    def caller():
        leaf()
        leaf()
    caller()
    proton.finalize()
    root, _ = read_tree("py2.hatchet")
    names, _ = _chain(root)
    here = "@test_python_context_files_each_call_site_under_its_own_line"
    me = names.index(next(n for n in names if n.endswith(here)))
    sites = [c["frame"]["name"] for c in find(root, *names[:me + 1])["children"]]
    assert len(sites) == 2 and len(set(sites)) == 2 and all(n.endswith("@caller") for n in sites)


def test_python_context_keeps_no_frame_alive_after_it_returned():
    """The walk's memory of frames holds only frames still on the stack: a returned function's
    locals (a tensor, say) are freed once the thread records its next context."""
    proton.start("py3", backend="host", context="python")

    class Payload:
        pass
    freed = []

    def work():
        payload = Payload()
        freed.append(weakref.ref(payload))
        with proton.scope("inside"):
            pass
    work()
    with proton.scope("after"):
        pass
    gc.collect()
    assert freed[0]() is None
    proton.finalize()


def test_python_context_files_a_generator_under_the_caller_that_resumed_it():
    """A generator's frame changes parent each time it is resumed: its records go under the
    caller of that resumption, as Proton walks the stack anew at every record."""
    proton.start("py4", backend="host", context="python")

    def steps():
        while True:
            with proton.scope("x", {"m": 1}):
                pass
            yield

    gen = steps()

    def first():
        next(gen)

    def second():
        next(gen)
    for caller in (first, second, second):
        caller()
    proton.finalize()
    root, _ = read_tree("py4.hatchet")
    names, _ = _chain(root)
    here = "@test_python_context_files_a_generator_under_the_caller_that_resumed_it"
    me = find(root, *names[:names.index(next(n for n in names if n.endswith(here))) + 1])
    callers = {c["frame"]["name"].rsplit("@", 1)[1]: c for c in me["children"]}
    assert set(callers) == {"first", "second"}
    for name, want in (("first", 1), ("second", 2)):
        (gen_node,) = callers[name]["children"]
        assert gen_node["frame"]["name"].endswith("@steps")
        assert _metrics_below(gen_node) == {"m": want}


def test_python_context_files_a_coroutine_under_its_current_awaiter():
    proton.start("py5", backend="host", context="python")

    async def leaf():
        with proton.scope("x", {"m": 1}):
            pass

    async def a():
        await leaf()

    async def b():
        await leaf()

    async def main():
        for _ in range(2):
            await a()
            await b()
    asyncio.run(main())
    proton.finalize()
    root, _ = read_tree("py5.hatchet")
    # one node per line of main that awaits (a, then b), each holding one awaiter
    mains = [n for n in _walk(root) if n["frame"]["name"].startswith(__file__ + ":")
             and n["frame"]["name"].endswith("@main")]
    awaiters = [c for m in mains for c in m["children"]]
    assert sorted(c["frame"]["name"].rsplit("@", 1)[1] for c in awaiters) == ["a", "b"]
    for c in awaiters:
        (leaf_node,) = c["children"]
        assert leaf_node["frame"]["name"].endswith("@leaf") and _metrics_below(leaf_node) == {"m": 2}


def _walk(node):
    yield node
    for c in node["children"]:
        yield from _walk(c)


def _metrics_below(node):
    """The metrics of ``node``'s subtree, summed (the scope's own frame is the last one)."""
    out = {}
    for n in _walk(node):
        for k, v in n["metrics"].items():
            out[k] = out.get(k, 0) + v
    return out
