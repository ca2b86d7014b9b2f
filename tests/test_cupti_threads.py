"""Any number of launching threads: every kernel counted, or the loss said in one line and in the file.

CUPTI keeps one activity buffer per launching thread (its per-thread buffers, on by default);
the fake libcupti does the same (``FakeCupti(per_thread_buffers=True)``), also keeping the
buffer of a thread that ended until a flush, as the worst case.
"""
import json
import threading
import time

import pytest

import proton_ctypes as proton
from conftest import find, read_tree
from fakes.fake_cupti import FakeCupti, FakeDriver, started_backend
from proton_ctypes.backends import select
from proton_ctypes.backends.cupti import CuptiBackend
from proton_ctypes.backends.nvidia import buffers, collector

SMALL_BUFFER = 64 << 10            # ~250 launches per buffer: many buffers in a short test
RECLAIM_WAIT_S = 10                # how long the collector may take to reclaim on a loaded machine


@pytest.fixture
def cupti(request):
    """The CUPTI backend over a fake with per-thread buffers; returns ``(fake, backend)``."""
    fake = FakeCupti()
    backend = CuptiBackend(lib=fake, driver=FakeDriver(fake), buffer_bytes=SMALL_BUFFER,
                           **getattr(request, "param", {}))
    select.register("cupti", lambda: backend)
    yield fake, backend
    proton.finalize()
    select.unregister("cupti")


def _records_per_launch(backend) -> int:
    """A kernel record per launch, plus its launch-API record where those are the launch source."""
    return 2 if backend.launch_source == "api" else 1


def _launch_from_threads(fake, threads: int, launches: int, together: bool = True) -> None:
    """``threads`` threads, each launching ``launches`` kernels inside ``scope("t<i>")``;
    ``together``: all hold a buffer at once (a barrier after each one's first launch)."""
    barrier = threading.Barrier(threads) if together else None

    def run(i):
        with proton.scope(f"t{i}"):
            fake.launch("k")
            if barrier is not None:
                barrier.wait()
            for _ in range(launches - 1):
                fake.launch("k")
    pool = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()


def _counts(root, threads):
    return [find(root, f"t{i}", "k")["metrics"]["count"] for i in range(threads)]


@pytest.mark.parametrize("threads", [1, 16, 64])
def test_every_thread_holding_a_buffer_at_once_gets_one_and_nothing_is_lost(cupti, threads, capfd):
    fake, backend = cupti
    proton.start("many", backend="cupti")
    _launch_from_threads(fake, threads, 300)
    peak = backend.pool.peak_outstanding
    proton.finalize()
    root = read_tree("many.hatchet")[0]
    assert _counts(root, threads) == [300] * threads
    assert "lost_records" not in root["metrics"]
    assert peak >= threads and backend.pool.refused == 0 and backend.pool.spared == 0
    assert "misses data" not in capfd.readouterr().err


def test_trace_data_from_many_threads_keeps_every_kernel(cupti):
    fake, _ = cupti
    proton.start("many", backend="cupti", data="trace")
    _launch_from_threads(fake, 32, 100)
    proton.finalize()
    with open("many.chrome_trace") as f:
        doc = json.load(f)
    assert sum(1 for e in doc["traceEvents"] if e.get("cat") == "kernel") == 3200
    assert "otherData" not in doc


def test_threads_that_come_and_go_lose_nothing_and_their_buffers_come_back(cupti, monkeypatch):
    fake, backend = cupti
    monkeypatch.setattr(collector, "RECLAIM_INTERVAL_S", 0.0)
    monkeypatch.setattr(collector, "IDLE_WAIT_S", 0.01)
    python_threads = 6                           # this test's threads, whatever earlier tests left running
    monkeypatch.setattr(threading, "active_count", lambda: python_threads)
    proton.start("churn", backend="cupti")
    for wave in range(30):                       # 30 waves of 4 short-lived threads
        _launch_from_threads(fake, 4, 50, together=False)
    # the fake keeps every ended thread's buffer until a flush (120 of them): the collector's
    # reclaiming flush gives them back, however late the busy machine lets it run
    deadline = time.monotonic() + RECLAIM_WAIT_S
    while backend.pool.outstanding > python_threads + collector.RECLAIM_SLACK_BUFFERS and time.monotonic() < deadline:
        time.sleep(0.01)
    settled = backend.pool.outstanding
    proton.finalize()
    root = read_tree("churn.hatchet")[0]
    assert sum(_counts(root, 4)) == 30 * 4 * 50
    assert backend.collector.reclaims > 0
    assert settled <= python_threads + collector.RECLAIM_SLACK_BUFFERS


def test_the_buffer_a_thread_held_when_it_ended_comes_back_at_once_and_its_state_goes(cupti):
    """A thread that ended holds its last buffer with CUPTI until a flush: the collector flushes
    as soon as it learns of the end, however few such buffers are out (a program making threads
    all day would hold one per thread), and forgets the thread's positions and buffer."""
    fake, backend = cupti
    proton.start("ended", backend="cupti")
    for wave in range(10):
        _launch_from_threads(fake, 4, 20, together=False)
        deadline = time.monotonic() + RECLAIM_WAIT_S
        while (backend.pool.outstanding or backend.pool.gone) and time.monotonic() < deadline:
            time.sleep(0.005)
        assert backend.pool.outstanding == 0 and not backend.pool.gone, wave
        positions = backend.collector.positions
        if positions is not None:               # launch positions: the ended threads are forgotten
            assert not set(positions.threads) - {threading.get_native_id()}
    proton.finalize()
    root = read_tree("ended.hatchet")[0]
    assert sum(_counts(root, 4)) == 10 * 4 * 20


def test_a_buffer_a_flush_does_not_give_back_is_asked_for_once_not_every_moment(cupti, monkeypatch):
    fake, backend = cupti
    monkeypatch.setattr(collector, "IDLE_WAIT_S", 0.01)      # the collector looks often
    proton.start("stuck", backend="cupti")
    worker = threading.Thread(target=fake.launch, args=("k",))
    worker.start()
    worker.join()
    stuck = {owner: buf for owner, buf in fake._bufs.items()}      # the ended thread's buffer
    flush = fake.cuptiActivityFlushAll

    def flush_keeping_it(flag):                # a CUPTI that keeps that buffer whatever we ask
        with fake._lock:
            for owner in stuck:
                fake._bufs.pop(owner, None)
        try:
            return flush(flag)
        finally:
            with fake._lock:
                fake._bufs.update(stuck)
    monkeypatch.setattr(fake, "cuptiActivityFlushAll", flush_keeping_it)
    before = backend.collector.reclaims
    time.sleep(20 * collector.RECLAIM_GONE_INTERVAL_S)
    assert backend.collector.reclaims - before <= 1
    monkeypatch.setattr(fake, "cuptiActivityFlushAll", flush)


def test_no_buffer_memory_outlives_the_pool_when_threads_come_and_go(cupti, monkeypatch):
    """What is left of an ended thread (its views, their clock) may wait for the garbage
    collector; its last buffer must not wait with it: the pool's buffers are all the buffer
    memory there is."""
    import gc
    import weakref
    fake, backend = cupti
    made = []
    new_view = buffers.BufferPool._new_view

    def tracked(pool):
        view = new_view(pool)
        made.append(weakref.ref(view))
        return view
    monkeypatch.setattr(buffers.BufferPool, "_new_view", tracked)
    proton.start("memory", backend="cupti")
    gc.disable()                    # the cycles of the ended threads' views stay, as between two passes
    try:
        for wave in range(10):
            _launch_from_threads(fake, 4, 20, together=False)
            deadline = time.monotonic() + RECLAIM_WAIT_S
            while (backend.pool.outstanding or backend.pool.gone) and time.monotonic() < deadline:
                time.sleep(0.005)
        with backend.collector.lock:          # no drain in progress (its locals hold a buffer)
            backend.pool.trim()
            alive = sum(1 for ref in made if ref() is not None)
            assert alive <= backend.pool.allocated, (alive, backend.pool.allocated, len(made))
    finally:
        gc.enable()


@pytest.mark.parametrize("cupti", [{"max_buffers": 4}], indirect=True)
def test_a_forced_ceiling_loses_records_and_says_how_many_in_one_line_and_in_the_file(cupti, capfd):
    fake, backend = cupti
    proton.start("capped", backend="cupti")
    _launch_from_threads(fake, 8, 300)           # 8 threads hold a buffer each: 4 get spares
    proton.finalize()
    root = read_tree("capped.hatchet")[0]
    counted = sum(k["metrics"]["count"] for t in root["children"] for k in t["children"])
    lost_kernels = backend.collector.spare_kernels
    assert lost_kernels > 0 and counted + lost_kernels == 8 * 300
    lost_records = _records_per_launch(backend) * lost_kernels
    assert root["metrics"]["lost_records"] == lost_records
    err = [line for line in capfd.readouterr().err.splitlines() if "proton_ctypes" in line]
    assert err == [f"proton_ctypes: the profile 'capped' misses data: {lost_records} activity records "
                   f"({lost_kernels} of them kernels) found no room under the 0.25 MiB buffer ceiling "
                   f"(raise {buffers.LIMIT_ENV})"]


@pytest.mark.parametrize("cupti", [{"max_buffers": 4}], indirect=True)
def test_a_trace_that_lost_records_says_how_many_in_other_data(cupti):
    fake, backend = cupti
    proton.start("capped", backend="cupti", data="trace")
    _launch_from_threads(fake, 8, 300)
    proton.finalize()
    with open("capped.chrome_trace") as f:
        doc = json.load(f)
    kernels = sum(1 for e in doc["traceEvents"] if e.get("cat") == "kernel")
    lost = backend.collector.spare_kernels
    assert lost > 0 and kernels + lost == 8 * 300
    assert doc["otherData"] == {"lost_records": _records_per_launch(backend) * lost}


def test_the_delivery_watermark_follows_each_threads_oldest_buffer_still_out():
    """A thread's launches older than its oldest buffer still with CUPTI have all been handed over;
    a thread holding no buffer has had all of them handed over (less a margin, for a launch in
    progress)."""
    backend, fake, sink = started_backend()
    margin = collector.DELIVERY_MARGIN_NS
    t_before = time.time_ns()
    idle = []
    launched, done = threading.Event(), threading.Event()

    def launch_once():
        fake.launch("k")
        idle.append(threading.get_native_id())
        launched.set()
        done.wait()      # alive and idle: its partly filled buffer stays out (an ended thread's comes back)

    worker = threading.Thread(target=launch_once)
    worker.start()
    launched.wait()
    t_mid = time.time_ns()
    fake.launch("k")
    backend.collector.drain(hold=True)
    default, per_thread = backend.delivered()
    assert set(per_thread) == {idle[0], threading.get_native_id()}
    assert t_before - margin <= per_thread[idle[0]] <= t_mid - margin
    assert per_thread[threading.get_native_id()] >= t_mid - margin
    assert default >= t_mid - margin and max(per_thread.values()) <= default
    done.set()
    worker.join()
    backend.stop()
    default, per_thread = backend.delivered()
    assert per_thread == {} and default >= t_mid - margin
