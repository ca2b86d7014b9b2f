"""context="python": a lean driver launch callback stores the call-path node per launch."""
import os
import sys
import threading

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from conftest import on_a_thread  # noqa: E402
from fakes.fake_cupti import started_backend  # noqa: E402

from proton_ctypes.backends.nvidia.cbids import CB_DOMAIN_DRIVER_API, GRAPH_LAUNCH_CBIDS  # noqa: E402


class Counter:
    """A python_context stand-in: returns 100, 101, ... and records the calling threads."""

    def __init__(self):
        self.next = 100
        self.threads = set()

    def __call__(self):
        self.threads.add(threading.get_native_id())
        self.next += 1
        return self.next - 1


def test_triton_like_launches_get_their_node_by_correlation_id():
    context = Counter()
    backend, fake, sink = started_backend(python_context=context)
    for _ in range(5):
        fake.launch("tri", api="driver")
    backend.stop()
    assert sink.rows()["py_node"].tolist() == [100, 101, 102, 103, 104]
    assert context.threads == {threading.get_native_id()}
    assert backend.stats["join_py_by_corr"] == 5


def test_runtime_launches_get_their_node_through_the_nested_driver_callback_by_correlation_id():
    context = Counter()
    backend, fake, sink = started_backend(python_context=context)
    for _ in range(5):
        fake.launch("torch_op", api="runtime")
    backend.stop()
    assert sink.rows()["py_node"].tolist() == [100, 101, 102, 103, 104]
    assert backend.stats["join_py_by_corr"] == 5


def test_kernels_take_thread_and_launch_time_from_their_callback_entry_with_no_latency_timestamps():
    """Stamping each kernel's ``queued`` time costs every launch CPU time; the callback entry
    already holds the launching thread and time."""
    context = Counter()
    backend, fake, sink = started_backend(python_context=context)
    assert not fake.latency

    def launch():
        for _ in range(4):
            fake.launch("tri", api="driver")
            fake.launch("torch_op", api="runtime")
    tid, (lo, hi) = on_a_thread(launch)
    backend.stop()
    rows = sink.rows()
    assert rows["py_node"].tolist() == list(range(100, 108))
    assert np.all(rows["tid"] == tid)
    assert np.all((rows["launch_ns"] >= lo) & (rows["launch_ns"] <= hi))
    assert np.all(np.diff(rows["launch_ns"]) > 0)                     # each its own launch time
    assert backend.stats["join_py_launched"] == 8 and backend.stats["join_api_missing"] == 0


def test_a_cupti_whose_nested_callbacks_number_apart_gets_the_stamps_switched_on_at_once():
    """Should the driver callback inside a runtime launch see an id of its own, the first kernel
    no entry places switches CUPTI's latency timestamps on; from then on kernels are placed by
    thread and time (the ones before go under the root)."""
    from fakes.fake_cupti import FakeCupti
    fake = FakeCupti()
    fake.nested_own_corr = True                  # the callback's correlation id differs from the kernel's
    context = Counter()
    backend, fake, sink = started_backend(fake, python_context=context)
    fake.launch("torch_op", api="runtime")
    backend.flush()
    assert fake.latency
    for _ in range(5):
        fake.launch("torch_op", api="runtime")
    backend.stop()
    assert not fake.latency
    assert sink.rows()["py_node"].tolist() == [-1, 101, 102, 103, 104, 105]
    assert backend.stats["join_py_by_time"] == 5


def test_threads_do_not_steal_each_others_nodes():
    context = Counter()
    backend, fake, sink = started_backend(python_context=context)
    seen = {}

    def worker(name):
        nodes = []
        for _ in range(50):
            nodes.append(context.next)
            fake.launch(name, api="runtime")
        seen[threading.get_native_id()] = nodes

    threads = [threading.Thread(target=worker, args=(f"t{i}",)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    backend.stop()
    rows = sink.rows()
    assert len(rows) == 150 and np.all(rows["py_node"] >= 100)
    assert len(np.unique(rows["py_node"])) == 150


def test_default_context_installs_no_launch_callback():
    """No callback on kernel launches (graph launches only: one per replay, not per kernel)."""
    backend, fake, sink = started_backend()
    assert {cbid for domain, cbid in fake.enabled_callbacks if domain == CB_DOMAIN_DRIVER_API} <= GRAPH_LAUNCH_CBIDS
    fake.launch("k")
    backend.stop()
    assert sink.rows()["py_node"].tolist() == [-1]


def test_graph_replays_take_the_node_of_the_graph_launch():
    context = Counter()
    backend, fake, sink = started_backend(python_context=context)
    graph_exec = fake.instantiate(fake.capture(["a", "b"]))   # capture launches use nodes 100, 101
    fake.replay(graph_exec)                                   # cuGraphLaunch: node 102
    backend.stop()
    assert sink.rows()["py_node"].tolist() == [102, 102]


def test_a_launch_whose_context_is_not_a_node_keeps_the_others_and_gets_none():
    """A python_context that returns something other than a node (None) spoils no other entry."""
    answers = iter([100, None, 102])
    backend, fake, sink = started_backend(python_context=lambda: next(answers))
    for _ in range(3):
        fake.launch("tri", api="driver")
    backend.stop()
    assert sink.rows()["py_node"].tolist() == [100, -1, 102]
