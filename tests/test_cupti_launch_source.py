"""Where a kernel's launch (thread, host time) comes from when asked for the latency timestamps
(``PROTON_CTYPES_LAUNCH_SOURCE=kernel``): the kernel record itself where CUPTI can say it
(per-thread buffers + ``queued`` latency timestamps), launch-API records otherwise.  The default
source, launch positions, is ``test_cupti_launch_positions.py``'s."""
import os
import sys
import threading

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from conftest import child_names, find, read_tree  # noqa: E402
from fakes.fake_cupti import (ATTR_PER_THREAD_ACTIVITY_BUFFER, DOMAIN_DRIVER, DOMAIN_RUNTIME,  # noqa: E402
                              KIND_DRIVER, KIND_KERNEL, KIND_RUNTIME, FakeCupti, started_backend)

import proton_ctypes as proton  # noqa: E402
from proton_ctypes.backends.nvidia.activity import LAUNCH_SOURCE_ENV  # noqa: E402
from proton_ctypes.backends.nvidia.cbids import DRIVER_GRAPH_LAUNCH_CBIDS  # noqa: E402


@pytest.fixture(autouse=True)
def timestamps(monkeypatch):
    """Every test here asks for the latency timestamps (the launch source ``kernel``)."""
    monkeypatch.setenv(LAUNCH_SOURCE_ENV, "kernel")


def test_the_kernel_source_switches_on_kernel_records_alone_with_latency_timestamps():
    backend, fake, sink = started_backend()
    try:
        assert backend.launch_source == "kernel"
        assert fake.kinds == {KIND_KERNEL} and fake.latency and fake.per_thread_buffers
        assert fake.calls["cuptiActivitySetAttribute"] == 1
        api_callbacks = {(domain, cbid) for domain, cbid in fake.enabled_callbacks
                         if domain in (DOMAIN_DRIVER, DOMAIN_RUNTIME)}
        # the driver's graph launches only: no callback per kernel launch, one call (ENTER and
        # EXIT) per replay, none for the runtime's cudaGraphLaunch around it
        assert api_callbacks == {(DOMAIN_DRIVER, cbid) for cbid in DRIVER_GRAPH_LAUNCH_CBIDS}
    finally:
        backend.stop()
    assert not fake.kinds and not fake.latency


def test_kernels_take_the_thread_of_their_buffer_and_their_queued_time(cupti):
    fake, _ = cupti
    proton.start("own", backend="cupti")
    barrier = threading.Barrier(4)

    def work(i):
        with proton.scope(f"t{i}"):
            for n in range(50):
                fake.launch("k")
                if n == 0:
                    barrier.wait()      # every thread holds a buffer of its own at once
            with proton.scope("inner"):
                fake.launch("j")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    proton.finalize()
    root = read_tree("own.hatchet")[0]
    assert sorted(child_names(root)) == ["t0", "t1", "t2", "t3"]
    for i in range(4):
        scope = find(root, f"t{i}")
        assert find(scope, "k")["metrics"]["count"] == 50
        assert find(find(scope, "inner"), "j")["metrics"]["count"] == 1
    assert fake.calls.get("cuptiActivityEnableDriverApi", 0) == 0      # no deny list: no API kind at all


def test_graph_replays_take_their_launch_from_the_graph_launch_callback(cupti):
    fake, backend = cupti
    proton.start("graphs", backend="cupti")
    with proton.scope("capture"):
        graph = fake.instantiate(fake.capture(["a", "b"]))

    def replay():
        with proton.scope("replay"):
            for _ in range(3):
                fake.replay(graph)

    worker = threading.Thread(target=replay)
    worker.start()
    worker.join()
    proton.finalize()
    root = read_tree("graphs.hatchet")[0]
    replayed = find(root, "replay")
    assert replayed is not None
    counts = {}
    stack = [replayed]
    while stack:
        node = stack.pop()
        if node["frame"]["name"] in ("a", "b"):
            counts[node["frame"]["name"]] = counts.get(node["frame"]["name"], 0) + node["metrics"]["count"]
        stack.extend(node["children"])
    assert counts == {"a": 3, "b": 3}
    assert backend.collector.joiner.stats["graph_launches"] >= 3


@pytest.mark.parametrize("how", ["no latency timestamps", "environment", "external correlation"])
def test_launch_api_records_are_the_fallback(how, monkeypatch):
    fake = FakeCupti(latency_timestamps=how != "no latency timestamps")
    if how == "environment":
        monkeypatch.setenv(LAUNCH_SOURCE_ENV, "api")
    if how == "external correlation":
        monkeypatch.setenv("PROTON_CTYPES_ATTRIBUTION", "extcorr")
    backend, fake, sink = started_backend(fake)
    try:
        assert backend.launch_source == "api"
        assert {KIND_KERNEL, KIND_DRIVER, KIND_RUNTIME} <= fake.kinds and not fake.latency
        fake.launch("k")
    finally:
        backend.stop()
    rows = sink.rows()
    assert len(rows) == 1 and rows["tid"][0] == threading.get_native_id()


def test_the_per_thread_attribute_is_set_before_the_buffer_callbacks():
    """CUPTI takes the attribute only before the buffer callbacks and the kinds: the fake refuses
    it afterwards, so a kernel source proves the order."""
    backend, fake, sink = started_backend()
    try:
        assert backend.launch_source == "kernel"
        assert fake._cuptiActivitySetAttribute(ATTR_PER_THREAD_ACTIVITY_BUFFER, None, None) != 0
    finally:
        backend.stop()


def test_a_kernel_without_queued_time_falls_back_to_the_root_of_no_thread():
    """A record CUPTI could not stamp (``queued`` 0, not a graph kernel) is kept, unattributed."""
    backend, fake, sink = started_backend()
    fake.launch("stamped")
    fake.latency = False                 # as if CUPTI could not collect the queued time
    fake.launch("unstamped")
    backend.stop()
    rows = sink.rows()
    assert len(rows) == 2
    tids = dict(zip(rows["corr"].tolist(), rows["tid"].tolist()))
    assert sorted(tids.values()) == sorted([threading.get_native_id(), -1])
    assert np.all(rows["launch_ns"] > 0)


def test_per_thread_buffers_switched_off_on_request_take_the_launch_api_records(monkeypatch):
    """The diagnostic PROTON_CTYPES_PER_THREAD_BUFFERS=0: one buffer queue, API records."""
    from proton_ctypes.backends.nvidia.activity import PER_THREAD_BUFFERS_ENV
    monkeypatch.setenv(PER_THREAD_BUFFERS_ENV, "0")
    backend, fake, sink = started_backend()
    try:
        assert backend.launch_source == "api"
        assert not fake.per_thread_buffers
        assert KIND_DRIVER in fake.kinds and KIND_RUNTIME in fake.kinds
        fake.launch("k")
    finally:
        backend.stop()
    assert len(sink.rows()) == 1
