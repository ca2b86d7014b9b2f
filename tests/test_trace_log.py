"""The trace log of ``data="trace"`` sessions (``proton_ctypes/core/trace_scopes.py``): scopes on
the fast path (one view per thread: ``core/scopes.py``, ``core/scope_events.py``) only log their
entry and exit, and the records are made at flush; they must give the files the general path
(``core/general_path.py``) gives.

Random programs (sessions of both kinds, periodic flushing, scopes of every kind with metrics,
states, kernels, launch ops, activate/deactivate, phases, threads, finalizes) run twice in-process:
once as they come, once with every thread's fast-path view taken away (``threads.fast_view``
answers None), which sends every event down the general path.  Both runs must observe the same values and errors and
write the same files (times and scope ids aside: those of the second run are later).
"""
import json
import os
import tempfile

import pytest

hypothesis = pytest.importorskip("hypothesis", reason="the random-program tests need hypothesis (the [test] extra)")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import proton_ctypes as proton  # noqa: E402
from conformance.normalize import load_output  # noqa: E402
from conftest import reset_profiler  # noqa: E402
from programs.dsl import Interpreter  # noqa: E402
from proton_ctypes.backends import select  # noqa: E402
from proton_ctypes.core import threads  # noqa: E402
from proton_ctypes.core.threads import thread_ctx  # noqa: E402

try:
    from triton.compiler.compiler import LazyDict
except ImportError:  # pragma: no cover - no launch ops without Triton
    LazyDict = None

NAMES = ("p0", "p1")
SCOPES = ("a", "b", "c")
STATES = ("s", "t")
KERNELS = ("k0", "k1")
KEYS = ("m", "n (exc)", "v", "w (pty)", "flops", "bytes")

VALUES = st.one_of(st.integers(-50, 1000), st.floats(-100, 100, allow_nan=False),
                   st.lists(st.integers(-5, 5), min_size=2, max_size=2))
METRICS = st.one_of(st.none(), st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=3).map(
    lambda d: ["dict", [[k, v] for k, v in d.items()]] if d else None))
REF = st.sampled_from([None, 0, 1])


class MockPrograms(Interpreter):
    """:class:`programs.dsl.Interpreter` on the mock GPU backend, with two more ops:
    ``["launch", kernel]`` (a kernel launched now) and ``["launch_op", kernel, flops]`` (a Triton
    launch through the launch hook, its metadata giving ``flops``)."""

    def _start(self, key, name, data, context, hook, mode):
        sid = self.proton.start(self.out(name), data=data, context=context, hook=hook, mode=mode, backend="mock")
        if sid is not None and sid not in self.sessions:
            self.sessions.append(sid)

    def _launch(self, key, kernel):
        select.get("mock").launch(kernel)

    def _launch_op(self, key, kernel, flops):
        from proton_ctypes.hooks import LaunchHook
        hook = LaunchHook()
        md = LazyDict({"name": kernel, "function": 0, "stream": 0})
        md.add(lambda: {"name": kernel, "flops": flops}, ())
        hook.enter(md)
        select.get("mock").launch(kernel)
        hook.exit(md)


def _ops(in_thread=False):
    launch = st.tuples(st.just("launch"), st.sampled_from(KERNELS)).map(list)
    scope_ops = [
        st.tuples(st.just("open"), st.sampled_from(["scope", "scope", "cpu", "manual", "state"]),
                  st.sampled_from(SCOPES), METRICS).map(list),
        st.tuples(st.just("close"), st.sampled_from([0, 0, 0, 1]), st.sampled_from(["same", "same", "none", "other"]),
                  METRICS).map(list),
        st.tuples(st.just("enter_state"), st.sampled_from(STATES)).map(list),
        st.just(["exit_state"]),
        launch,
    ]
    if LazyDict is not None:
        scope_ops.append(st.tuples(st.just("launch_op"), st.sampled_from(KERNELS), st.integers(0, 9)).map(list))
    if in_thread:
        return st.one_of(*scope_ops)
    session_ops = [
        st.tuples(st.just("start"), st.sampled_from(NAMES), st.sampled_from(["trace", "trace", "tree"]),
                  st.sampled_from(["shadow", "shadow", "shadow", "python"]), st.sampled_from([None, "triton"]),
                  st.just(None)).map(list),
        st.tuples(st.just("start"), st.sampled_from(NAMES), st.just("trace"), st.just("shadow"), st.just(None),
                  st.just("periodic_flushing:format=chrome_trace")).map(list),
        st.tuples(st.sampled_from(["activate", "deactivate"]), REF).map(list),
        st.tuples(st.just("phase"), REF).map(list),
        st.tuples(st.just("finalize"), REF, st.just("")).map(list),
        st.tuples(st.just("thread"), st.lists(_ops(in_thread=True), min_size=1, max_size=6)).map(list),
    ]
    return st.one_of(*scope_ops, *scope_ops, *scope_ops, *session_ops)


#: a program: a trace session first, then random ops
PROGRAMS = st.tuples(st.sampled_from(["trace", "tree"]), st.lists(_ops(), min_size=4, max_size=40)).map(
    lambda p: [["start", "p0", "trace", "shadow", None, None]]
    + ([["start", "p1", p[0], "shadow", None, None]] if p[0] == "tree" else []) + p[1])


def _run(program, outdir, general: bool):
    """Run ``program`` writing into ``outdir``; return what it observed.  ``general``: with every
    thread's fast-path view taken away."""
    values = {}
    saved = threads.fast_view
    if general:
        threads.fast_view = lambda ctx, views: None
    interp = MockPrograms(proton, lambda name: os.path.join(outdir, name), values.__setitem__)
    try:
        for op in program:
            interp.run(op)
        while interp.open:
            interp.run(["close", 0, "same", None])
        interp.run(["exit_state"])
        interp.run(["finalize", None, ""])
    finally:
        interp.end()
        threads.fast_view = saved
        reset_profiler()
    return values


def _scope_ids_by_rank(doc):
    """A trace with its scope ids replaced by their rank (each run numbers scopes from where the
    process-wide counter stands)."""
    ids = sorted({e["args"]["scope_id"] for e in doc.get("traceEvents", []) if "scope_id" in e.get("args", {})})
    rank = {sid: i for i, sid in enumerate(ids)}
    for e in doc.get("traceEvents", []):
        if "scope_id" in e.get("args", {}):
            e["args"]["scope_id"] = rank[e["args"]["scope_id"]]
    return doc


def _files(outdir):
    out = {}
    for f in sorted(os.listdir(outdir)):
        doc = load_output(os.path.join(outdir, f))
        out[f] = _scope_ids_by_rank(doc) if f.endswith(".chrome_trace") else doc
    return out


@settings(deadline=None)     # as many examples as the hypothesis profile (tests/conftest.py) says; each runs twice
@given(program=PROGRAMS)
def test_random_programs_write_the_same_files_on_the_fast_and_the_general_path(program):
    with tempfile.TemporaryDirectory() as root:
        runs = []
        for general in (False, True):  # one call site: python-context paths name the calling line
            outdir = os.path.join(root, "general" if general else "fast")
            os.makedirs(outdir)
            runs.append((_run(program, outdir, general), _files(outdir)))
        assert runs[0] == runs[1], json.dumps(program)


#: metrics of a trace scope on the fast path: plain values, converted roofline keys, and values
#: and keys the fast path leaves to the general path (each as a program encodes it)
SCOPE_METRICS = [
    [["m", 3], ["x", 2.5]], [["flops", 3]], [["flops16", 2.5]], [["bytes", 7]], [["bytes", 7.5]],
    [["big", 1 << 63]], [["neg", -(1 << 63)]], [["b", True]], [["v", [1, 2]]], [["w (pty)", 1], ["n (exc)", 2]],
    [["bytes (inc)", 4096], ["flops", 2.5e9], ["tokens", 128]], [[7, 1]], [["m", None]],
]


@pytest.mark.parametrize("metrics", SCOPE_METRICS, ids=lambda m: ",".join(str(k) for k, _ in m))
def test_trace_scope_metrics_are_stored_as_the_general_path_stores_them(metrics, tmp_path):
    program = [["start", "p0", "trace", "shadow", None, None], ["open", "scope", "a", None], ["close", 0, "same", None],
               ["open", "scope", "a", ["dict", metrics]], ["close", 0, "same", None],
               ["open", "manual", "b", ["dict", metrics]], ["close", 0, "same", ["dict", metrics]],
               ["open", "cpu", "c", ["dict", metrics]], ["close", 0, "same", None]]
    runs = []
    for general in (False, True):
        outdir = tmp_path / ("general" if general else "fast")
        outdir.mkdir()
        runs.append((_run(program, str(outdir), general), _files(str(outdir))))
    assert runs[0] == runs[1]


def _trace_events(path):
    with open(path) as f:
        return [e for e in json.load(f)["traceEvents"] if e.get("cat") in ("scope", "metric")]


def test_trace_scopes_take_the_fast_path_and_log_two_entries_each():
    proton.start("t", data="trace", backend="host")
    ctx = thread_ctx()
    with proton.state("s"):  # regroups the thread's views: a state takes the fast path too
        assert ctx.view is not None
    v = ctx.view
    log = ctx.trace.log
    before = len(log)
    with proton.scope("first"):  # numbers the thread's lane in the session, on the fast path
        pass
    with proton.scope("a"):
        with proton.scope("b", {"n": 2}):
            pass
    assert ctx.view is v and v.tlog is log  # never left the fast path
    assert len(log) == before + 6  # two entries per scope, nothing else
    proton.finalize()
    events = _trace_events("t.chrome_trace")
    assert [(e["name"], e["args"]["call_stack"]) for e in events] == [
        ("first", ["ROOT", "first"]), ("a", ["ROOT", "a"]), ("b: <n, 2>", ["ROOT", "a", "b"])]


def test_a_tree_and_a_trace_session_share_the_fast_path_of_one_thread():
    tree = proton.start("tree", backend="host")
    proton.start("tr", data="trace", backend="host")
    ctx = thread_ctx()
    for i in range(3):
        with proton.scope("step", {"i": i}):
            assert ctx.view is not None or i == 0
    proton.finalize(tree)
    proton.finalize()
    with open("tree.hatchet") as f:
        root = json.load(f)[0]
    assert root["children"][0]["frame"]["name"] == "step" and root["children"][0]["metrics"]["i"] == 3
    assert [e["name"] for e in _trace_events("tr.chrome_trace")] == ["step: <i, 0>", "step: <i, 1>", "step: <i, 2>"]


def test_a_trace_scope_exited_after_its_session_was_deactivated_gives_no_event():
    s = proton.start("t", data="trace", backend="host")
    with proton.scope("kept"):
        pass
    a = proton.scope("dropped")
    a.__enter__()
    proton.deactivate(s)
    a.__exit__(None, None, None)
    proton.activate(s)
    with proton.scope("after"):
        pass
    proton.finalize()
    assert [e["name"] for e in _trace_events("t.chrome_trace")] == ["kept", "after"]


def test_a_trace_scope_exited_in_a_later_phase_is_an_event_of_that_phase():
    s = proton.start("t", data="trace", backend="host")
    with proton.scope("first"):
        pass
    a = proton.scope("across")
    a.__enter__()
    proton.data.advance_phase(s)
    a.__exit__(None, None, None)
    proton.finalize()
    assert [e["name"] for e in _trace_events("t.part_0.chrome_trace")] == ["first"]
    assert [e["name"] for e in _trace_events("t.part_1.chrome_trace")] == ["across"]


def test_a_trace_scope_left_open_at_finalize_gives_no_event():
    proton.start("t", data="trace", backend="host")
    with proton.scope("closed"):
        pass
    proton.enter_scope("open")
    proton.finalize()
    assert [e["name"] for e in _trace_events("t.chrome_trace")] == ["closed"]
