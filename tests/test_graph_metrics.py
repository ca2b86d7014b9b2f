"""Metrics given inside a CUDA-graph capture, added per replay (core/graph_metrics.py).

The device is emulated: a "capture" makes :func:`tensor_metrics.capture_graph` name a graph,
each metric kernel launched into it is recorded as a node that, at every replay, does what
the Triton kernel of :mod:`proton_ctypes.core.graph_metric_kernel` does (count its run, read
the bank from the book's bank word, add the values), and each replay first calls the mock
backend's graph-launch hook, as the CUPTI graph-launch callback does.  The bank word's writes
are queued as the memsets are on a stream: each runs just before the replay launched after it.  Kernels are
launched through the mock backend with their capture thread and time (``cap``).
The expected trees are those of Proton 3.9's CUDA-graph metric tests (run on the GPU by
tests/gpu/test_gpu_graph_metrics.py).
"""
import itertools
import threading

import numpy as np
import pytest

import proton_ctypes as proton
from proton_ctypes.core import graph_metric_kernel as gmk
from proton_ctypes.core import graph_metrics, tensor_metrics
from proton_ctypes.tree import callpath

from conftest import find, read_tree

_handles = itertools.count(0x1000)


class DeviceTensor:
    """A numpy array that says it lives on a CUDA device (what transform_tensor_metrics sees)."""

    is_cpu = False

    class device:
        type, index = "cuda", 0

    def __init__(self, values):
        self.a = np.array(values)

    def data_ptr(self):
        return self.a.ctypes.data

    def numel(self):
        return self.a.size

    def dim(self):
        return self.a.ndim

    def reshape(self, *shape):
        return self

    def is_floating_point(self):
        return self.a.dtype.kind == "f"


class Graph:
    """A captured graph: its handle, its metric nodes and its kernels (name, capture tid, ns)."""

    def __init__(self):
        self.handle = next(_handles)
        self.metric_nodes = []
        self.kernels = []


class Device:
    """Capture and replay, emulated."""

    def __init__(self, mock, monkeypatch):
        self.mock = mock
        self.capturing = None
        #: bank-word writes not run yet: ``(graph handle, launch ordinal it precedes, word, bank)``
        self.queued = []
        #: every write: ``(stream, previous stream)``
        self.writes = []
        self.launched, self.ran, self.launching = {}, {}, None
        monkeypatch.setattr(gmk, "current_capture", lambda device=None: self.capturing and
                            (self.capturing.handle, device or DeviceTensor.device))
        monkeypatch.setattr(gmk, "launch_triton", self._launch_metric)
        monkeypatch.setattr(gmk, "_zeroed", lambda n, device, capturing: np.zeros(n, np.int64))
        monkeypatch.setattr(gmk, "_bank_writer", self._bank_writer)
        monkeypatch.setattr(gmk, "_arenas", {})
        monkeypatch.setattr(graph_metrics, "books", {})
        monkeypatch.setattr(graph_metrics, "by_graph", {})
        monkeypatch.setattr(graph_metrics, "by_exec", {})
        monkeypatch.setattr(mock, "graph_launch", self._graph_launch(mock.graph_launch))

    def _graph_launch(self, launch):
        def graph_launch(graph, exec_handle=None, stream=None):
            self.launching = graph
            try:
                launch(graph, exec_handle, stream)
            finally:
                self.launching = None
                self.launched[graph] = self.launched.get(graph, 0) + 1
        return graph_launch

    def _bank_writer(self, word):
        def write(bank, stream, previous):
            self.writes.append((stream, previous))
            graph = self.launching
            self.queued.append((graph, self.launched.get(graph, 0), word, bank))
        return write

    def _launch_metric(self, region, word, value, numel, is_float):
        self.capturing.metric_nodes.append((region, word, value, numel, is_float))
        self.kernel(gmk.KERNEL_NAME)

    def kernel(self, name):
        """Launch kernel ``name``: into the graph while capturing, else now."""
        if self.capturing is not None:
            self.capturing.kernels.append((name,) + self.mock.capture())   # a graph node, as CUPTI notes it
        else:
            self.mock.launch(name)

    def capture(self, fn, handle=None):
        """Capture ``fn`` into a new graph (``handle``: the CUgraph handle it gets, e.g. one a
        destroyed graph had) and instantiate it."""
        self.capturing = Graph()
        if handle is not None:
            self.capturing.handle = handle
        self.mock.capture_edge(True)
        try:
            fn()
        finally:
            graph, self.capturing = self.capturing, None
            self.mock.capture_edge(False)
        graph.exec_handle = next(_handles)
        self.mock.instantiate(graph.exec_handle, graph.handle)
        return graph

    def replay(self, graph, stream=None):
        self.mock.graph_launch(graph.handle, graph.exec_handle, stream)
        self.run(graph)

    def run(self, graph):
        """The device runs the graph's next replay, after the writes queued ahead of it."""
        k = self.ran.get(graph.handle, 0)
        self.ran[graph.handle] = k + 1
        for op in [op for op in self.queued if op[0] == graph.handle and op[1] <= k]:
            self.queued.remove(op)
            op[2][0] = op[3]
        for region, word, value, n, is_float in graph.metric_nodes:   # the Triton kernel, in numpy
            region[0] += 1
            bank = int(word[0])
            lo = 1 + bank * n
            if is_float:
                region[lo:lo + n] = (region[lo:lo + n].view(np.float64) + value.a.reshape(-1)).view(np.int64)
            else:
                region[lo:lo + n] += value.a.reshape(-1).astype(np.int64)
        for name, tid, ns in graph.kernels:
            self.mock.launch(name, cap=(tid, ns))


def metric_scope(name, metrics):
    """A capture body: scope ``name`` with ``metrics`` opened and closed."""
    def body():
        with proton.scope(name, metrics):
            pass
    return body


@pytest.fixture
def dev(mock, monkeypatch):
    monkeypatch.setenv(graph_metrics.ENABLE_ENV, "1")
    return Device(mock, monkeypatch)


def test_with_the_switch_off_no_hook_is_connected_and_a_captured_metric_is_added_once(mock, monkeypatch, tmp_path):
    monkeypatch.setenv(graph_metrics.ENABLE_ENV, "0")
    device = Device(mock, monkeypatch)
    proton.start(str(tmp_path / "t"), backend="mock")
    assert mock.graph_hooks is None and not graph_metrics.connected
    def step():
        with proton.scope("fwd", {"n": 2}):
            device.kernel("k")
    graph = device.capture(step)
    for _ in range(3):
        device.replay(graph)
    proton.finalize()
    assert find(read_tree(str(tmp_path / "t.hatchet"))[0], "fwd")["metrics"]["n"] == 2
    assert graph.metric_nodes == [] and graph_metrics.books == {}


def test_each_replay_adds_its_values_under_captured_at_of_the_replay_scope(dev, tmp_path):
    proton.start(str(tmp_path / "t"), backend="mock")
    loss = DeviceTensor(0.0)

    def step():
        with proton.scope("fwd", {"loss": loss}):
            dev.kernel("k")
    graph = dev.capture(step)
    for i in range(3):
        loss.a[...] = 0.5 * (i + 1)
        with proton.scope("replay"):
            dev.replay(graph)
    proton.finalize()
    tree, _ = read_tree(tmp_path / "t.hatchet")
    fwd = find(tree, "replay", "<captured_at>", "fwd")
    assert fwd["metrics"]["loss"] == pytest.approx(0.5 + 1.0 + 1.5)
    assert find(fwd, "k")["metrics"]["count"] == 3
    # nothing is added at capture (Proton adds the metric only when the graph runs)
    assert "loss" not in find(tree, "fwd")["metrics"]


def test_replays_in_different_scopes_keep_their_own_values(dev, tmp_path):
    proton.start(str(tmp_path / "t"), backend="mock")
    v = DeviceTensor(0)
    graph = dev.capture(lambda: proton.enter_scope("s", metrics={"v": v}) and proton.exit_scope())
    for name, value in (("test0", 1), ("test1", 10), ("test0", 100)):
        v.a[...] = value
        with proton.scope(name):
            dev.replay(graph)
    proton.finalize()
    tree, _ = read_tree(tmp_path / "t.hatchet")
    assert find(tree, "test0", "<captured_at>", "s")["metrics"]["v"] == 101
    assert find(tree, "test1", "<captured_at>", "s")["metrics"]["v"] == 10


def test_vector_and_integer_metrics_sum_elementwise(dev, tmp_path):
    proton.start(str(tmp_path / "t"), backend="mock")
    vec = DeviceTensor([0, 1, 2, 3])
    graph = dev.capture(metric_scope("d", {"vec": vec}))
    for _ in range(10):
        dev.replay(graph)
    proton.finalize()
    tree, _ = read_tree(tmp_path / "t.hatchet")
    assert find(tree, "<captured_at>", "d")["metrics"]["vec"] == [0, 10, 20, 30]


def test_a_replay_while_the_session_is_deactivated_adds_nothing(dev, tmp_path):
    s = proton.start(str(tmp_path / "t"), backend="mock")
    x = DeviceTensor(4.0)
    inactive = dev.capture(metric_scope("inactive_owner", {"sum_metric": x}))
    profiled = dev.capture(metric_scope("profiled_owner", {"sum_metric": x}))
    proton.deactivate(s)
    dev.replay(inactive)
    proton.activate(s)
    with proton.scope("profiled_replay"):
        dev.replay(profiled)
    proton.finalize()
    tree, _ = read_tree(tmp_path / "t.hatchet")
    cap = find(tree, "profiled_replay", "<captured_at>")
    assert find(cap, "profiled_owner")["metrics"]["sum_metric"] == 4.0
    assert "inactive_owner" not in [c["frame"]["name"] for c in cap["children"]]
    assert not any("sum_metric" in c["metrics"] for c in tree["children"])


def test_only_sessions_active_at_capture_receive_the_values(dev, tmp_path):
    s0 = proton.start(str(tmp_path / "a"), backend="mock")
    s1 = proton.start(str(tmp_path / "b"), backend="mock")
    x = DeviceTensor(2.0)
    proton.deactivate(s1)
    g0 = dev.capture(metric_scope("foo_with_metric", {"m": x}))
    with proton.scope("session0_replay"):
        dev.replay(g0)
    proton.activate(s1)
    with proton.scope("both_replay"):
        dev.replay(g0)
    proton.finalize()
    a, _ = read_tree(tmp_path / "a.hatchet")
    b, _ = read_tree(tmp_path / "b.hatchet")
    assert find(a, "session0_replay", "<captured_at>", "foo_with_metric")["metrics"]["m"] == 2.0
    assert find(a, "both_replay", "<captured_at>", "foo_with_metric")["metrics"]["m"] == 2.0
    assert not any(c["frame"]["name"] == "both_replay" and c["children"] and
                   any("m" in g["metrics"] for g in c["children"][0]["children"]) for c in b["children"])
    del s0


def test_replayed_metric_kernels_are_named_metric_below_the_metadata_state(dev, tmp_path):
    proton.start(str(tmp_path / "t"), data="trace", backend="mock")
    m = DeviceTensor(1.0)

    def fn():
        with proton.scope("a"):
            with proton.scope("c", metrics={"m1": m}):
                dev.kernel("foo")
    graph = dev.capture(fn)
    with proton.scope("test0"):
        dev.replay(graph)
    proton.finalize()
    import json
    events = json.load(open(tmp_path / "t.chrome_trace"))["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    metric = [e for e in kernels if e["name"] == "<metric>"]
    assert [e["args"]["call_stack"] for e in metric] == [
        ["ROOT", "test0", "<captured_at>", "a", "c", callpath.METADATA_FRAME, "<metric>"]]
    assert not any(e.get("cat") == "metric" and e["tid"] >= 100000 for e in events)


def test_periodic_flushing_writes_each_phase_with_its_own_replays(dev, tmp_path):
    s = proton.start(str(tmp_path / "t"), backend="mock", mode="periodic_flushing:format=hatchet")
    x = DeviceTensor(4.0)
    graph = dev.capture(metric_scope("scope_a", {"flops": x}))
    with proton.scope("test0"):
        for i in range(50):
            if i and i % 10 == 0:
                proton.data.advance_phase(session=s)
            dev.replay(graph)
            if i % 7 == 0:
                dev.mock.flush()
    proton.finalize()
    for p in range(5):
        tree, _ = read_tree(tmp_path / f"t.part_{p}.hatchet")
        assert find(tree, "test0", "<captured_at>", "scope_a")["metrics"]["flops"] == 40.0, p


def test_periodic_flushing_never_syncs_the_device_while_a_graph_is_captured(dev, tmp_path, monkeypatch):
    """A device sync while any thread captures would invalidate that capture (CUDA's global
    capture mode): the closed phase waits for the capture's end, then is written whole."""
    syncs = []
    monkeypatch.setattr(tensor_metrics, "synchronize", lambda: syncs.append(graph_metrics.G.capturing))
    s = proton.start(str(tmp_path / "t"), backend="mock", mode="periodic_flushing:format=hatchet")
    graph = dev.capture(metric_scope("scope_a", {"flops": DeviceTensor(4.0)}))
    with proton.scope("test0"):
        for _ in range(3):
            dev.replay(graph)
    proton.data.advance_phase(session=s)

    def second_capture():        # another graph is being captured when the collector flushes
        with proton.scope("scope_b", {"flops": DeviceTensor(1.0)}):
            dev.kernel("k")
        dev.mock.flush()
        assert not (tmp_path / "t.part_0.hatchet").exists()
    dev.capture(second_capture)
    dev.kernel("after")          # the next batch, after the capture ended
    dev.mock.flush()
    assert syncs and not any(syncs)
    tree, _ = read_tree(tmp_path / "t.part_0.hatchet")
    assert find(tree, "test0", "<captured_at>", "scope_a")["metrics"]["flops"] == 12.0
    proton.finalize()


def test_a_capture_that_reuses_a_destroyed_graphs_handle_keeps_each_graphs_replays_apart(dev, tmp_path):
    """torch destroys a captured graph once it is instantiated, so the next capture may get the
    same CUgraph handle: each executable graph still adds its own metrics at its own replays."""
    proton.start(str(tmp_path / "t"), backend="mock")
    first = dev.capture(metric_scope("first", {"m": DeviceTensor(1.0)}))
    second = dev.capture(metric_scope("second", {"m": DeviceTensor(10.0)}), handle=first.handle)
    with proton.scope("a"):
        for _ in range(3):
            dev.replay(first)
    with proton.scope("b"):
        dev.replay(second)
        dev.replay(first)
    proton.finalize()
    tree, _ = read_tree(tmp_path / "t.hatchet")
    assert find(tree, "a", "<captured_at>", "first")["metrics"]["m"] == 3.0
    assert find(tree, "b", "<captured_at>", "first")["metrics"]["m"] == 1.0
    assert find(tree, "b", "<captured_at>", "second")["metrics"]["m"] == 10.0


def test_memory_grows_with_the_distinct_contexts_not_with_the_replays(dev, tmp_path):
    proton.start(str(tmp_path / "t"), backend="mock")
    x = DeviceTensor(1)
    graph = dev.capture(metric_scope("s", {"n": x}))
    (book,) = graph_metrics.books.values()
    region = book.slots[0].region
    size = region.size
    with proton.scope("loop"):
        for _ in range(10_000):
            dev.replay(graph)
    used = [b for b in book.banks if b is not None]
    assert len(used) == 1 and used[0].replays == 10_000
    assert region.size == size
    proton.finalize()
    tree, _ = read_tree(tmp_path / "t.hatchet")
    assert find(tree, "loop", "<captured_at>", "s")["metrics"]["n"] == 10_000


def test_contexts_beyond_the_banks_merge_into_the_last_bank(dev, tmp_path, monkeypatch):
    monkeypatch.setenv("PROTON_CTYPES_GRAPH_METRIC_BANKS", "2")
    proton.start(str(tmp_path / "t"), backend="mock")
    x = DeviceTensor(1)
    graph = dev.capture(metric_scope("s", {"n": x}))
    before = graph_metrics.stats["merged_replays"]
    for name in ("r0", "r1", "r2"):
        with proton.scope(name):
            dev.replay(graph)
    assert graph_metrics.stats["merged_replays"] == before + 1
    proton.finalize()
    tree, _ = read_tree(tmp_path / "t.hatchet")
    assert find(tree, "r0", "<captured_at>", "s")["metrics"]["n"] == 1
    assert find(tree, "r1", "<captured_at>", "s")["metrics"]["n"] == 2


def test_a_flush_adds_only_what_replays_added_since_the_previous_one(dev, tmp_path):
    s = proton.start(str(tmp_path / "t"), backend="mock")
    x = DeviceTensor(3)
    graph = dev.capture(metric_scope("s", {"n": x}))
    (book,) = graph_metrics.books.values()
    with proton.scope("a"):
        dev.replay(graph)
    tensor_metrics.drain()
    region = book.slots[0].region.copy()
    tensor_metrics.drain()                              # nothing new: nothing added, nothing reset
    assert (book.slots[0].region == region).all()
    with proton.scope("later"):
        dev.replay(graph)
    tensor_metrics.drain()
    assert sum(b is not None for b in book.banks) == 1    # "a"'s bank ran out and was freed
    proton.finalize(s)
    tree, _ = read_tree(tmp_path / "t.hatchet")
    assert find(tree, "a", "<captured_at>", "s")["metrics"]["n"] == 3
    assert find(tree, "later", "<captured_at>", "s")["metrics"]["n"] == 3


def test_host_numbers_given_during_capture_are_added_per_replay(dev, tmp_path):
    proton.start(str(tmp_path / "t"), backend="mock")

    def fn():
        for _ in range(10):
            with proton.scope("scope_a", metrics={"bytes": 16}):
                dev.kernel("ones")
    fn()                      # eager: added now
    graph = dev.capture(fn)   # captured: added by each replay
    with proton.scope("test0"):
        dev.replay(graph)
        dev.replay(graph)
    proton.finalize()
    tree, _ = read_tree(tmp_path / "t.hatchet")
    assert find(tree, "scope_a")["metrics"]["bytes"] == 160
    scope_a = find(tree, "test0", "<captured_at>", "scope_a")
    assert scope_a["metrics"]["bytes"] == 320
    assert "count" not in scope_a["metrics"]
    assert find(scope_a, "ones")["metrics"]["count"] == 20


def test_launch_metadata_metrics_of_a_captured_kernel_land_on_its_node_per_replay(dev, tmp_path):
    from proton_ctypes.hooks import HookManager, LaunchHook
    from test_launch_hook import FakeLazyDict
    LaunchHook().configure()
    x_sum = DeviceTensor(4.0)
    proton.start(str(tmp_path / "t"), backend="mock", hook="triton")

    def fn():
        for _ in range(10):
            md = FakeLazyDict("foo", lambda name: {"name": "foo_test", "bytes": 16, "flops": x_sum})
            HookManager.enter(md)
            dev.kernel("foo")
            HookManager.exit(md)
    graph = dev.capture(fn)
    with proton.scope("test0"):
        dev.replay(graph)
    proton.finalize()
    tree, _ = read_tree(tmp_path / "t.hatchet")
    cap = find(tree, "test0", "<captured_at>")
    foo_test = find(cap, "foo_test")
    assert (foo_test["metrics"]["bytes"], foo_test["metrics"]["flops"], foo_test["metrics"]["count"]) == (160, 40.0, 10)
    assert find(cap, callpath.METADATA_FRAME, "foo", "<metric>")["metrics"]["count"] == 10


KERNEL_RUN = """
import numpy as np, torch
from proton_ctypes.core import graph_metric_kernel as gmk, graph_metrics
word = torch.zeros(1, dtype=torch.int64)
floats = torch.zeros(1 + 3 * 2, dtype=torch.int64)   # count, then the dump and two banks
ints = torch.zeros(1 + 3 * 3, dtype=torch.int64)
for r, bank in enumerate((1, 2, 2)):                  # replay 0 -> bank 1, replays 1 and 2 -> bank 2
    word[0] = bank
    gmk.launch_triton(floats, word, torch.tensor([0.5, 1.5]) * (r + 1), 2, True)
    gmk.launch_triton(ints, word, torch.tensor([1, 2, 3], dtype=torch.int32), 3, False)
print(floats[0].item(), floats[1:].numpy().view(np.float64).tolist(), ints.tolist())
"""


def _interpreter_takes_scalar_range_bounds() -> bool:
    """triton 3.6's interpreter turns a scalar argument used as a ``range`` bound into an int
    with ``int(array)``, which numpy 2 refuses for its 1-element arrays (3.7 fixed it)."""
    triton = pytest.importorskip("triton")
    return not (triton.__version__.startswith("3.6.") and int(np.__version__.split(".")[0]) >= 2)


def test_the_captured_kernel_counts_its_runs_and_adds_each_into_the_bank_its_word_names(tmp_path):
    pytest.importorskip("torch")
    if not _interpreter_takes_scalar_range_bounds():
        pytest.skip("triton 3.6's interpreter cannot run a loop bounded by a scalar argument under numpy 2")
    import os
    import subprocess
    import sys
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=repo, PYTHONWARNINGS="ignore")
    r = subprocess.run([sys.executable, "-c", KERNEL_RUN], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split("\n")[-2] == "3 [0.0, 0.0, 0.5, 1.5, 2.5, 7.5] [3, 0, 0, 0, 1, 2, 3, 2, 4, 6]"


def test_replays_nobody_reported_go_to_the_dump_bank_not_to_a_later_context(dev, tmp_path):
    proton.start(str(tmp_path / "t"), backend="mock")
    x = DeviceTensor(5)
    graph = dev.capture(metric_scope("s", {"n": x}))
    dev.mock.graph_hooks, hooks = None, dev.mock.graph_hooks     # replays the engine does not see
    for _ in range(3):
        dev.replay(graph)
    dev.mock.graph_hooks = hooks
    tensor_metrics.drain()          # a flush: the host's replay count follows the device's again
    with proton.scope("seen"):
        dev.replay(graph)
    proton.finalize()
    tree, _ = read_tree(tmp_path / "t.hatchet")
    assert find(tree, "seen", "<captured_at>", "s")["metrics"]["n"] == 5


def test_a_replay_from_a_thread_that_never_profiled_follows_the_starting_thread(dev, tmp_path):
    proton.start(str(tmp_path / "t"), backend="mock")
    x = DeviceTensor(2)
    graph = dev.capture(metric_scope("s", {"n": x}))
    with proton.scope("outer"):
        worker = threading.Thread(target=dev.replay, args=(graph,))
        worker.start()
        worker.join()
    proton.finalize()
    tree, _ = read_tree(tmp_path / "t.hatchet")
    s = find(tree, "outer", "<captured_at>", "s")
    assert s["metrics"]["n"] == 2
    assert find(s, callpath.METADATA_FRAME, "<metric>")["metrics"]["count"] == 1   # its kernel, alike


def test_a_replay_still_queued_at_a_flush_is_added_at_the_next_to_its_own_context(dev, tmp_path):
    proton.start(str(tmp_path / "t"), backend="mock")
    x = DeviceTensor(3)
    graph = dev.capture(metric_scope("s", {"n": x}))
    with proton.scope("a"):
        dev.replay(graph)
    with proton.scope("b"):
        dev.mock.graph_launch(graph.handle)   # launched (the callback ran) ...
    x.a[...] = 4
    tensor_metrics.drain()                     # ... but not run yet when a flush reads
    with proton.scope("c"):
        dev.run(graph)                         # runs now, then one more replay elsewhere
        dev.replay(graph)
    proton.finalize()
    tree, _ = read_tree(tmp_path / "t.hatchet")
    assert find(tree, "a", "<captured_at>", "s")["metrics"]["n"] == 3
    assert find(tree, "b", "<captured_at>", "s")["metrics"]["n"] == 4
    assert find(tree, "c", "<captured_at>", "s")["metrics"]["n"] == 4


def test_a_host_property_given_during_capture_is_set_not_summed(dev, tmp_path):
    proton.start(str(tmp_path / "t"), backend="mock")
    graph = dev.capture(metric_scope("s", {"bytes": 8, "tag(pty)": 3}))
    for _ in range(4):
        dev.replay(graph)
    proton.finalize()
    tree, _ = read_tree(tmp_path / "t.hatchet")
    s = find(tree, "<captured_at>", "s")["metrics"]
    assert (s["bytes"], s["tag"]) == (32, 3)


def test_the_bank_word_is_written_only_when_the_replays_context_changes(dev, tmp_path):
    proton.start(str(tmp_path / "t"), backend="mock")
    x = DeviceTensor(1)
    graph = dev.capture(metric_scope("s", {"n": x}))
    for scope, replays in (("a", 100), ("b", 50), ("a", 30)):
        with proton.scope(scope):
            for _ in range(replays):
                dev.replay(graph)
    proton.finalize()
    tree, _ = read_tree(tmp_path / "t.hatchet")
    assert len(dev.writes) == 3                      # one memset per change of context, none per replay
    assert find(tree, "a", "<captured_at>", "s")["metrics"]["n"] == 130
    assert find(tree, "b", "<captured_at>", "s")["metrics"]["n"] == 50


def test_a_bank_change_on_another_stream_names_the_previous_replays_stream(dev, tmp_path):
    """The writer makes the new stream wait for the previous one (driver: write32_async's after)."""
    proton.start(str(tmp_path / "t"), backend="mock")
    x = DeviceTensor(2)
    graph = dev.capture(metric_scope("s", {"n": x}))
    with proton.scope("a"):
        dev.replay(graph, stream=11)
        dev.replay(graph, stream=11)
    with proton.scope("b"):
        dev.replay(graph, stream=22)
    proton.finalize()
    assert dev.writes == [(11, None), (22, 11)]
    tree, _ = read_tree(tmp_path / "t.hatchet")
    assert find(tree, "a", "<captured_at>", "s")["metrics"]["n"] == 4
    assert find(tree, "b", "<captured_at>", "s")["metrics"]["n"] == 2


#: a stream the previous replay ran on, destroyed since
DESTROYED_STREAM = 0xDEAD


class OrderingDriver:
    """libcuda's memset, event and stream-wait calls as the bank writer makes them."""

    def __init__(self, capturing=()):
        self.capturing = set(capturing)
        self.calls = []

    def cuEventCreate(self, event, flags):
        event._obj.value = 0xE0
        self.calls.append(("create", flags))
        return 0

    def cuEventRecord(self, event, stream):
        self.calls.append(("record", event, stream))
        return 0

    def cuStreamWaitEvent(self, stream, event, flags):
        self.calls.append(("wait", stream, event))
        return 0

    def cuStreamIsCapturing(self, stream, status):
        if stream == DESTROYED_STREAM:
            return 400   # CUDA_ERROR_INVALID_HANDLE
        status._obj.value = 1 if stream in self.capturing else 0
        return 0

    def cuGetErrorString(self, code, text):
        text._obj.value = b"invalid resource handle"
        return 0

    def cuMemsetD32Async(self, address, value, count, stream):
        self.calls.append(("memset", address, value, count, stream))
        return 0


class Word:
    def data_ptr(self):
        return 0xD000


@pytest.mark.parametrize("capturing, expected", [
    ((), [("memset", 0xD000, 3, 1, 5), ("create", 2), ("record", 0xE0, 5), ("wait", 6, 0xE0),
          ("memset", 0xD000, 4, 1, 6), ("memset", 0xD000, 5, 1, 6),
          ("record", 0xE0, 6), ("wait", 0, 0xE0), ("memset", 0xD000, 1, 1, 0)]),
    ((5,), [("memset", 0xD000, 3, 1, 5), ("create", 2), ("memset", 0xD000, 4, 1, 6),
            ("memset", 0xD000, 5, 1, 6), ("record", 0xE0, 6), ("wait", 0, 0xE0), ("memset", 0xD000, 1, 1, 0)]),
])
def test_the_bank_writer_queues_a_memset_behind_the_previous_replays_stream(capturing, expected):
    """A new stream first waits for the previous one (an event), unless that one is being captured;
    the legacy stream (None) is handle 0."""
    from proton_ctypes.backends.nvidia import driver as cuda_driver
    fake = OrderingDriver(capturing)
    saved = cuda_driver._driver[:]
    try:
        cuda_driver.driver(lib=fake)
        write = gmk._bank_writer(Word())
        write(3, 5, None)
        write(4, 6, 5)
        write(5, 6, 6)
        write(1, None, 6)
    finally:
        cuda_driver._driver[:] = saved
    assert fake.calls == expected


def test_replays_alternating_between_two_contexts_share_two_banks(dev, tmp_path, monkeypatch):
    monkeypatch.setitem(graph_metrics.stats, "merged_replays", 0)
    monkeypatch.setenv("PROTON_CTYPES_GRAPH_METRIC_BANKS", "4")
    proton.start(str(tmp_path / "t"), backend="mock")
    x = DeviceTensor(1)
    graph = dev.capture(metric_scope("s", {"n": x}))
    for i in range(200):
        with proton.scope(f"ctx{i % 2}"):
            dev.replay(graph)
    proton.finalize()
    tree, _ = read_tree(tmp_path / "t.hatchet")
    assert graph_metrics.stats["merged_replays"] == 0          # 4 banks were enough
    assert len(dev.writes) == 200                              # the bank word changes at every replay
    for ctx in ("ctx0", "ctx1"):
        assert find(tree, ctx, "<captured_at>", "s")["metrics"]["n"] == 100


def test_the_bank_is_still_written_when_the_previous_replays_stream_is_gone():
    from proton_ctypes.backends.nvidia import driver as cuda_driver
    fake = OrderingDriver()
    saved = cuda_driver._driver[:]
    try:
        cuda_driver.driver(lib=fake)
        gmk._bank_writer(Word())(2, 5, DESTROYED_STREAM)
    finally:
        cuda_driver._driver[:] = saved
    assert fake.calls == [("create", 2), ("memset", 0xD000, 2, 1, 5)]
