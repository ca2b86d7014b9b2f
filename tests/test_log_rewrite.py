"""Rewriting the last log entry (``proton_ctypes/core/views.py``, "Rewriting the last entry"):
with launch positions, a scope or state edge with no kernel record written and nothing that may
time a kernel since the view's last entry rewrites that entry's code instead of appending one.

The fake libcupti writes a kernel's record into its launching thread's buffer during the
launch, as CUPTI does (``tests/test_cupti_launch_positions.py``).
"""
import os
import sys
import threading

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from conftest import flat, read_tree  # noqa: E402

import proton_ctypes as proton  # noqa: E402
from proton_ctypes.backends.nvidia.positions import BUSY, LaunchPositions  # noqa: E402
from proton_ctypes.core import graph_metrics  # noqa: E402
from proton_ctypes.core.threads import tls  # noqa: E402
from proton_ctypes.core.views import View  # noqa: E402
from proton_ctypes.tree import callpath  # noqa: E402

LATE_NS = 50_000_000


def counts(path):
    return {k: m["count"] for k, m in flat(read_tree(path)[0]).items() if "count" in m}


def _entries(view):
    """Every entry of ``view``'s log, as the join reads them."""
    return view.entries_since(0).tolist()


def test_edges_with_no_launch_between_them_leave_one_entry(positioned, tmp_path):
    fake, backend = positioned
    proton.start(str(tmp_path / "r"), backend="cupti")

    def step():
        with proton.scope("step"):
            with proton.scope("layer"):
                pass
            with proton.scope("layer"):
                fake.launch("k")

    step()                              # the first time also makes the view (and its first entry)
    view = tls.ctx.view
    before = len(_entries(view))
    step()
    # enter step, enter layer, exit layer, enter layer: no launch since the last step's exit,
    # whose entry takes the last code; then the launch, and exit layer, exit step: one entry
    after = _entries(view)
    assert len(after) - before == 1
    assert callpath.path(after[-2][1]) == ["ROOT", "step", "layer"]
    assert after[-1][1] == callpath.ROOT
    proton.finalize()
    assert counts(tmp_path / "r.hatchet") == {"step/layer/k": 2}


def test_kernels_keep_their_scopes_when_most_edges_are_rewritten(positioned, tmp_path):
    fake, backend = positioned
    sid = proton.start(str(tmp_path / "many"), backend="cupti")
    for i in range(300):
        with proton.scope("step"):
            for j in range(4):
                with proton.scope("layer"):
                    if (i + j) % 3:
                        fake.launch("k", kernel_delay_ns=LATE_NS)
                with proton.scope("idle"):
                    pass
            fake.launch("tail", kernel_delay_ns=LATE_NS)
        if i % 50 == 0:
            fake.complete_kernels()
            proton.data.get(sid)        # the collector takes the log while edges rewrite it
    proton.finalize()
    expected_k = sum(1 for i in range(300) for j in range(4) if (i + j) % 3)
    assert counts(tmp_path / "many.hatchet") == {"step/layer/k": expected_k, "step/tail": 300}


def test_a_graph_captured_in_a_scope_with_no_launch_keeps_that_scope(positioned, tmp_path, monkeypatch):
    """Captured nodes are placed by the time CUPTI made them, not by a record: the graph callback
    makes the thread's next edge append (without the capture hooks, which would also end the view)."""
    monkeypatch.setenv(graph_metrics.ENABLE_ENV, "0")
    fake, backend = positioned
    proton.start(str(tmp_path / "graph"), backend="cupti")
    with proton.scope("before"):
        fake.launch("k0")
    with proton.scope("capture"):
        graph = fake.capture(["g1", "g2"])
    exe = fake.instantiate(graph)
    with proton.scope("replay"):
        fake.replay(exe)
    proton.finalize()
    got = counts(tmp_path / "graph.hatchet")
    assert {k: v for k, v in got.items() if "<captured_at>" in k} == {
        "replay/<captured_at>/capture/g1": 1, "replay/<captured_at>/capture/g2": 1}


def test_a_graph_launch_makes_the_next_edge_append(positioned, tmp_path):
    fake, backend = positioned
    proton.start(str(tmp_path / "g"), backend="cupti")
    fake.launch("k0")                   # the thread's buffer exists: the replay requests none
    with proton.scope("capture"):
        graph = fake.capture(["g1"])
    exe = fake.instantiate(graph)
    with proton.scope("replay"):
        cursor = tls.ctx.view.cursor
        assert cursor.last is tls.ctx.view.log
        fake.replay(exe)
        assert cursor.last is None
    proton.finalize()


def _cursor_view(words):
    """A logging view whose edge cursor reads ``words`` (the positions of this thread)."""
    positions = LaunchPositions(4096, 216)
    clock = positions.thread_clock(threading.get_native_id())
    st = clock.cursor
    st.buf, st.words, st.i = (words, 0), words, 0
    view = View.__new__(View)
    view.logging, view.ext, view.log, view.chunks = True, None, [], []
    view.now, view.cursor = clock, st
    return view, st


def test_note_rewrites_only_while_nothing_was_written_or_placed_since():
    words = np.zeros(1024, np.uint32)
    view, st = _cursor_view(memoryview(words).cast("B").cast("I"))
    view.note(1)
    view.note(2)                          # nothing since: the code of the entry is rewritten
    assert view.log[1::2] == [2]
    words[0] = 7                          # a record written since
    view.note(3)
    assert view.log[1::2] == [2, 3]
    words[0] = 0
    st.i = 0
    view.note(4)                          # the clock's read moved past nothing: rewritten
    assert view.log[1::2] == [2, 4]
    view.now()                            # another clock read (a state, a launch op, a created time)
    view.note(5)
    assert view.log[1::2] == [2, 4, 5]
    st.words = BUSY                       # positions distrusted: always an entry of its own
    view.note(6)
    assert view.log[1::2] == [2, 4, 5, 6]


def test_the_collector_leaves_the_rewritable_entry_in_the_list_and_reads_a_copy():
    words = np.zeros(1024, np.uint32)
    view, st = _cursor_view(memoryview(words).cast("B").cast("I"))
    view.note(1)
    words[0] = 7
    view.note(2)
    assert view.compact()[:, 1].tolist() == [1, 2]
    assert view.log[1::2] == [2]          # still the owner's to rewrite
    view.note(3)
    assert view.entries_since(0)[:, 1].tolist() == [1, 3]
    assert sum(len(c) for c in view.chunks) == 1
    view.log.append(99)                   # the owner between the two appends of a newer entry
    view.compact()
    assert view.log == [99] and view.chunks[-1][-1, 1] == 3


def _final_codes(positioned, events, general: bool, launch_every: int = 0):
    """The codes of the whole log after ``events`` (``test_log_entry``'s scenarios) ran in a
    launch-position session, as the join reads them; ``general``: with the fast-path view taken
    away, so every event goes through ``View.note``; ``launch_every``: a kernel launched after
    every that many events (0: none)."""
    from proton_ctypes.core.threads import thread_ctx
    fake, _backend = positioned
    proton.start("rewrite", backend="cupti")
    ctx = thread_ctx()
    with proton.scope("warm_up"):
        fake.launch("k")
    view = ctx.views[0]
    assert ctx.view is view and view.cursor is not None
    if general:
        ctx.view = None
    for i, (_name, event) in enumerate(events(), 1):
        event()
        if launch_every and i % launch_every == 0:
            fake.launch("k")
    entries = view.entries_since(0)
    proton.finalize()
    assert entries[:, 0].tolist() == sorted(entries[:, 0].tolist())
    return ["/".join(callpath.path(code)) for code in entries[:, 1].tolist()]


@pytest.mark.parametrize("launch_every", [0, 1, 2, 3])
def test_the_fast_and_the_general_path_rewrite_the_same_entries(positioned, launch_every):
    from test_log_entry import _scopes_and_states
    fast = _final_codes(positioned, _scopes_and_states, False, launch_every)
    general = _final_codes(positioned, _scopes_and_states, True, launch_every)
    assert fast == general
    if not launch_every:   # no launch after the warm-up: its exit's entry takes every later code
        assert fast == ["ROOT/warm_up", "ROOT"]


def test_a_buffer_request_or_a_context_change_on_any_thread_ends_every_threads_rewrites(positioned, tmp_path):
    """A thread with no view of its own takes the starter's context at its first launch, timed by
    its buffer request (or a context change): the starter's entry in force then must stay."""
    positions = LaunchPositions(4096, 216)
    mine = positions.thread_clock(threading.get_native_id()).cursor
    log = []
    mine.last = log
    buf = np.zeros(4096, np.uint8)
    worker = threading.Thread(target=lambda: positions.on_request(buf.ctypes.data, buf))
    worker.start()
    worker.join()
    assert mine.last is None
    mine.last = log
    positions.snapshot(0)
    assert mine.last is None

    fake, _backend = positioned
    proton.start(str(tmp_path / "first"), backend="cupti")
    with proton.scope("a"):
        fake.launch("ka")
    other = threading.Thread(target=lambda: fake.launch("kt"))   # no scope on that thread
    other.start()
    other.join()
    with proton.scope("b"):                  # no launch on this thread since "a" closed
        pass
    with proton.scope("b"):
        fake.launch("kb")
    proton.finalize()
    assert counts(tmp_path / "first.hatchet") == {"a/ka": 1, "kt": 1, "b/kb": 1}


def test_an_entry_is_not_claimed_when_another_thread_ends_the_rewrites_between_its_clock_read_and_its_claim():
    """The owner's append reads the clock, then claims its entry; a buffer request of another
    thread in between (its kernel timed after the entry) leaves the entry unclaimed, so no later
    edge rewrites it."""
    words = np.zeros(1024, np.uint32)
    view, st = _cursor_view(memoryview(words).cast("B").cast("I"))
    clock = view.now
    ended = []

    def clock_then_a_request_elsewhere():
        t = clock()
        st.last = None                    # what another thread's request does (_end_rewrites)
        ended.append(t)
        return t

    view.note(1)
    assert st.last is view.log            # claimed: nothing in between
    view.now = clock_then_a_request_elsewhere
    words[st.i] = 7                       # a record: the next edge appends
    view.note(2)
    assert ended and st.last is None      # not claimed
    view.now = clock
    view.note(3)                          # so this edge appends too
    assert view.log[1::2] == [1, 2, 3]


def test_an_entry_is_not_claimed_when_another_thread_ends_the_rewrites_during_its_clock_read():
    """Another thread's request may end the rewrites while the owner's clock reads the time (the
    GIL can change hands in the clock's scan): that request read its time first, so the entry in
    force then -- the one being written -- must stay unclaimed, or a later edge would rewrite the
    code the other thread's kernels take."""
    words = np.zeros(1024, np.uint32)
    view, st = _cursor_view(memoryview(words).cast("B").cast("I"))
    clock = view.now

    def time_read_during_a_request_elsewhere():
        st.last = None                    # what the request's _end_rewrites does
        return 10**18

    view.note(1)
    words[st.i] = 7                       # a record: the next edge reads the clock and appends
    view.now = lambda: clock(_now=time_read_during_a_request_elsewhere)
    view.note(2)
    assert st.last is None                # not claimed
    view.now = clock
    view.note(3)                          # so this edge appends
    assert view.log[1::2] == [1, 2, 3]


def test_once_the_positions_are_distrusted_no_thread_rewrites_not_even_a_new_one():
    positions = LaunchPositions(4096, 216)
    mine = positions.thread_clock(threading.get_native_id()).cursor
    positions.distrust()
    assert mine.words is BUSY
    seen = []
    worker = threading.Thread(target=lambda: seen.append(positions.thread_clock(threading.get_native_id()).cursor))
    worker.start()
    worker.join()
    assert seen[0].words is BUSY


def test_a_trace_session_keeps_each_edges_time_so_each_kernel_flows_from_the_scope_it_was_launched_in(
        positioned, tmp_path):
    """A trace session's kernels are linked to the CPU scope open at their launch by time (the
    chrome trace's flows), so its edges read the clock and never rewrite, beside a tree session."""
    import json
    fake, _backend = positioned
    proton.start(str(tmp_path / "t"), data="trace", backend="cupti")
    proton.start(str(tmp_path / "tree"), backend="cupti")
    for _ in range(3):
        with proton.scope("a"):
            pass
        with proton.scope("s"):
            fake.launch("k", kernel_delay_ns=LATE_NS)
    fake.complete_kernels()
    proton.finalize()
    with open(tmp_path / "t.chrome_trace") as f:
        events = json.load(f)["traceEvents"]
    scopes = {e["ts"]: e["name"] for e in events if e.get("cat") == "scope"}
    starts = [e for e in events if e.get("cat") == "flow" and e["ph"] == "s"]
    assert len(starts) == 3 and {scopes[e["ts"]] for e in starts} == {"s"}
    assert len({e["ts"] for e in starts}) == 3
    assert counts(tmp_path / "tree.hatchet") == {"s/k": 3}


def test_the_diagnostic_switch_turns_the_rewrites_off_and_every_edge_appends(positioned, tmp_path, monkeypatch):
    from proton_ctypes.backends.nvidia.positions import LOG_REWRITE_ENV
    monkeypatch.setenv(LOG_REWRITE_ENV, "0")
    fake, _backend = positioned
    proton.start(str(tmp_path / "off"), backend="cupti")
    with proton.scope("a"):
        fake.launch("k")
    view = tls.ctx.view
    assert view.cursor is None
    before = len(_entries(view))
    for _ in range(3):
        with proton.scope("a"):
            pass
    assert len(_entries(view)) - before == 6
    proton.finalize()
    assert counts(tmp_path / "off.hatchet") == {"a/k": 1}
