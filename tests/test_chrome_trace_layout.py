"""The ``chrome_trace`` file of ``data="trace"`` in Proton 3.9's layout.

Host-only traces (scopes, metrics, states, threads, phases) are compared byte for byte with
the real Proton 3.9 (the CPU oracle of tests/oracle/real_proton.py), times aside.  Kernel traces cannot be made
by the oracle; their layout follows libproton 3.9's writer and upstream's
``test_trace_flexible_metrics_scope_ranges`` / ``test_trace_cudagraph_graph_scope_ranges``,
run here with the mock GPU backend: lane metadata (``ph`` ``"M"``), ``launch->kernel``
flows, kernel lanes ``200000 + stream``, graph lanes ``100000 + stream`` with the scopes
captured in the graph.
"""
import json
import os
import re
import threading

import pytest

import proton_ctypes as proton
from oracle import side_by_side
from proton_ctypes.tree import callpath
from proton_ctypes.writers import chrome_trace


def _load(path):
    with open(path) as f:
        return json.load(f)


def _events(path):
    return _load(path)["traceEvents"]


# -- host-only scenarios, also run under the real Proton ------------------------------------

def scenario_metrics_of_every_type(p, d):
    p.start(os.path.join(d, "t"), data="trace")
    with p.scope("outer", {"m": 1, "f": 2.5, "v": [1, 2], "vf": [1.5, 2.0, 1e-9, 123456789.0, -0.0]}):
        with p.scope("inner"):
            pass
        with p.state("st"):
            with p.scope("u", {"k (pty)": 3, "z (exc)": 1, "y (inc)": 2}):
                pass
    with p.scope("big", {"i": 2 ** 40, "neg": -3, "tiny": 1e-9, "huge": 1e300, "x": 0.1, "inf": [float("inf")]}):
        pass
    p.finalize()


def scenario_threads_and_enter_scope(p, d):
    p.start(os.path.join(d, "t"), data="trace")

    done = [threading.Event(), threading.Event()]

    def work(i):
        with p.scope(f"t{i + 1}"):
            pass
        done[i].set()
        done[1].wait()  # both threads alive at once: two thread ids (a finished thread's id may be reused)

    with p.scope("main"):
        threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
        threads[0].start()
        done[0].wait()
        threads[1].start()
        for t in threads:
            t.join()
    p.enter_scope("es")
    p.exit_scope("es")
    with p.cpu_timed_scope("ct"):
        pass
    p.finalize()


def scenario_phases_keep_thread_numbers(p, d):
    s = p.start(os.path.join(d, "t"), data="trace")
    with p.scope("first"):
        pass
    p.data.advance_phase(s)

    def work():
        with p.scope("thr"):
            pass

    t = threading.Thread(target=work)
    t.start()
    t.join()
    with p.scope("main2"):
        pass
    p.finalize()


def scenario_unicode_and_escapes(p, d):
    p.start(os.path.join(d, "t"), data="trace")
    with p.scope("sc\u00e9\u4e2d\n\t\"\\/"):
        with p.scope("m", {"\u00fc": 1}):
            pass
    p.finalize()


def scenario_empty(p, d):
    p.start(os.path.join(d, "t"), data="trace")
    p.finalize()


def scenario_metric_only_scope(p, d):
    # upstream test_trace_flexible_metrics_no_kernel_anchor
    p.start(os.path.join(d, "t"), data="trace")
    with p.scope("metric_only", metrics={"foo": 1.0}):
        pass
    p.finalize()


def scenario_deactivated_window(p, d):
    s = p.start(os.path.join(d, "t"), data="trace")
    with p.scope("a"):
        pass
    p.deactivate(s)
    with p.scope("hidden"):
        pass
    p.activate(s)
    with p.scope("b", {"n": 2}):
        pass
    p.finalize()


def scenario_python_context(p, d):
    p.start(os.path.join(d, "t"), data="trace", context="python")

    def f():
        with p.scope("s", {"m": 1}):
            pass

    f()
    p.finalize()


SCENARIOS = {k[len("scenario_"):]: v for k, v in sorted(globals().items()) if k.startswith("scenario_")}


_OWN = r'[^"]*/(?:triton/profiler|proton_ctypes)/[^"]*'


def _normalize(text):
    """Times and measured CPU times replaced by markers; python-context frames of the
    profiler's own files left out (a deliberate difference, README); everything else compared as is."""
    text = re.sub(r'"(ts|dur|baseTimeNanoseconds)":-?[0-9.e+-]+', r'"\1":T', text)
    text = re.sub(r',"' + _OWN + '"', "", text)
    text = re.sub(r'"name":"' + _OWN + ': ', '"name":"<own frame>: ', text)
    return re.sub(r'(cpu_time \(ns\)\(exc\)(?:", "|":"|, ))[0-9]+', r"\1N", text)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_host_scenario_is_well_formed(name, tmp_path):
    SCENARIOS[name](proton, str(tmp_path))
    for f in sorted(os.listdir(tmp_path)):
        text = (tmp_path / f).read_text(encoding="utf-8")
        assert text.endswith("}\n") and ", " not in text.split('"name":')[0]
        doc = json.loads(text)
        assert doc["displayTimeUnit"] == "us"
        assert not any(e.get("ph") == "M" for e in doc["traceEvents"])  # no kernels: no lanes


def test_vector_doubles_printed_as_ostream(tmp_path):
    proton.start(str(tmp_path / "t"), data="trace", backend="host")
    with proton.scope("v", {"a": [1.0, 2.5, 1e-9, 123456789.0, 1e20]}):
        pass
    proton.finalize()
    (ev,) = _events(tmp_path / "t.chrome_trace")
    assert ev["args"]["metrics"] == {"a": "[1,2.5,1e-09,1.23457e+08,1e+20]"}


def test_thread_numbers_persist_across_phases(tmp_path):
    scenario_phases_keep_thread_numbers(proton, str(tmp_path))
    evs = {e["name"]: e["tid"] for e in _events(tmp_path / "t.part_1.chrome_trace")}
    assert evs == {"main2": 0, "thr": 1}


def test_non_ascii_written_as_utf8(tmp_path):
    scenario_unicode_and_escapes(proton, str(tmp_path))
    raw = (tmp_path / "t.chrome_trace").read_bytes()
    assert "sc\u00e9\u4e2d".encode() in raw and b"\\n\\t\\\"\\\\/" in raw


_RUNNER = """
import os
import test_chrome_trace_layout as t
for name, fn in sorted(t.SCENARIOS.items()):
    os.makedirs(name)
    fn(p, os.path.abspath(name))
"""


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    why = side_by_side.oracle_missing()
    if why:
        pytest.skip(why)
    root = tmp_path_factory.mktemp("trace")
    folders = {impl: str(root / impl) for impl in side_by_side.IMPLS}
    for d in folders.values():
        os.makedirs(d)
    side_by_side.run_both(_RUNNER, folders)
    return root


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_host_trace_matches_real_proton(both, name):
    real, ours = both / "real" / name, both / "ours" / name
    files = sorted(os.listdir(real))
    assert sorted(os.listdir(ours)) == files
    for f in files:
        a = (real / f).read_text(encoding="utf-8")
        b = (ours / f).read_text(encoding="utf-8")
        assert _normalize(b) == _normalize(a), f


# -- kernels (mock backend) ------------------------------------------------------------------

def _by_cat(evs, cat):
    return [e for e in evs if e.get("cat") == cat]


def test_empty_trace_text(tmp_path):
    proton.start(str(tmp_path / "t"), data="trace", backend="mock")
    proton.finalize()
    assert (tmp_path / "t.chrome_trace").read_text() == '{"displayTimeUnit":"us","traceEvents":[]}\n'


def test_flexible_metrics_scope_ranges(mock, tmp_path):
    # the shape of upstream test_trace_flexible_metrics_scope_ranges
    proton.start(str(tmp_path / "t"), data="trace", backend="mock")
    with proton.scope("scope_3", metrics={"m3": 3.0}):
        with proton.scope("scope_2", metrics={"m2": 2.0}):
            with proton.scope("scope_1", metrics={"m1": 1.0}):
                mock.launch("foo")
            with proton.scope("scope_4"):
                mock.launch("foo")
            with proton.scope("scope_5"):
                mock.launch("foo")
        with proton.scope("scope_6"):
            with proton.scope("scope_7"):
                mock.launch("foo")
    mock.flush()
    proton.finalize()
    evs = _events(tmp_path / "t.chrome_trace")
    kernels, metrics, scopes, flows = (_by_cat(evs, c) for c in ("kernel", "metric", "scope", "flow"))
    assert (len(kernels), len(metrics), len(scopes), len(flows)) == (4, 3, 4, 8)
    assert {tuple(e["args"]["call_stack"]) for e in kernels} == {
        ("ROOT", "scope_3", "scope_2", "scope_1", "foo"), ("ROOT", "scope_3", "scope_2", "scope_4", "foo"),
        ("ROOT", "scope_3", "scope_2", "scope_5", "foo"), ("ROOT", "scope_3", "scope_6", "scope_7", "foo")}
    assert all(e["args"]["metrics"] == {} and e["pid"] == 0 and e["tid"] == 200007 for e in kernels)
    by_metric = {next(iter(e["args"]["metrics"])): e for e in metrics}
    assert by_metric["m1"]["name"] == "scope_1: <m1, 1.000000>"
    starts = {e["id"]: e for e in flows if e["ph"] == "s"}
    finishes = {e["id"]: e for e in flows if e["ph"] == "f"}
    assert set(starts) == set(finishes) and len(starts) == 4
    assert all(e["name"] == "launch->kernel" and e["bp"] == "e" and e["tid"] == 0 for e in starts.values())
    assert all(e["name"] == "launch->kernel" and e["bp"] == "e" and e["tid"] == 200007 for e in finishes.values())
    # each flow starts at its innermost scope and ends at the kernel's start
    by_stack = {tuple(e["args"]["call_stack"]): e for e in metrics + scopes}
    for k in kernels:
        (f,) = [e for e in finishes.values() if e["ts"] == k["ts"]]
        s = starts[f["id"]]
        assert s["ts"] == by_stack[tuple(k["args"]["call_stack"][:-1])]["ts"]


def test_lane_metadata_order_and_text(mock, tmp_path):
    proton.start(str(tmp_path / "t"), data="trace", backend="mock")
    with proton.scope("a"):
        mock.launch("k1", stream=9)
        mock.launch("k2", stream=3)

    def work():
        with proton.scope("w"):
            pass

    t = threading.Thread(target=work)
    t.start()
    t.join()
    mock.flush()
    proton.finalize()
    text = (tmp_path / "t.chrome_trace").read_text()
    assert text.endswith("]}\n")
    evs = json.loads(text)["traceEvents"]
    meta = [e for e in evs if e["ph"] == "M"]
    assert meta == [
        {"args": {"name": "Trace"}, "name": "process_name", "ph": "M", "pid": 0, "tid": 0},
        {"args": {"sort_index": 0}, "name": "process_sort_index", "ph": "M", "pid": 0, "tid": 0},
        {"args": {"name": "CPU Thread 0"}, "name": "thread_name", "ph": "M", "pid": 0, "tid": 0},
        {"args": {"sort_index": 0}, "name": "thread_sort_index", "ph": "M", "pid": 0, "tid": 0},
        {"args": {"name": "CPU Thread 1"}, "name": "thread_name", "ph": "M", "pid": 0, "tid": 1},
        {"args": {"sort_index": 1}, "name": "thread_sort_index", "ph": "M", "pid": 0, "tid": 1},
        {"args": {"name": "GPU Stream 3"}, "name": "thread_name", "ph": "M", "pid": 0, "tid": 200003},
        {"args": {"sort_index": 200003}, "name": "thread_sort_index", "ph": "M", "pid": 0, "tid": 200003},
        {"args": {"name": "GPU Stream 9"}, "name": "thread_name", "ph": "M", "pid": 0, "tid": 200009},
        {"args": {"sort_index": 200009}, "name": "thread_sort_index", "ph": "M", "pid": 0, "tid": 200009},
    ]
    assert evs[:len(meta)] == meta
    # then CPU scopes (by thread, then start), flows, kernels (by stream, then start)
    cats = [e.get("cat") for e in evs[len(meta):]]
    assert cats == ["scope", "scope", "flow", "flow", "flow", "flow", "kernel", "kernel"]
    kernels = _by_cat(evs, "kernel")
    assert [(k["name"], k["tid"]) for k in kernels] == [("k2", 200003), ("k1", 200009)]
    assert list(kernels[0]) == ["args", "cat", "dur", "name", "ph", "pid", "tid", "ts"]
    base = json.loads(text)["baseTimeNanoseconds"]
    assert min(e["ts"] for e in evs if "ts" in e) == 0.0 and isinstance(base, int)


def test_kernel_without_enclosing_scope_has_no_flow(mock, tmp_path):
    proton.start(str(tmp_path / "t"), data="trace", backend="mock")
    mock.launch("bare")
    with proton.scope("s"):
        pass
    mock.launch("bare")
    mock.flush()
    proton.finalize()
    evs = _events(tmp_path / "t.chrome_trace")
    assert len(_by_cat(evs, "kernel")) == 2 and _by_cat(evs, "flow") == []


def test_two_kernels_in_one_scope_share_the_flow_id(mock, tmp_path):
    proton.start(str(tmp_path / "t"), data="trace", backend="mock")
    with proton.scope("a"):
        pass
    with proton.scope("s"):
        mock.launch("k")
        mock.launch("k")
    mock.flush()
    proton.finalize()
    flows = _by_cat(_events(tmp_path / "t.chrome_trace"), "flow")
    assert [f["ph"] for f in flows] == ["s", "f", "s", "f"]
    assert len({f["id"] for f in flows}) == 1
    assert flows[0]["id"] == 1  # scope "a" is event 0 of the phase, "s" event 1


def test_flow_starts_at_the_enclosing_scope_after_a_closed_child(mock, tmp_path):
    proton.start(str(tmp_path / "t"), data="trace", backend="mock")
    with proton.scope("a"):
        with proton.scope("b"):
            with proton.scope("c"):
                pass
        mock.launch("k")
    mock.flush()
    proton.finalize()
    evs = _events(tmp_path / "t.chrome_trace")
    a = next(e for e in _by_cat(evs, "scope") if e["name"] == "a")
    (start,) = [f for f in _by_cat(evs, "flow") if f["ph"] == "s"]
    assert start["ts"] == a["ts"] and start["id"] == 0


def test_innermost_interval():
    import numpy as np
    starts = np.array([0, 10, 20, 40, 60])
    ends = np.array([100, 50, 30, 45, 70])
    times = np.array([5, 15, 25, 35, 42, 55, 65, 150, -1])
    assert chrome_trace._innermost(starts, ends, times).tolist() == [0, 1, 2, 1, 3, 0, 4, -1, -1]


def test_kernel_thread_without_scopes_has_a_number_but_no_lane(mock, tmp_path):
    proton.start(str(tmp_path / "t"), data="trace", backend="mock")

    def launcher():
        mock.launch("k")

    t = threading.Thread(target=launcher)
    t.start()
    t.join()
    mock.flush()  # the launching thread is numbered at its first launch
    with proton.scope("s"):
        pass
    proton.finalize()
    evs = _events(tmp_path / "t.chrome_trace")
    names = [e["args"]["name"] for e in evs if e.get("name") == "thread_name"]
    assert names == ["CPU Thread 1", "GPU Stream 7"]
    assert _by_cat(evs, "scope")[0]["tid"] == 1


def _capture(mock, fn):
    """Run ``fn`` as a graph capture: return ``[(kernel name, capture tid, capture ns)]``."""
    nodes = []
    fn(lambda name: nodes.append((name,) + mock.capture()))
    return nodes


def test_cudagraph_graph_scope_ranges(mock, tmp_path):
    # the shape of upstream test_trace_cudagraph_graph_scope_ranges
    proton.start(str(tmp_path / "t"), data="trace", backend="mock")

    def fn(launch):
        with proton.scope("a"):
            with proton.scope("b"):
                with proton.scope("c", metrics={"m1": 1.0}):
                    launch("foo")
                    with proton.state(callpath.METADATA_FRAME):
                        launch("<metric>")
                launch("foo")
            launch("foo")

    fn(lambda name: mock.launch(name, stream=5))  # warm-up, eager
    graph = _capture(mock, fn)
    mock.flush()
    with proton.scope("test0"):
        for name, tid, ns in graph:
            mock.launch(name, stream=5, cap=(tid, ns))
    mock.flush()
    proton.finalize()
    evs = _events(tmp_path / "t.chrome_trace")
    thread_names = [e for e in evs if e.get("ph") == "M" and e["name"] == "thread_name"]
    graph_tids = [e["tid"] for e in thread_names if e["args"]["name"].startswith("Graph: Stream ")]
    assert graph_tids == [100005]
    graph_scopes = [e for e in _by_cat(evs, "scope") if e["tid"] == 100005]
    assert [e["name"] for e in graph_scopes] == ["c", "b", "<captured_at>", "a"]
    assert all("args" not in e for e in graph_scopes)
    assert not any(e.get("cat") == "metric" and e["tid"] == 100005 for e in evs)
    replay = [e for e in _by_cat(evs, "kernel") if e["args"]["call_stack"][:2] == ["ROOT", "test0"]]
    foo = [e for e in replay if e["name"] == "foo"]
    assert {tuple(e["args"]["call_stack"]) for e in foo} == {
        ("ROOT", "test0", "<captured_at>", "a", "b", "c", "foo"),
        ("ROOT", "test0", "<captured_at>", "a", "b", "foo"),
        ("ROOT", "test0", "<captured_at>", "a", "foo")}
    (metric,) = [e for e in replay if e["name"] == "<metric>"]
    assert metric["args"]["call_stack"] == ["ROOT", "test0", "<captured_at>", "a", "b", "c",
                                            callpath.METADATA_FRAME, "<metric>"]
    assert all("metrics" not in e["args"] for e in replay)  # graph-linked kernels
    # the graph scopes span the replayed kernels under them
    k = sorted(foo, key=lambda e: e["ts"])
    by_name = {e["name"]: e for e in graph_scopes}
    assert by_name["a"]["ts"] == by_name["<captured_at>"]["ts"] == k[0]["ts"]
    assert by_name["c"]["ts"] + by_name["c"]["dur"] == pytest.approx(k[0]["ts"] + k[0]["dur"], abs=1e-3)
    # one flow for the graph launch on its stream, from the replay scope
    test0 = next(e for e in _by_cat(evs, "scope") if e["args"].get("call_stack") == ["ROOT", "test0"])
    first = min(replay, key=lambda e: e["ts"])
    finish = [f for f in _by_cat(evs, "flow") if f["ph"] == "f" and f["tid"] == first["tid"]
              and f["ts"] >= test0["ts"]]
    assert len(finish) == 1 and finish[0]["ts"] == first["ts"]
    start = next(f for f in _by_cat(evs, "flow") if f["ph"] == "s" and f["id"] == finish[0]["id"])
    assert start["tid"] == test0["tid"] and start["ts"] == test0["ts"]


def test_graph_scope_reconstruction_follows_libproton():
    class K:
        pass

    def node(*frames):
        return callpath.walk(callpath.ROOT, frames)

    k = K()
    import numpy as np
    rows = [  # (stream, start, end, path)
        (1, 10, 20, ("r", "<captured_at>", "x", "y", "k")),
        (1, 30, 40, ("r", "<captured_at>", "x", "k")),
        (1, 50, 60, ("r", "<captured_at>", "z", "k")),
        (1, 70, 80, ("r", "<captured_at>", "z", "<metric>")),
        (2, 15, 25, ("r", "<captured_at>", "k")),
        (2, 30, 35, ("r", "plain")),
    ]
    k.stream = np.array([r[0] for r in rows])
    k.start = np.array([r[1] for r in rows])
    k.end = np.array([r[2] for r in rows])
    k.node = np.array([node(*r[3]) for r in rows])
    k.n = len(rows)
    graph = chrome_trace._graph_scopes(k, None)
    assert graph == {1: [("y", 10, 20), ("x", 10, 40), ("<captured_at>", 10, 60), ("z", 50, 60)],
                     2: [("<captured_at>", 15, 25)]}
    assert k.linked.tolist() == [True, True, True, True, True, False]


def test_nlohmann_number_text():
    assert chrome_trace._num(0.0) == "0.0"
    assert chrome_trace._num(12.5) == "12.5"
    assert chrome_trace._num(1e-05) == "1e-05"
    assert chrome_trace._num(1e15) == "1e+15"
    assert chrome_trace._num(1234567890123456.8) == "1.2345678901234568e+15"
    assert chrome_trace._num(1e16) == "1e+16"
