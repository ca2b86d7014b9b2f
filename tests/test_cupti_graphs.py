"""CUDA graphs: replayed kernels carry the capturing thread and capture time of their original node."""
import os
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from conftest import on_a_thread  # noqa: E402
from fakes.fake_cupti import started_backend  # noqa: E402

from proton_ctypes.tree import strings  # noqa: E402


def test_replayed_kernels_map_through_clones_to_capture_thread_and_time():
    backend, fake, sink = started_backend()
    before = time.time_ns()
    captured = {}

    def capture():
        captured["graph"] = fake.capture(["a", "b", "c"])
        captured["tid"] = threading.get_native_id()

    worker = threading.Thread(target=capture)     # capture on another thread than the replay
    worker.start()
    worker.join()
    after = time.time_ns()
    graph_exec = fake.instantiate(captured["graph"])
    for _ in range(3):
        fake.replay(graph_exec)
    backend.stop()
    rows = sink.rows()
    assert len(rows) == 9
    assert np.all(rows["cap_tid"] == captured["tid"])
    assert np.all((rows["cap_ns"] >= before) & (rows["cap_ns"] <= after))
    assert np.all(rows["tid"] == threading.get_native_id())       # replay-time thread, from cuGraphLaunch
    by_name = {strings.name_of(n): rows["cap_ns"][rows["name_id"] == n] for n in np.unique(rows["name_id"])}
    assert by_name["a"][0] < by_name["b"][0] < by_name["c"][0]    # each node its own capture instant
    assert len(np.unique(rows["corr"])) == 3                      # one correlation id per replay


def test_clones_of_clones_are_followed():
    backend, fake, sink = started_backend()
    graph = fake.capture(["x"])
    exec_once = fake.instantiate(graph)
    exec_twice = fake.instantiate(exec_once)
    fake.replay(exec_twice)
    backend.stop()
    row = sink.rows()[0]
    assert row["cap_tid"] == threading.get_native_id() and row["cap_ns"] > 0


def test_graph_kernels_of_unknown_nodes_have_no_capture_path():
    backend, fake, sink = started_backend()
    graph = fake.capture(["y"])
    backend._hub.created.clear()       # as if captured before start()
    fake.replay(fake.instantiate(graph))
    backend.stop()
    row = sink.rows()[0]
    assert row["cap_tid"] == -1 and row["cap_ns"] == -1 and row["tid"] == threading.get_native_id()


def test_captures_and_replays_reach_the_engine_with_the_captured_graph():
    edges, replays = [], []
    backend, fake, sink = started_backend(graph_hooks=(edges.append, lambda *a: replays.append(a), lambda *a: None))
    graph = fake.capture(["a", "b"])
    assert edges == [True, False]                      # begin at ENTER, end at EXIT
    graph_exec = fake.instantiate(graph)
    fake.replay(graph_exec)
    fake.replay(graph_exec)
    backend.stop()
    assert [r[0] for r in replays] == [graph.handle, graph.handle]   # the exec's source graph, once per replay
    assert all(r[1] == threading.get_native_id() for r in replays)
    assert replays[0][2] < replays[1][2]


def test_each_instantiation_reaches_the_engine_with_its_captured_graph_and_replays_name_the_exec():
    made, replays = [], []
    backend, fake, sink = started_backend(graph_hooks=(lambda begin: None, lambda *a: replays.append(a),
                                                       lambda *a: made.append(a)))
    graph = fake.capture(["a"])
    graph_exec = fake.instantiate(graph)
    fake.replay(graph_exec)
    backend.stop()
    assert len(made) == 1 and made[0][1] == graph.handle       # (exec handle, captured graph)
    assert len(replays) == 1 and replays[0][0] == graph.handle and replays[0][3] == made[0][0]


def test_replays_reach_the_engine_with_their_stream_the_per_thread_default_one_by_its_handle():
    replays = []
    backend, fake, sink = started_backend(graph_hooks=(lambda begin: None, lambda *a: replays.append(a),
                                                       lambda *a: None))
    graph_exec = fake.instantiate(fake.capture(["a"]))
    fake.replay(graph_exec, stream=9)
    fake.replay(graph_exec, stream=0)
    fake.replay(graph_exec, stream=0, per_thread=True)
    backend.stop()
    assert [r[4] for r in replays] == [9, 0, 2]        # 2: CU_STREAM_PER_THREAD


def test_replays_of_graphs_made_before_start_are_not_reported():
    replays = []
    backend, fake, sink = started_backend(graph_hooks=(lambda begin: None, lambda *a: replays.append(a), lambda *a: None))
    graph_exec = fake.instantiate(fake.capture(["a"]))
    backend._hub.exec_graph.clear()                    # as if instantiated before start()
    fake.replay(graph_exec)
    backend.stop()
    assert replays == []


def test_an_exec_named_by_its_own_clone_still_leads_to_the_captured_graph():
    replays = []
    backend, fake, sink = started_backend(graph_hooks=(lambda begin: None, lambda *a: replays.append(a), lambda *a: None))
    fake.exec_names_clone = True
    graph = fake.capture(["a"])
    fake.replay(fake.instantiate(fake.instantiate(graph)))   # a clone of a clone
    backend.stop()
    assert [r[0] for r in replays] == [graph.handle]


def test_a_torch_style_replay_gets_its_thread_and_time_from_the_driver_callback_it_nests():
    """cudaGraphLaunch nests cuGraphLaunch; the kernels carry the id both callbacks see, and only
    the driver's is switched on: one Python call (ENTER, EXIT) per replay, not two."""
    from fakes.fake_cupti import CUDA_GRAPH_LAUNCH, DOMAIN_RUNTIME
    backend, fake, sink = started_backend()
    assert (DOMAIN_RUNTIME, CUDA_GRAPH_LAUNCH) not in fake.enabled_callbacks
    graph_exec = fake.instantiate(fake.capture(["a", "b"]))
    tid, (lo, hi) = on_a_thread(lambda: [fake.replay(graph_exec, api="runtime") for _ in range(3)])
    backend.stop()
    rows = sink.rows()
    assert len(rows) == 6 and backend.stats["join_api_missing"] == 0
    assert backend.stats["join_graph_launches"] == 3                 # one entry per replay
    assert np.all(rows["tid"] == tid)
    assert np.all((rows["launch_ns"] >= lo) & (rows["launch_ns"] <= hi))


def test_replayed_node_ids_resolve_alike_whether_close_together_or_spread_out():
    # node ids near each other are grouped through a table, spread ones (ids of any size) by a
    # sort: the capture thread and time each resolves to are the same, clones followed
    from proton_ctypes.backends.nvidia.callbacks import CallbackHub

    for base in (7, 2**40, 2**63 + 9):     # the last: ids past int64's range
        hub = CallbackHub(lib=None)
        hub.created = {base: (11, 1000), base + 3: (12, 2000), base + 2**33: (13, 3000)}
        hub.cloned = {base + 5: base, base + 6: base + 5, base + 2**34: base + 2**33}
        close = np.array([base, base + 3, base + 5, base + 6, base + 4, base] * 50, dtype=np.uint64)
        spread = np.concatenate([close, np.array([base + 2**34, base + 2**33], dtype=np.uint64)])
        for ids in (close, spread):
            tids, stamps = hub.resolve_graph_nodes(ids)
            for node, tid, stamp in zip(ids.tolist(), tids.tolist(), stamps.tolist()):
                root = node
                while root in hub.cloned:
                    root = hub.cloned[root]
                assert (tid, stamp) == hub.created.get(root, (-1, -1))
