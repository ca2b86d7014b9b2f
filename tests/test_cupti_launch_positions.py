"""Launch positions (``PROTON_CTYPES_LAUNCH_SOURCE=position``): kernels placed among their thread's
scope edges by where CUPTI wrote their records, with no launch-API record and no latency timestamp.

The fake libcupti writes a kernel's record into its launching thread's buffer during the launch
(``defer_kernels``: marked incomplete, completed later), as measured on an H100
(``tests/gpu/probe_buffer_fill.py``).
"""
import ctypes
import os
import sys
import threading
import time
import warnings

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from conftest import SMALL_BUFFER, flat, on_a_thread, read_tree  # noqa: E402
from fakes.fake_cupti import FakeCupti, FakeDriver  # noqa: E402

import proton_ctypes as proton  # noqa: E402
from proton_ctypes.backends import select  # noqa: E402
from proton_ctypes.backends.cupti import CuptiBackend  # noqa: E402
from proton_ctypes.backends.nvidia import activity  # noqa: E402
from proton_ctypes.backends.nvidia.buffers import BufferPool  # noqa: E402
from proton_ctypes.backends.nvidia.positions import MARK_AFTER_NS, LaunchPositions  # noqa: E402
from proton_ctypes.core import clock  # noqa: E402

#: a kernel that starts on the GPU long after its launch (a busy queue)
LATE_NS = 50_000_000


def counts(path):
    return {k: m["count"] for k, m in flat(read_tree(path)[0]).items() if "count" in m}


def test_kernels_land_in_the_scope_they_were_launched_in_without_timestamps_or_api_records(positioned, tmp_path):
    fake, backend = positioned
    sid = proton.start(str(tmp_path / "one"), backend="cupti")
    assert backend.launch_source == activity.LAUNCH_FROM_POSITION
    assert not fake.latency and fake.kinds == {10}
    assert clock.current() is backend.edge_clock()
    for _ in range(3):
        fake.launch("outside", kernel_delay_ns=LATE_NS)
    for i in range(40):
        with proton.scope("step"):
            with proton.scope("a"):
                for _ in range(5):
                    fake.launch("ka", kernel_delay_ns=LATE_NS)
            with proton.scope("b"):
                fake.launch("kb", kernel_delay_ns=LATE_NS)
                fake.launch("kb", kernel_delay_ns=LATE_NS)
                proton.enter_state("st")
                fake.launch("ks", kernel_delay_ns=LATE_NS)
                proton.exit_state()
        if i % 7 == 0:
            fake.complete_kernels()
            proton.data.get(sid)        # a flush mid-run: buffers handed back half full
    fake.launch("outside", kernel_delay_ns=LATE_NS)
    proton.finalize()
    assert clock.current() is time.time_ns
    assert counts(tmp_path / "one.hatchet") == {"outside": 4, "step/a/ka": 200, "step/b/kb": 80,
                                                "step/b/st/ks": 40}
    assert backend.collector.joiner.stats["api_records"] == 0


def test_every_thread_is_placed_by_its_own_buffer(positioned, tmp_path):
    fake, backend = positioned
    proton.start(str(tmp_path / "threads"), backend="cupti")
    barrier = threading.Barrier(4)

    def run(i):
        barrier.wait()
        for j in range(120):
            with proton.scope(f"t{i}"):
                with proton.scope("inner" if j % 2 else "other"):
                    fake.launch(f"k{i}", kernel_delay_ns=LATE_NS)
                fake.launch(f"k{i}", kernel_delay_ns=LATE_NS)
            if j % 40 == 0:
                fake.complete_kernels()

    workers = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    proton.finalize()
    expected = {}
    for i in range(4):
        expected.update({f"t{i}/inner/k{i}": 60, f"t{i}/other/k{i}": 60, f"t{i}/k{i}": 120})
    assert counts(tmp_path / "threads.hatchet") == expected


def test_a_thread_without_scopes_is_placed_by_the_context_changes_of_others(positioned, tmp_path):
    """A launching thread that never enters a scope writes no mark of its own: the session's
    deactivation and activation mark every thread's position, so its kernels launched while the
    session was off are not counted and the others are."""
    fake, backend = positioned
    sid = proton.start(str(tmp_path / "switch"), backend="cupti")
    step = threading.Event()
    launched = []

    def launcher():
        for phase in range(3):           # on, off, on: 10 launches in each
            for _ in range(10):
                fake.launch("bg", kernel_delay_ns=LATE_NS)
            launched.append(phase)
            step.wait()
            step.clear()

    t = threading.Thread(target=launcher)
    t.start()
    for action in (proton.deactivate, proton.activate):
        while len(launched) < (1 if action is proton.deactivate else 2):
            time.sleep(0.001)
        action(sid)
        step.set()
    while len(launched) < 3:
        time.sleep(0.001)
    step.set()
    t.join()
    proton.finalize()
    assert counts(tmp_path / "switch.hatchet") == {"bg": 20}


def test_a_session_started_later_does_not_take_the_kernels_launched_before_it(positioned, tmp_path):
    fake, backend = positioned
    proton.start(str(tmp_path / "first"), backend="cupti")
    go, ready = threading.Event(), threading.Event()

    def launcher():
        for _ in range(6):
            fake.launch("before", kernel_delay_ns=LATE_NS)
        ready.set()
        go.wait()
        for _ in range(4):
            fake.launch("after", kernel_delay_ns=LATE_NS)

    t = threading.Thread(target=launcher)
    t.start()
    ready.wait()
    second = proton.start(str(tmp_path / "second"), backend="cupti")
    go.set()
    t.join()
    proton.finalize(second)
    proton.finalize()
    assert counts(tmp_path / "second.hatchet") == {"after": 4}
    assert counts(tmp_path / "first.hatchet") == {"before": 6, "after": 4}


def test_replayed_graph_kernels_keep_the_replaying_threads_scope(positioned, tmp_path):
    fake, backend = positioned
    proton.start(str(tmp_path / "graph"), backend="cupti")
    with proton.scope("capture"):
        graph = fake.capture(["g1", "g2"])
    exe = fake.instantiate(graph)
    for _ in range(3):
        with proton.scope("replay"):
            fake.replay(exe)
            fake.launch("single")
    proton.finalize()
    got = counts(tmp_path / "graph.hatchet")
    assert got["replay/single"] == 3
    assert {k: v for k, v in got.items() if k.startswith("replay/<captured_at>")} == {
        "replay/<captured_at>/capture/g1": 3, "replay/<captured_at>/capture/g2": 3}


def test_a_record_size_other_than_the_tables_switches_to_timestamps_with_one_warning(monkeypatch, tmp_path):
    monkeypatch.setenv(activity.LAUNCH_SOURCE_ENV, activity.LAUNCH_FROM_POSITION)
    fake = FakeCupti(record_size=232)
    backend = CuptiBackend(lib=fake, driver=FakeDriver(fake), buffer_bytes=SMALL_BUFFER)
    select.register("cupti", lambda: backend)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            sid = proton.start(str(tmp_path / "odd"), backend="cupti")
            fake.launch("first")
            proton.data.get(sid)
        assert fake.latency
        assert sum("launch positions" in str(w.message) for w in caught) == 1
        for _ in range(5):
            with proton.scope("s"):
                fake.launch("k")
        proton.finalize()
        assert counts(tmp_path / "odd.hatchet")["s/k"] == 5
    finally:
        select.unregister("cupti")


def test_the_marks_stay_bounded_over_a_long_run(positioned, tmp_path):
    fake, backend = positioned
    sid = proton.start(str(tmp_path / "long"), backend="cupti")
    sizes = []
    for round_ in range(20):
        for _ in range(200):
            with proton.scope("layer"):
                fake.launch("k")
        fake.complete_kernels()
        proton.data.get(sid)
        sizes.append(sum(len(st.marks) // 2 + len(st.snaps) + len(st.kept)
                         for st in backend.collector.positions.threads.values()))
    proton.finalize()
    assert counts(tmp_path / "long.hatchet") == {"layer/k": 4000}
    assert max(sizes[5:]) <= max(sizes[:5]) and max(sizes) < 2 * SMALL_BUFFER // 216 + 8


def test_a_buffer_parsed_while_still_its_threads_current_one_is_not_handed_to_another(positioned, tmp_path):
    fake, backend = positioned
    sid = proton.start(str(tmp_path / "retired"), backend="cupti")
    with proton.scope("a"):
        fake.launch("ka")
    proton.data.get(sid)                       # the flush hands the main thread's buffer back
    positions = backend.collector.positions
    mine = positions.threads[threading.get_native_id()].address
    assert mine in positions.retired
    other, _span = on_a_thread(lambda: fake.launch("kt"))
    assert positions.threads[other].address not in (0, mine)
    with proton.scope("b"):
        fake.launch("kb")                     # the main thread's next request recycles its old buffer
    assert mine not in positions.retired
    proton.finalize()
    assert counts(tmp_path / "retired.hatchet") == {"a/ka": 1, "kt": 1, "b/kb": 1}


def test_buffers_are_zeroed_where_they_are_freed_not_inside_a_launch():
    """Every buffer CUPTI gets is all zeros (the edges' scan stops at the first zero slot); the
    memset is paid where a buffer is freed -- the collector's release after the parse, or its
    next trim for a buffer recycled at a launching thread's request -- never by the request,
    which runs inside a launch."""
    size = 64 << 10
    pool = BufferPool(buffer_bytes=size, max_buffers=4)
    pool.use_positions(LaunchPositions(size, 216))

    def request():
        address, length, limit = ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_size_t()
        pool.request_callback(ctypes.byref(address), ctypes.byref(length), ctypes.byref(limit))
        return address.value, pool.array(address.value)

    first, buf = request()
    assert not buf.any()
    buf[:432] = 7                                # two records written
    second, buf2 = request()                     # the thread moved on: ``first`` is not its current one
    pool.release(first)                          # parsed: zeroed here, on the collector's side
    assert not buf.any()
    buf2[:216] = 7
    pool.release(second)                         # still the thread's current buffer: retired
    third, buf3 = request()                      # recycles ``second`` inside the launch ...
    assert buf2.any()                            # ... without zeroing it there
    pool.trim()                                  # the collector's next round zeroes it
    assert not buf2.any()
    assert third == first and not buf3.any()
    again = [request() for _ in range(2)]
    assert second in {a for a, _ in again} and not any(b.any() for _, b in again)


def test_the_python_context_keeps_its_launch_callbacks_under_the_position_switch(positioned, tmp_path):
    fake, backend = positioned
    proton.start(str(tmp_path / "py"), backend="cupti", context="python")
    assert backend.launch_source == activity.LAUNCH_FROM_KERNEL
    assert backend.edge_clock() is None
    proton.finalize()


def _marks(positions, tid, marks, snaps, last):
    from proton_ctypes.backends.nvidia.positions import ThreadPositions
    st = ThreadPositions(tid)
    st.marks = [x for mark in marks for x in mark]
    st.snaps = list(snaps)
    st.t, st.q = last
    positions.threads[tid] = st


def test_a_kernel_takes_the_latest_mark_at_or_before_its_position_plus_its_records_since_the_mark():
    positions = LaunchPositions(1 << 20, 216)
    step = 216 // 4
    # the thread's own marks, another thread's snapshots (out of time order), one pending edge
    _marks(positions, 7, [(100, 0), (300, 2 * step)], [(250, 2 * step), (50, step)], last=(900, 5 * step))
    at = np.array([0, step, 2 * step, 4 * step, 5 * step])
    got = positions.launch_times(positions.marks_of(7), at)
    assert got.tolist() == [100 + MARK_AFTER_NS, 100 + MARK_AFTER_NS, 300 + MARK_AFTER_NS,
                            300 + MARK_AFTER_NS + 2, 900 + MARK_AFTER_NS]
    assert positions.marks_of(8) is None
    _marks(positions, 9, [(100, 3 * step)], [], last=(200, 4 * step))
    assert positions.launch_times(positions.marks_of(9), np.array([step, 3 * step])).tolist() == [
        0, 100 + MARK_AFTER_NS]


def test_each_views_clock_is_bound_to_its_own_thread(positioned, tmp_path):
    """A view logs with the edge clock bound to its thread's positions (no thread-local lookup
    per entry); a view made by another thread for this one (a bridge) keeps the shared clock,
    which marks the calling thread only."""
    from proton_ctypes.core.threads import tls
    fake, backend = positioned
    proton.start(str(tmp_path / "bound"), backend="cupti")
    positions = backend.collector.positions
    with proton.scope("a"):
        mine = tls.ctx.view.now
    seen = []
    other, _span = on_a_thread(lambda: seen.append(_view_clock_of_this_thread()))
    theirs = seen[0]
    assert mine is not backend.edge_clock() and theirs is not mine
    me = positions.threads[threading.get_native_id()]
    assert mine.__closure__[0].cell_contents is me
    assert theirs.__closure__[0].cell_contents is positions.threads[other]
    assert clock.for_thread(other) is backend.edge_clock()
    proton.finalize()
    assert clock.for_thread(threading.get_native_id()) is time.time_ns


def _view_clock_of_this_thread():
    from proton_ctypes.core.threads import tls
    with proton.scope("t"):
        return tls.ctx.view.now


def test_the_edge_clock_never_raises_whatever_the_buffer_holds():
    """Records of another size than the scan's step can leave no zero word where the scan looks
    (the collector then switches the timestamps on): the clock still returns the time."""
    positions = LaunchPositions(4096, 216)
    buf = np.zeros(4096, np.uint8)
    positions.on_request(buf.ctypes.data, buf)
    buf[:] = 0xFF
    before = time.time_ns()
    assert before <= positions.clock() <= time.time_ns()
    positions.snapshot(time.time_ns())
    assert positions.clock() > 0
