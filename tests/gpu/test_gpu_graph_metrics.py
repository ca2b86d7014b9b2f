"""Metrics given inside a captured CUDA graph, added at every replay (docs/graph-metrics.md), on a GPU.

One scenario script runs every case in a subprocess (``@triton.jit`` needs a source file) and
writes its profiles; the tests read them.  Expected values follow Proton 3.9's CUDA-graph metric
behaviour: values under ``<replay>/<captured_at>/<capture path>``, nothing at capture, host
numbers replayed too, ``<metric>`` kernels under the metadata state.  Skipped without a GPU.
"""
import glob
import json
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = r"""
import json, sys, torch, triton, triton.language as tl
import proton_ctypes as proton
from proton_ctypes.core import graph_metrics

def sum_meta(grid, metadata, args):
    x = args["x"]
    return {"name": "add_meta", "bytes": x.numel() * x.element_size(), "flops": x.sum()}

@triton.jit(launch_metadata=sum_meta)
def add_meta(x, y, z):
    tl.store(z, tl.load(y) + tl.load(x))

@triton.jit
def bump(x_ptr):
    tl.store(x_ptr, tl.load(x_ptr) + 1)

side = torch.cuda.Stream()
torch.cuda.set_stream(side)
a = torch.ones((2, 2), device="cuda")
c = torch.empty_like(a)
add_meta[(1,)](a, a, c); torch.cuda.synchronize()

def body():
    with proton.scope("host_scope", metrics={"bytes": 16}):
        bump[(1,)](c)
    with proton.metadata_state():
        s = a.sum()
    with proton.scope("tensor_scope", metrics={"sum": s}):
        bump[(1,)](c)
    with proton.metadata_state():
        d = torch.arange(4, device="cuda")
    with proton.scope("vec_scope", metrics={"vec": d}):
        bump[(1,)](c)
    add_meta[(1,)](a, a, c)

# 1. ten iterations captured, replayed twice in one scope and once in another
sess = proton.start("graph", hook="triton")
body()                                  # eager
g = torch.cuda.CUDAGraph()
with torch.cuda.graph(g, stream=side):
    for _ in range(10):
        body()
with proton.scope("replay_a"):
    g.replay(); g.replay()
with proton.scope("replay_b"):
    g.replay()

# 2. values that change between replays
val = torch.zeros((), device="cuda")
g2 = torch.cuda.CUDAGraph()
with torch.cuda.graph(g2, stream=side):
    with proton.scope("changing", metrics={"v": val}):
        bump[(1,)](c)
for r in range(3):
    val.fill_(10.0 * (r + 1))
    with proton.scope("changing_replay"):
        g2.replay()

# 3. a replay while the session is deactivated adds nothing
g3 = torch.cuda.CUDAGraph()
with torch.cuda.graph(g3, stream=side):
    with proton.scope("inactive_owner", metrics={"m": val}):
        bump[(1,)](c)
proton.deactivate(sess)
g3.replay(); torch.cuda.synchronize()
proton.activate(sess)
with proton.scope("after_inactive"):
    g3.replay()

# 4. two streams inside the graph
other = torch.cuda.Stream()
g4 = torch.cuda.CUDAGraph()
t0, t1 = torch.tensor([3.0], device="cuda"), torch.tensor([5.0], device="cuda")
with torch.cuda.graph(g4, stream=side):
    ev = torch.cuda.Event(); ev.record()
    with proton.scope("main_stream", metrics={"f": t0}):
        bump[(1,)](c)
    with torch.cuda.stream(other):
        other.wait_event(ev)
        with proton.scope("other_stream", metrics={"f": t1}):
            bump[(1,)](c)
    side.wait_stream(other)
with proton.scope("multi_stream"):
    g4.replay()

# 9. contexts alternating at every replay, on two streams, queued behind a long kernel: the bank
#    word's memsets keep each replay's values in its own context
g9 = torch.cuda.CUDAGraph()
one = torch.ones((), device="cuda")
with torch.cuda.graph(g9, stream=side):
    with proton.scope("alternating", metrics={"n": one}):
        bump[(1,)](c)
sa, sb = torch.cuda.Stream(), torch.cuda.Stream()
sa.wait_stream(side)
sb.wait_stream(side)
with torch.cuda.stream(sa):
    torch.cuda._sleep(50_000_000)
for i in range(40):
    with torch.cuda.stream(sa if (i // 3) % 2 == 0 else sb):
        with proton.scope(f"ctx{i % 2}"):
            g9.replay()
torch.cuda.synchronize()

# 5. many replays: memory does not grow
with proton.scope("many"):
    for _ in range(10000):
        g2.replay()
torch.cuda.synchronize()
proton.finalize()

# 6. sessions live at capture only
s0 = proton.start("two_a", hook="triton")
s1 = proton.start("two_b", hook="triton")
proton.deactivate(s1)
g6 = torch.cuda.CUDAGraph()
with torch.cuda.graph(g6, stream=side):
    add_meta[(1,)](a, a, c)
proton.activate(s1)
with proton.scope("both"):
    g6.replay()
proton.finalize()

# 7. trace data: the replayed metric kernel
proton.start("trace", data="trace")
m = torch.tensor(1.0, device="cuda")
g7 = torch.cuda.CUDAGraph()
with torch.cuda.graph(g7, stream=side):
    with proton.scope("a"):
        with proton.scope("c", metrics={"m1": m}):
            bump[(1,)](c)
with proton.scope("test0"):
    g7.replay()
proton.finalize()

# 8. periodic flushing, each format
for fmt in ("hatchet", "hatchet_msgpack"):
    ps = proton.start(f"periodic_{fmt}/p", mode=f"periodic_flushing:format={fmt}", hook="triton")
    g8 = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g8, stream=side):
        with proton.scope("scope_a", metrics={"bytes": 16}):
            bump[(1,)](c)
        add_meta[(1,)](a, a, c)
    with proton.scope("test0"):
        for i in range(500):
            if i and i % 50 == 0:
                proton.data.advance_phase(session=ps)
            g8.replay()
    proton.finalize(output_format=fmt)
print(json.dumps(graph_metrics.stats))
"""


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    d = tmp_path_factory.mktemp("graph_metrics")
    script = d / "graph_metrics_scenario.py"
    script.write_text(textwrap.dedent(SCRIPT))
    r = subprocess.run([sys.executable, str(script)], cwd=d, env=dict(os.environ, PYTHONPATH=REPO, PROTON_CTYPES_GRAPH_METRICS="1"),
                       capture_output=True, text=True, timeout=400)
    assert r.returncode == 0, r.stderr[-4000:]
    return d, json.loads(r.stdout.strip().splitlines()[-1])


def _tree(d, name):
    with open(d / name) as f:
        return json.load(f)[0]


def _find(node, *names):
    for n in names:
        node = next(c for c in node["children"] if c["frame"]["name"] == n)
    return node


def _search(node, name):
    stack = [node]
    while stack:
        n = stack.pop()
        if n["frame"]["name"] == name:
            return n
        stack.extend(n["children"])
    return None


def test_each_replay_adds_host_and_tensor_metrics_under_captured_at(out):
    d, _ = out
    tree = _tree(d, "graph.hatchet")
    for scope, replays in (("replay_a", 2), ("replay_b", 1)):
        cap = _find(tree, scope, "<captured_at>")
        assert _find(cap, "host_scope")["metrics"]["bytes"] == 160 * replays
        assert "count" not in _find(cap, "host_scope")["metrics"]
        assert _find(cap, "tensor_scope")["metrics"]["sum"] == 40.0 * replays
        assert _find(cap, "vec_scope")["metrics"]["vec"] == [0, 10 * replays, 20 * replays, 30 * replays]
        meta = _find(cap, "add_meta")["metrics"]
        assert (meta["bytes"], meta["flops"], meta["count"]) == (160 * replays, 40.0 * replays, 10 * replays)
        assert _search(_find(cap, "__proton_launch_metadata"), "<metric>") is not None


def test_nothing_is_added_at_capture(out):
    d, _ = out
    tree = _tree(d, "graph.hatchet")
    assert _find(tree, "host_scope")["metrics"]["bytes"] == 16        # the eager call only
    assert _find(tree, "tensor_scope")["metrics"]["sum"] == 4.0


def test_each_replay_adds_the_values_the_tensor_holds_when_it_runs(out):
    d, _ = out
    tree = _tree(d, "graph.hatchet")
    assert _find(tree, "changing_replay", "<captured_at>", "changing")["metrics"]["v"] == 60.0


def test_a_replay_while_deactivated_is_not_given_to_the_next_one(out):
    d, _ = out
    tree = _tree(d, "graph.hatchet")
    assert _find(tree, "after_inactive", "<captured_at>", "inactive_owner")["metrics"]["m"] == 30.0


def test_metric_kernels_on_two_streams_of_one_graph(out):
    d, _ = out
    cap = _find(_tree(d, "graph.hatchet"), "multi_stream", "<captured_at>")
    assert _find(cap, "main_stream")["metrics"]["f"] == 3.0
    assert _find(cap, "other_stream")["metrics"]["f"] == 5.0


def test_contexts_alternating_on_two_streams_behind_a_busy_queue_keep_their_own_values(out):
    d, _ = out
    tree = _tree(d, "graph.hatchet")
    for ctx in ("ctx0", "ctx1"):
        node = _find(tree, ctx, "<captured_at>", "alternating")
        assert node["metrics"]["n"] == 20.0
        assert _find(node, "bump")["metrics"]["count"] == 20


def test_ten_thousand_replays_in_one_scope_use_one_bank(out):
    d, stats = out
    assert _find(_tree(d, "graph.hatchet"), "many", "<captured_at>", "changing")["metrics"]["v"] == 300000.0
    assert stats["merged_replays"] == 0 and stats["unknown_graph"] == 0


def test_only_sessions_live_at_capture_get_the_values(out):
    d, _ = out
    a = _find(_tree(d, "two_a.hatchet"), "both", "<captured_at>", "add_meta")["metrics"]
    assert a["flops"] == 4.0 and a["count"] == 1
    b = _search(_tree(d, "two_b.hatchet"), "add_meta")
    assert b is None or "flops" not in b["metrics"]


def test_trace_shows_the_replayed_metric_kernel_below_the_metadata_state(out):
    d, _ = out
    with open(d / "trace.chrome_trace") as f:
        events = json.load(f)["traceEvents"]
    metric = [e for e in events if e.get("cat") == "kernel" and e["name"] == "<metric>"
              and e["args"]["call_stack"][:2] == ["ROOT", "test0"]]
    assert [e["args"]["call_stack"] for e in metric] == [
        ["ROOT", "test0", "<captured_at>", "a", "c", "__proton_launch_metadata", "<metric>"]]


@pytest.mark.parametrize("fmt", ["hatchet", "hatchet_msgpack"])
def test_periodic_flushing_writes_each_phase_with_its_replays(out, fmt):
    d, _ = out
    files = sorted(glob.glob(str(d / f"periodic_{fmt}" / f"p.part_*.{fmt}")))
    assert len(files) == 10
    for path in files:
        if fmt == "hatchet":
            with open(path) as f:
                tree = json.load(f)[0]
        else:
            import msgpack
            with open(path, "rb") as f:
                tree = msgpack.load(f, raw=False, strict_map_key=False)[0]
        cap = _find(tree, "test0", "<captured_at>")
        assert _find(cap, "scope_a")["metrics"]["bytes"] == 50 * 16, path
        assert _find(cap, "add_meta")["metrics"]["flops"] == 50 * 4.0, path
