"""The CUPTI backend (over the fake libcupti, real byte layouts) through the whole API:
scope -> kernel records -> join -> tree -> file, as on a GPU (issues 4 and 9)."""
import os
import subprocess
import sys
import threading

import pytest

import proton_ctypes as proton
from conftest import child_names, find, read_tree
from fakes.fake_cupti import FakeCupti, FakeDriver
from proton_ctypes.backends import select
from proton_ctypes.backends.cupti import CuptiBackend


@pytest.fixture
def fake_cupti(request):
    fake = FakeCupti(**getattr(request, "param", {}))
    select.register("cupti", lambda: CuptiBackend(lib=fake, driver=FakeDriver(fake)))
    yield fake
    proton.finalize()
    select.unregister("cupti")


def test_kernels_land_under_scopes_and_states_of_their_thread(fake_cupti):
    proton.start("c", backend="cupti")
    with proton.scope("iteration"):
        with proton.state("optimizer"):
            fake_cupti.launch("add_one")
        fake_cupti.launch("add_one", api="runtime")

        def work():
            with proton.scope("worker"):
                fake_cupti.launch("mul")
        t = threading.Thread(target=work)
        t.start()
        t.join()
    proton.finalize()
    root, dev = read_tree("c.hatchet")
    it = find(root, "iteration")
    assert find(it, "optimizer", "add_one")["metrics"]["count"] == 1
    assert find(it, "add_one")["metrics"]["count"] == 1
    assert find(it, "worker", "mul")["metrics"]["time (ns)"] == 800
    assert root["metrics"] == {"count": 0, "time (ns)": 0}
    assert dev == {"CUDA": {"0": FakeDriver.H200}}


@pytest.mark.parametrize("fake_cupti", [{"clock_offset_ns": 10_000_000}], indirect=True)
def test_clock_disagreement_falls_back_to_external_correlation_with_the_same_tree(fake_cupti):
    with pytest.warns(Warning):
        proton.start("x", backend="cupti")
    assert select.get("cupti").attribution == "extcorr"
    with proton.scope("a"):
        fake_cupti.launch("k1")
        with proton.scope("b"):
            fake_cupti.launch("k2")
        with proton.state("st"):
            fake_cupti.launch("k3")
    fake_cupti.launch("k4")
    proton.finalize()
    root, _ = read_tree("x.hatchet")
    assert find(root, "a", "k1")["metrics"]["count"] == 1
    assert find(root, "a", "b", "k2")["metrics"]["count"] == 1
    assert find(root, "a", "st", "k3")["metrics"]["count"] == 1
    assert find(root, "k4")["metrics"]["count"] == 1


def test_graph_replay_goes_under_captured_at_below_the_replay_scope(fake_cupti):
    proton.start("g", backend="cupti")
    with proton.scope("capture"):
        with proton.scope("captured_a"):
            graph = fake_cupti.capture(["add_one"])
    exe = fake_cupti.instantiate(graph)
    with proton.scope("replays"):
        for _ in range(3):
            fake_cupti.replay(exe)
    proton.finalize()
    root, _ = read_tree("g.hatchet")
    node = find(root, "replays", "<captured_at>", "capture", "captured_a", "add_one")
    assert node["metrics"]["count"] == 3


def test_kernels_on_two_devices_carry_their_device_and_both_are_listed(fake_cupti):
    proton.start("d", backend="cupti")
    with proton.scope("dev0"):
        fake_cupti.launch("k", device=0)
    with proton.scope("dev1"):
        fake_cupti.launch("k", device=1, stream=13)
    proton.finalize()
    root, dev = read_tree("d.hatchet")
    assert find(root, "dev0", "k")["metrics"]["device_id"] == "0"
    assert find(root, "dev1", "k")["metrics"]["device_id"] == "1"
    assert sorted(dev["CUDA"]) == ["0", "1"]


def test_trace_kernel_lanes_are_per_stream(fake_cupti):
    # 3.9: every event has pid 0; a kernel's lane (tid) is 200000 + its stream
    import json
    proton.start("t", backend="cupti", data="trace")
    with proton.scope("a"):
        fake_cupti.launch("k", device=0, stream=7)
        fake_cupti.launch("k", device=1, stream=13)
    proton.finalize()
    doc = json.load(open("t.chrome_trace"))
    lanes = sorted((e["pid"], e["tid"]) for e in doc["traceEvents"] if e.get("cat") == "kernel")
    assert lanes == [(0, 200007), (0, 200013)]


@pytest.mark.parametrize("fake_cupti", [{"drop_records": 3}], indirect=True)
def test_dropped_records_are_reported_at_finalize_in_one_line_and_in_the_file(fake_cupti, capfd):
    proton.start("dr", backend="cupti")
    for _ in range(5):
        fake_cupti.launch("k")
    proton.finalize()
    err = capfd.readouterr().err.splitlines()
    assert err == ["proton_ctypes: the profile 'dr' misses data: 3 activity records dropped by CUPTI"]
    root = read_tree("dr.hatchet")[0]
    assert child_names(root) == ["k"] and root["metrics"]["lost_records"] == 3


#: finalize while the collector thread is delivering a batch (a process of its own: a deadlock
#: would hang it, and the test fails on its timeout instead of hanging the suite)
_DELIVERING_AT_FINALIZE = """
import sys, threading
sys.path.insert(0, sys.argv[1])
import proton_ctypes as proton
from conftest import find, read_tree
from fakes.fake_cupti import FakeCupti, FakeDriver
from proton_ctypes.backends import select
from proton_ctypes.backends.cupti import CuptiBackend
from proton_ctypes.core.session import Session
fake = FakeCupti()
backend = CuptiBackend(lib=fake, driver=FakeDriver(fake))
select.register("cupti", lambda: backend)
sid = proton.start("dl", backend="cupti")
with proton.scope("s"):
    fake.launch("k")
in_sink, drainer, deliver = threading.Event(), [], backend.collector.sink

def sink(batch):
    if threading.current_thread() in drainer:
        in_sink.set()
    deliver(batch)
backend.collector.sink = sink
set_active = Session.set_active

def deactivating(self, on):
    # inside finalize's destroy, under the engine's lock: the collector starts delivering now
    if not on and self.id == sid and not drainer:
        drainer.append(threading.Thread(target=backend.collector.drain, kwargs={"hold": True, "idle": True}))
        drainer[0].start()
        in_sink.wait(5)
    set_active(self, on)
Session.set_active = deactivating
proton.finalize()
root, _ = read_tree("dl.hatchet")
assert in_sink.is_set() and find(root, "s", "k")["metrics"]["count"] == 1
print("ok")
"""


def test_finalize_does_not_wait_forever_on_a_batch_the_collector_is_delivering(tmp_path):
    """The collector thread delivers a batch holding its own lock, and its sink waits for the
    engine's lock; finalize must not hold the engine's lock while it stops the backend (which
    waits for the collector): each would wait for the other, for ever."""
    tests = os.path.dirname(os.path.abspath(__file__))
    try:
        r = subprocess.run([sys.executable, "-c", _DELIVERING_AT_FINALIZE, tests], cwd=tmp_path,
                           capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("finalize and the collector thread wait for each other")
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


def test_cupti_is_detached_only_when_the_last_session_using_it_ends(fake_cupti):
    first = proton.start("first", backend="cupti")
    proton.start("second", backend="cupti")
    with proton.scope("s"):
        fake_cupti.launch("both")
    proton.finalize(first)
    assert fake_cupti.calls.get("cuptiFinalize", 0) == 0      # the second session still uses CUPTI
    with proton.scope("s"):
        fake_cupti.launch("second_only")
    proton.finalize()
    assert fake_cupti.calls["cuptiFinalize"] == 1
    assert child_names(find(read_tree("first.hatchet")[0], "s")) == ["both"]
    assert sorted(child_names(find(read_tree("second.hatchet")[0], "s"))) == ["both", "second_only"]
    proton.start("third", backend="cupti")                     # attached afresh
    fake_cupti.launch("third")
    proton.finalize()
    assert fake_cupti.calls["cuptiFinalize"] == 2
    assert child_names(read_tree("third.hatchet")[0]) == ["third"]
