"""The scope logs stay bounded over a long run without a user flush (core/retention.py), and
trimming them never loses or misattributes a kernel: late (held-back) deliveries, graph
replays of an old capture, several threads, a session deactivated and reactivated midway,
a thread that launches without scopes of its own.

The mock backend stands in for CUPTI: ``timed_flush`` is the collector's timer, ``hold``
keeps one thread's rows back as CUPTI keeps an idle thread's half-full buffer, and
``delivered``/``captures`` are the watermark and capture points of the backend contract.
"""
import threading

import numpy as np

import proton_ctypes as proton
from proton_ctypes.core import retention
from proton_ctypes.core.registry import G
from proton_ctypes.core.views import View
from proton_ctypes.tree import callpath

from conftest import flat, read_tree

#: log entries per launch of the runs below: two scopes entered and left around it
ENTRIES_PER_LAUNCH = 4
#: timed flushes a late thread's rows stay back
HOLD = 3


def _retained(tids) -> int:
    """Log entries the views of ``tids`` hold now (list part and chunks)."""
    with G.lock:
        return sum(len(v.log) // 2 + sum(len(c) for c in v.chunks)
                   for tid in tids for v in G.views_by_tid.get(tid, ()))


def _bound(threads: int, block: int) -> int:
    """What the logs of ``threads`` threads may hold after a timed flush when each launches
    ``block`` times between flushes: the blocks since the last trim (the sink trims every
    TRIM_EVERY_BATCHES batches), those of a held thread, and the block in flight."""
    return (retention.TRIM_EVERY_BATCHES + HOLD + 3) * threads * block * ENTRIES_PER_LAUNCH


def _counts(name: str) -> dict:
    root, _ = read_tree(f"{name}.hatchet")
    return {path: m["count"] for path, m in flat(root).items() if "count" in m}


def test_one_thread_logs_stay_bounded_with_late_buffers_replays_and_a_reactivated_session(mock):
    rounds, block = 2000, 25
    sid = proton.start("one", backend="mock")
    tid = threading.get_native_id()
    with proton.scope("capture"):
        graph = [mock.capture(), mock.capture()]
    expected = {"outer/inner/k": 0, "outer/inner/<captured_at>/capture/gk": 0}
    worst = views = 0
    for r in range(rounds):
        active = not (100 <= r % 500 < 110)  # deactivated for 10 rounds, 4 times
        if r % 500 == 100:
            proton.deactivate(sid)
        elif r % 500 == 110:
            proton.activate(sid)
        if r % (HOLD + 2) == 0:
            mock.hold(tid, flushes=HOLD)
        for i in range(block):
            with proton.scope("outer"):
                with proton.scope("inner"):
                    mock.launch("k")
                    if i == 0:
                        for cap in graph:
                            mock.launch("gk", cap=cap)
        if active:
            expected["outer/inner/k"] += block
            expected["outer/inner/<captured_at>/capture/gk"] += len(graph)
        mock.timed_flush()
        if r >= rounds // 4:
            worst = max(worst, _retained([tid]))
            views = max(views, len(G.views_by_tid[tid]))
    written = rounds * block * ENTRIES_PER_LAUNCH
    assert worst <= _bound(1, block) < written // 10
    assert views <= 3  # the retired views of the deactivations are dropped
    assert len(G.sessions[sid].win_on) <= 2  # so are the closed windows
    proton.finalize()
    got = _counts("one")
    assert {p: got.get(p) for p in expected} == expected
    assert sum(got.values()) == sum(expected.values())


def test_four_threads_logs_stay_bounded_with_one_late_thread(mock):
    threads, rounds, block = 4, 500, 20
    sid = proton.start("four", backend="mock")
    edge, resume = threading.Barrier(threads + 1), threading.Barrier(threads + 1)
    tids = [0] * threads
    graph = []
    captured = threading.Event()

    def work(i):
        tids[i] = threading.get_native_id()
        if i == 0:  # a graph captured on one thread, replayed on every thread
            with proton.scope("capture"):
                graph.append(mock.capture())
            captured.set()
        captured.wait()
        for _ in range(rounds):
            for j in range(block):
                with proton.scope(f"w{i}"):
                    with proton.scope("inner"):
                        mock.launch("k")
                        if j == 0:
                            mock.launch("gk", cap=graph[0])
            try:
                edge.wait()
                resume.wait()
            except threading.BrokenBarrierError:  # the last round, or the main thread failed
                return

    ts = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(threads)]
    for t in ts:
        t.start()
    active_rounds = worst = 0
    try:
        for r in range(rounds):
            edge.wait(timeout=60)  # every thread between two blocks
            active_rounds += G.sessions[sid].active
            if r % (HOLD + 2) == 0:
                mock.hold(tids[1], flushes=HOLD)
            if r == rounds // 2:
                proton.deactivate(sid)
            elif r == rounds // 2 + 5:
                proton.activate(sid)
            mock.timed_flush()
            if r >= rounds // 4:
                worst = max(worst, _retained(tids))
            resume.wait(timeout=60)
    finally:  # a failure must not leave the threads waiting
        edge.abort()
        resume.abort()
        for t in ts:
            t.join()
    assert worst <= _bound(threads, block) < threads * rounds * block * ENTRIES_PER_LAUNCH // 5
    proton.finalize()
    got = _counts("four")
    expected = {}
    for i in range(threads):
        expected[f"w{i}/inner/k"] = active_rounds * block
        expected[f"w{i}/inner/<captured_at>/capture/gk"] = active_rounds
    assert {p: got.get(p) for p in expected} == expected
    assert sum(got.values()) == sum(expected.values())


def test_a_held_thread_does_not_stop_the_trimming_of_the_others(mock):
    proton.start("held", backend="mock")
    go, done = threading.Event(), threading.Event()
    late = []

    def idle_thread():
        late.append(threading.get_native_id())
        with proton.scope("idle"):
            mock.launch("k")
            go.set()
            done.wait()

    t = threading.Thread(target=idle_thread, daemon=True)
    t.start()
    try:
        go.wait()
        mock.hold(late[0], flushes=10 ** 6)
        me = threading.get_native_id()
        for _ in range(50):
            for _ in range(20):
                with proton.scope("busy"):
                    mock.launch("k")
            mock.timed_flush()
        assert mock.delivered()[1][late[0]] < mock.delivered()[0]
        assert _retained([me]) <= (retention.TRIM_EVERY_BATCHES + 2) * 20 * 2
    finally:  # a failure must not leave the thread waiting
        done.set()
        t.join()
    proton.finalize()  # a forced flush: the held row too
    assert _counts("held") == {"idle/k": 1, "busy/k": 1000}


def test_a_thread_without_scopes_delivered_late_gets_the_starter_context_of_its_first_launch(mock):
    """As autograd's thread: never a scope of its own, so its kernels take the starter thread's
    context at its first launch, even when that launch arrives late and the next one comes
    after the starter's log moved far past it."""
    proton.start("adopt_late", backend="mock")
    first, again, second = threading.Event(), threading.Event(), threading.Event()
    worker = []

    def launch_only():
        worker.append(threading.get_native_id())
        mock.launch("grad")
        first.set()
        if again.wait(timeout=60):
            mock.launch("grad")
        second.set()

    def later(rounds):
        for _ in range(rounds):
            for _ in range(10):
                with proton.scope("later"):
                    mock.launch("k")
            mock.timed_flush()

    t = threading.Thread(target=launch_only, daemon=True)
    with proton.scope("forward"):
        t.start()
        first.wait()
    try:
        mock.hold(worker[0], flushes=20)
        later(40)  # held for 20 timed flushes, then attributed, then the log moves on
        again.set()
        second.wait()
        later(20)
    finally:
        again.set()
        t.join()
    proton.finalize()
    assert _counts("adopt_late") == {"forward/grad": 2, "later/k": 600}


def test_dropping_old_entries_keeps_the_entry_in_force_at_each_capture_point():
    v = View(None, (), [], callpath.ROOT, 0)
    for t in range(10, 110, 10):  # entries at 10, 20, ..., 100 with codes 1..10
        v.log += [t, t // 10]
    pins = np.array([5, 35, 36, 70], dtype=np.int64)
    v.drop_before(85, pins)
    kept = v.compact()
    assert kept[:, 1].tolist() == [1, 3, 7, 8, 9, 10]
    times, codes = kept[:, 0], kept[:, 1]
    for t, code in ((5, 1), (35, 3), (36, 3), (70, 7), (85, 8), (100, 10)):
        assert codes[max(np.searchsorted(times, t, side="right") - 1, 0)] == code


def test_dropping_old_entries_keeps_the_newer_chunks_whole_and_the_entries_at_capture_points():
    v = View(None, (), [], callpath.ROOT, 0)
    for batch in range(3):                        # chunks [10..90], [110..190], [210..290]
        for t in range(100 * batch + 10, 100 * batch + 100, 10):
            v.log += [t, t]
        v.entries_since(100 * batch + 10)
    newest = v.chunks[-1]
    v.drop_before(150, pins=np.array([35, 120], dtype=np.int64))
    assert v.chunks[-1] is newest                 # the chunks after the cut are not copied
    kept = v.compact()
    assert kept[:, 0].tolist() == [30, 120, 150, 160, 170, 180, 190] + list(range(210, 300, 10))
    v.drop_before(5)                              # nothing is older than the entry in force
    assert v.compact()[:, 0].tolist() == kept[:, 0].tolist()


def test_a_late_kernel_gets_the_entry_in_force_from_an_earlier_chunk_of_the_log():
    """The join reads only the chunks a batch needs: a kernel launched before the newest
    chunk's first entry still gets the entry then in force, from the chunk before."""
    v = View(None, (), [], callpath.ROOT, 0)
    for batch in range(4):                        # four rounds of the collector, a chunk each
        for t in range(100 * batch + 10, 100 * batch + 100, 10):
            v.log += [t, t]                       # the code is the entry's time
        recent = v.entries_since(100 * batch + 10)
        assert recent[0, 0] == 100 * batch + 10   # a batch of recent kernels: the newest chunk only
    for t in (5, 15, 99, 105, 250, 395, 1000):
        log = v.entries_since(t)
        times, codes = log[:, 0], log[:, 1]
        expected = max([x for x in range(10, 400, 10) if x % 100 and x <= t] or [10])
        assert codes[max(np.searchsorted(times, t, side="right") - 1, 0)] == expected, t
    assert sum(len(c) for c in v.chunks) == 36 and v.compact()[:, 0].tolist() == [
        x for x in range(10, 400, 10) if x % 100]


def test_the_log_is_merged_into_one_chunk_past_the_chunk_bound():
    from proton_ctypes.core.views import MAX_CHUNKS
    v = View(None, (), [], callpath.ROOT, 0)
    for t in range(MAX_CHUNKS + 1):
        v.log += [t, t]
        v.entries_since(t)
    assert len(v.chunks) == 1 and v.chunks[0][:, 0].tolist() == list(range(MAX_CHUNKS + 1))


def test_the_mock_watermark_stays_at_the_oldest_held_row_of_a_late_thread(mock):
    delivered = []
    mock.start(delivered.append, mock.mode)
    me = threading.get_native_id()
    mock.launch("a")
    first = mock._rows[-1][1]
    mock.hold(me, flushes=2)
    mock.timed_flush()
    mock.launch("b")
    mock.timed_flush()
    default, per_thread = mock.delivered()
    assert per_thread == {me: first} and default > first and [len(b) for b in delivered] == [0, 0]
    mock.timed_flush()  # the hold is over: both rows, and the thread catches up
    assert [len(b) for b in delivered] == [0, 0, 2] and mock.delivered()[1] == {}


def _run_threads(work, n: int) -> None:
    """``work(i)`` on ``n`` new threads at once; returns when all have ended."""
    ts = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def test_threads_that_ended_are_forgotten_once_their_kernels_are_in_and_none_is_lost(mock):
    """Waves of short-lived launching threads (a server making a thread per request): what is
    kept per thread goes once the thread ended and its kernels were delivered, so the loops
    over every thread (each change of the active sessions, each trim) stay as short."""
    waves, per_wave, launches = 30, 8, 5
    proton.start("churn", backend="mock")
    seen = 0
    for w in range(waves):
        def work(i, w=w):
            with proton.scope(f"wave{w % 3}"):
                for _ in range(launches):
                    mock.launch("k")

        _run_threads(work, per_wave)
        for _ in range(retention.TRIM_EVERY_BATCHES + 1):
            mock.timed_flush()
        with G.lock:
            seen = max(seen, len(G.threads), len(G.views_by_tid))
    assert seen <= 2 * per_wave + 2          # the live threads and one wave at most, not all waves
    proton.finalize()
    got = _counts("churn")
    assert got == {f"wave{i}/k": waves // 3 * per_wave * launches for i in range(3)}


def test_threads_without_scopes_that_ended_leave_no_first_context_behind(mock, monkeypatch):
    """Each scope-less launching thread takes the starter's context at its first launch (as
    autograd's does); a thread per request would keep one such entry per thread for the
    session's life.  Once a thread ended and its kernels are in, its entry goes; kernels keep
    their paths, and a new thread takes the starter's context of its own first launch."""
    monkeypatch.setattr(retention, "LOOK_INTERVAL_S", 0.0)
    monkeypatch.setattr(retention._ended, "next_look", 0.0)    # an earlier test may have just looked
    sid = proton.start("requests", backend="mock")
    waves, per_wave = 12, 5
    most = 0
    for w in range(waves):
        with proton.scope(f"phase{w % 2}"):
            _run_threads(lambda i: mock.launch("k"), per_wave)
            mock.launch("main")
        for _ in range(retention.TRIM_EVERY_BATCHES + 1):
            mock.timed_flush()
        most = max(most, len(G.sessions[sid].first_context))
    assert most <= 2 * per_wave
    proton.finalize()
    half = waves // 2 * per_wave
    assert _counts("requests") == {"phase0/k": half, "phase1/k": half, "phase0/main": waves // 2,
                                   "phase1/main": waves // 2}
