"""Kernels from a GPU backend attach to the scope/state open on the launching thread.

The mock backend stamps kernels like CUPTI launch records (thread id, launch time in the
``time.time_ns`` clock) and delivers them in batches at flush; the tree joins them to the
per-thread scope log in bulk (``core/attribution.py``).
"""
import threading

import proton_ctypes as proton
from conftest import child_names, find, read_tree


def test_kernel_lands_under_innermost_scope(mock):
    proton.start("k", backend="mock")
    with proton.scope("a"):
        with proton.scope("b"):
            mock.launch("add_one", dur_ns=800)
    mock.launch("add_one", dur_ns=100)
    proton.finalize()
    root, dev = read_tree("k.hatchet")
    k = find(root, "a", "b", "add_one")
    assert k["metrics"] == {"count": 1, "time (ns)": 800, "device_id": "0", "device_type": "CUDA"}
    assert find(root, "add_one")["metrics"]["count"] == 1
    assert dev == {"CUDA": {"0": {"arch": "90", "bus_width": 6016, "clock_rate": 1980000,
                                  "memory_clock_rate": 3201000, "num_sms": 132}}}


def test_repeated_kernels_aggregate_count_and_time(mock):
    proton.start("agg", backend="mock")
    for _ in range(3):
        with proton.scope("test0"):
            with proton.scope("test1"):
                mock.launch("add_one", dur_ns=100)
    proton.finalize()
    root, _ = read_tree("agg.hatchet")
    assert find(root, "test0", "test1", "add_one")["metrics"]["count"] == 3
    assert find(root, "test0", "test1", "add_one")["metrics"]["time (ns)"] == 300


def test_root_lists_kernel_and_scalar_metrics_as_zero_when_kernels_exist(mock):
    proton.start("root", backend="mock")
    with proton.scope("outer", {"tokens (inc)": 128, "w (exc)": 1, "v": [1, 2]}):
        mock.launch("k")
    proton.finalize()
    root, _ = read_tree("root.hatchet")
    assert root["metrics"] == {"count": 0, "time (ns)": 0, "tokens (inc)": 0}  # no (exc), no vectors


def test_kernel_under_state_gets_state_frame(mock):
    proton.start("st", backend="mock")
    with proton.scope("iteration"):
        with proton.state("optimizer"):
            mock.launch("add_one")
            with proton.scope("sub"):
                mock.launch("add_one")
        proton.enter_state("manual")
        mock.launch("add_one")
        proton.exit_state()
        mock.launch("add_one")
    proton.finalize()
    root, _ = read_tree("st.hatchet")
    it = find(root, "iteration")
    assert find(it, "optimizer", "add_one")["metrics"]["count"] == 1
    assert find(it, "sub", "optimizer", "add_one")["metrics"]["count"] == 1
    assert find(it, "manual", "add_one")["metrics"]["count"] == 1
    assert find(it, "add_one")["metrics"]["count"] == 1


def test_eight_threads_each_get_their_own_subtree_and_nothing_is_lost(mock):
    proton.start("th", backend="mock")
    barrier = threading.Barrier(8)

    def work(i):
        barrier.wait()
        for _ in range(200):
            with proton.scope(f"t{i}"):
                with proton.scope("inner", {"n": 1}):
                    mock.launch(f"kern{i}")
    with proton.scope("main"):
        ts = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    proton.finalize()
    root, _ = read_tree("th.hatchet")
    main = find(root, "main")
    assert sorted(child_names(main)) == [f"t{i}" for i in range(8)]
    for i in range(8):
        inner = find(main, f"t{i}", "inner")
        assert inner["metrics"]["n"] == 200
        assert find(inner, f"kern{i}")["metrics"]["count"] == 200


def test_kernels_only_go_to_sessions_active_at_launch(mock):
    s1 = proton.start("w1", backend="mock")
    mock.launch("both")
    s2 = proton.start("w2", backend="mock")
    mock.launch("both2")
    proton.deactivate(s1)
    mock.launch("only_s2")
    proton.activate(s1)
    proton.deactivate(s2)
    mock.launch("only_s1")
    proton.finalize()
    r1, _ = read_tree("w1.hatchet")
    r2, _ = read_tree("w2.hatchet")
    assert sorted(child_names(r1)) == ["both", "both2", "only_s1"]
    assert sorted(child_names(r2)) == ["both2", "only_s2"]


def test_second_session_does_not_see_scope_opened_before_it(mock):
    s1 = proton.start("o1", backend="mock")
    with proton.scope("a"):
        s2 = proton.start("o2", backend="mock")
        with proton.scope("b"):
            mock.launch("k")
    proton.finalize()
    r1, _ = read_tree("o1.hatchet")
    r2, _ = read_tree("o2.hatchet")
    assert find(r1, "a", "b", "k")["metrics"]["count"] == 1
    assert find(r2, "b", "k")["metrics"]["count"] == 1
    assert s1 != s2


def test_kernels_in_phases_go_to_the_phase_of_their_launch(mock):
    s = proton.start("ph", backend="mock")
    mock.launch("k0")
    proton.data.advance_phase(s)
    mock.launch("k1")
    proton.finalize()
    r0, _ = read_tree("ph.part_0.hatchet")
    r1, _ = read_tree("ph.part_1.hatchet")
    assert child_names(r0) == ["k0"]
    assert child_names(r1) == ["k1"]


def test_device_id_is_a_string_and_device_block_lists_used_devices(mock):
    proton.start("dev", backend="mock")
    mock.launch("k", device=1)
    proton.finalize()
    root, dev = read_tree("dev.hatchet")
    assert find(root, "k")["metrics"]["device_id"] == "1"
    assert list(dev["CUDA"]) == ["1"]


def test_thread_without_scopes_uses_starter_thread_context(mock):
    proton.start("nt", backend="mock")
    with proton.scope("main_scope"):
        t = threading.Thread(target=lambda: mock.launch("from_thread"))
        t.start()
        t.join()
    proton.finalize()
    root, _ = read_tree("nt.hatchet")
    assert find(root, "main_scope", "from_thread")["metrics"]["count"] == 1


def test_graph_replay_grafts_capture_path_under_replay_scope(mock):
    import time
    proton.start("g", backend="mock")
    tid = threading.get_native_id()
    with proton.scope("capture_scope"):
        cap = (tid, time.time_ns())
    with proton.scope("replay"):
        mock.launch("graph_kernel", cap=cap)
    proton.finalize()
    root, _ = read_tree("g.hatchet")
    assert find(root, "replay", "<captured_at>", "capture_scope", "graph_kernel")["metrics"]["count"] == 1


def test_trace_data_puts_kernels_on_stream_lanes(mock):
    import json
    proton.start("tr", backend="mock", data="trace")
    with proton.scope("a"):
        mock.launch("k1", stream=7)
        with proton.scope("b"):
            mock.launch("k2", stream=9)
    proton.finalize()
    doc = json.load(open("tr.chrome_trace"))
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    assert [(e["name"], e["tid"], e["args"]["call_stack"]) for e in kernels] == [
        ("k1", 200007, ["ROOT", "a", "k1"]), ("k2", 200009, ["ROOT", "a", "b", "k2"])]
    assert all(e["dur"] == 1.0 for e in kernels)


def test_python_context_kernel_hangs_under_launching_frame(mock):
    proton.start("py", backend="mock", context="python")

    def inner():
        mock.launch("pyk")
    inner()
    proton.finalize()
    root, _ = read_tree("py.hatchet")
    names = []
    node = root
    while node["children"]:
        node = node["children"][0]
        names.append(node["frame"]["name"])
    assert names[-1] == "pyk"
    assert any(n.endswith("@inner") for n in names)


def test_a_thread_that_only_launches_keeps_the_starter_stack_of_its_first_launch(mock):
    """As autograd's backward thread: it never enters a scope, so its stack is the starter
    thread's copied at its first launch in the session, and stays so while the main thread moves
    on (Proton copies a thread's stack at its first event)."""
    proton.start("adopt", backend="mock")
    go, done = threading.Event(), threading.Event()

    def backward_thread():
        for _ in range(3):
            go.wait()
            go.clear()
            mock.launch("grad")
            done.set()
    t = threading.Thread(target=backward_thread)
    t.start()
    for step in ("degree5", "degree3", "degree4"):
        with proton.scope(step):
            with proton.scope("backward"):
                go.set()
                done.wait()
                done.clear()
    t.join()
    proton.finalize()
    root, _ = read_tree("adopt.hatchet")
    assert find(root, "degree5", "backward", "grad")["metrics"]["count"] == 3
    assert child_names(find(root, "degree3", "backward")) == []


def test_a_new_thread_with_a_reused_native_id_does_not_inherit_the_dead_threads_scopes(mock):
    """Linux reuses the native id of an ended thread: the new thread's kernels belong to its own
    stack, not to the scope the old thread died in."""
    from proton_ctypes.core import threads
    proton.start("reuse", backend="mock")
    proton.enter_scope("dead")            # the old thread ends inside this scope
    mock.launch("old")
    threads.tls.__dict__.clear()          # ... as if a new thread now ran with the same native id
    mock.launch("new")
    with proton.scope("fresh"):
        mock.launch("newer")
    proton.finalize()
    root, _ = read_tree("reuse.hatchet")
    assert find(root, "dead", "old")["metrics"]["count"] == 1
    assert find(root, "new")["metrics"]["count"] == 1
    assert find(root, "fresh", "newer")["metrics"]["count"] == 1
    assert sorted(child_names(find(root, "dead"))) == ["old"]


def test_grafting_a_batch_of_replayed_rows_equals_grafting_each_row_alone():
    """graft groups the rows by (replay path, capture path); ops (negative codes) on either side."""
    import numpy as np

    from proton_ctypes.tree import callpath, kernels
    from proton_ctypes.tree.codes import node_of, op_code

    a = callpath.child(callpath.ROOT, "replay_a")
    b = callpath.child(callpath.ROOT, "capture_b")
    c = callpath.child(a, "op_c")
    rng = np.random.default_rng(7)
    choices = np.array([a, b, c, op_code(c), op_code(b), callpath.ROOT], dtype=np.int64)
    codes = rng.choice(choices, 500)
    caps = rng.choice(choices, 500)
    has = rng.random(500) < 0.7
    got = kernels.graft(codes, caps, has)
    for i in range(500):
        if not has[i]:
            assert got[i] == codes[i]
            continue
        node = callpath.graft(node_of(int(codes[i])), node_of(int(caps[i])))
        assert got[i] == (op_code(node) if caps[i] < 0 else node)


def test_grouping_a_batch_by_table_or_by_sort_gives_what_np_unique_gives():
    # near keys (a batch's kernel nodes) go through a table, spread ones through a sort
    import numpy as np
    from hypothesis import given, settings, strategies as st

    from proton_ctypes.tree.kernels import group

    @settings(deadline=None)
    @given(st.lists(st.integers(-2**40, 2**40), min_size=1, max_size=60),
           st.integers(-2**40, 2**40), st.integers(1, 200), st.booleans())
    def check(raw, offset, span, spread):
        keys = np.asarray([offset + r % span for r in raw] + (raw[:2] if spread else []), dtype=np.int64)
        uniq, first, inverse = group(keys)
        u, f, i = np.unique(keys, return_index=True, return_inverse=True)
        assert np.array_equal(uniq, u) and np.array_equal(first, f) and np.array_equal(inverse, i.reshape(-1))
    check()


def test_a_kernel_launched_right_after_reactivation_lands_on_the_stack_the_session_kept(mock):
    """The thread had events while the session was off (so it regrouped its views then) and
    launches again before its next event: the kernel takes the session's kept stack."""
    sid = proton.start("react", backend="mock")
    proton.enter_scope("outer")
    proton.deactivate(sid)
    proton.enter_scope("skipped")          # not the session's event: it keeps [outer]
    proton.activate(sid)
    mock.launch("k")
    proton.exit_scope()
    proton.exit_scope()
    proton.finalize()
    root, _ = read_tree("react.hatchet")
    assert find(root, "outer", "k")["metrics"]["count"] == 1
    assert [c["frame"]["name"] for c in find(root, "outer")["children"]] == ["k"]


def test_python_context_files_a_launch_from_a_thread_with_no_python_frame_under_the_root(mock):
    """A native thread (autograd's launching thread) has no Python frame above the launch
    callback: its kernels hang under the root, as in Proton (no frames, no state)."""
    import ctypes
    import functools
    proton.start("py", backend="mock", context="python")
    libc = ctypes.CDLL(None)
    start_routine = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p)
    # partial is C code: the thread's only Python frame is the mock backend's launch
    body = start_routine(functools.partial(mock.launch, "native_k"))
    handle = ctypes.c_ulong()
    assert libc.pthread_create(ctypes.byref(handle), None, body, ctypes.c_void_p(800)) == 0
    assert libc.pthread_join(handle, None) == 0
    mock.launch("python_k")
    proton.finalize()
    root, _ = read_tree("py.hatchet")
    at_root = {c["frame"]["name"]: c for c in root["children"]}
    assert at_root["native_k"]["metrics"]["count"] == 1
    assert at_root["native_k"]["metrics"]["time (ns)"] == 800
    assert "python_k" not in at_root  # the main thread's launch hangs under its frames
