"""The launch hook's fast path: metric plans reused across launches, and its place in
Triton's hook chains (README, "Differences from Proton").

Launches go through Triton's own hook chains (``knobs.runtime.launch_enter_hook`` and
``launch_exit_hook``) with Triton's ``LazyDict``, as the runtime makes them."""
import pytest
from triton import knobs
from triton.compiler.compiler import LazyDict

import proton_ctypes as proton
from conftest import find, read_tree
from proton_ctypes.hooks import HookManager, LaunchHook


def launch(mock, name, meta):
    md = LazyDict({"name": name, "function": 0, "stream": 0})
    if callable(meta):
        md.add(meta, ())
    else:
        md.add(lambda: dict(meta), ())
    knobs.runtime.launch_enter_hook(md)
    mock.launch(name)
    knobs.runtime.launch_exit_hook(md)


@pytest.fixture(autouse=True)
def plain_hook():
    LaunchHook().configure()
    yield
    HookManager.unregister()


def test_repeated_launches_sum_their_metadata_on_the_kernel_node(mock):
    proton.start("rep", backend="mock", hook="triton")
    with proton.scope("s"):
        for i in range(5):
            launch(mock, "k", {"name": "k_op", "flops16": 10, "bytes": 3.7, "i": i, "last (pty)": i, "tag": "x"})
    proton.finalize()
    node = find(read_tree("rep.hatchet")[0], "s", "k_op")
    assert node["metrics"] == {"bytes": 15, "count": 5, "device_id": "0", "device_type": "CUDA",
                               "flops16": 50.0, "i": 10, "last": 4, "time (ns)": 5000}


def test_a_value_changing_type_after_the_first_launches_is_checked_like_the_first(mock):
    proton.start("chg", backend="mock", hook="triton")
    with proton.scope("s"):
        for _ in range(3):
            launch(mock, "k", {"name": "k_op", "a": 1, "c": 2, "z": 3})
        with pytest.raises(ValueError, match=r"mismatch for valueId 0 \(c\): current=int64_t, new=double"):
            launch(mock, "k", {"name": "k_op", "a": 1, "c": 2.5, "z": 3})
        mock.launch("plain")
    proton.finalize()
    assert find(read_tree("chg.hatchet")[0], "s", "plain")["metrics"]["count"] == 1
    metrics = find(read_tree("chg.hatchet")[0], "s", "k_op")["metrics"]
    assert (metrics["a"], metrics["c"], metrics["z"]) == (4, 6, 9)   # keys before "c" applied, after not


def test_launches_after_a_failing_launch_are_still_recorded(mock):
    # Proton leaves its hook marked busy after an exception and drops every later launch
    proton.start("after", backend="mock", hook="triton")
    with proton.scope("s"):
        launch(mock, "k", {"name": "k_op", "c": 1})
        with pytest.raises(ValueError):
            launch(mock, "k", {"name": "k_op", "c": 1.5})

        def boom():
            raise KeyError("no such arg")
        with pytest.raises(KeyError):
            launch(mock, "k", boom)
        launch(mock, "k", {"name": "k_op", "c": 1})
        mock.launch("plain")
    proton.finalize()
    root, _ = read_tree("after.hatchet")
    assert find(root, "s", "plain")["metrics"]["count"] == 1  # not under the metadata state
    assert find(root, "s", "k_op")["metrics"]["c"] == 2
    assert find(root, "s", "k_op")["metrics"]["count"] == 2
    # an exception from the enter hook stops the launch itself: the failed launches have no kernel
    assert [c["frame"]["name"] for c in find(root, "s")["children"]] == ["k_op", "plain"]


def test_a_key_becoming_numeric_on_a_later_launch_becomes_a_metric(mock):
    proton.start("num", backend="mock", hook="triton")
    for label in ("x", 4, 5):
        launch(mock, "k", {"name": "k_op", "label": label})
    proton.finalize()
    assert find(read_tree("num.hatchet")[0], "k_op")["metrics"]["label"] == 9


def test_numpy_numbers_after_plain_ones_are_summed_as_plain_ones(mock):
    import numpy as np
    proton.start("np", backend="mock", hook="triton")
    for v in (1.5, np.float64(2.0), 0.5):
        launch(mock, "k", {"name": "k_op", "v": v, "n": np.int64(2)})
    proton.finalize()
    metrics = find(read_tree("np.hatchet")[0], "k_op")["metrics"]
    assert (metrics["v"], metrics["n"]) == (4.0, 6)


def test_two_sessions_sharing_one_stack_both_get_every_launch(mock):
    proton.start("one", backend="mock", hook="triton")
    proton.start("two", backend="mock", hook="triton")
    with proton.scope("s"):
        for _ in range(3):
            launch(mock, "k", {"name": "k_op", "flops": 2.0})
    proton.finalize()
    for name in ("one", "two"):
        metrics = find(read_tree(f"{name}.hatchet")[0], "s", "k_op")["metrics"]
        assert (metrics["count"], metrics["flops"]) == (3, 6.0)


def test_a_new_phase_starts_the_launch_metrics_afresh(mock):
    sid = proton.start("ph", backend="mock", hook="triton")
    launch(mock, "k", {"name": "k_op", "c": 1})
    proton.data.advance_phase(sid)
    for _ in range(2):
        launch(mock, "k", {"name": "k_op", "c": 1})
    proton.deactivate(sid, flushing=True)
    assert find(proton.data.get(sid, phase=1)[0], "k_op")["metrics"]["c"] == 2
    assert find(proton.data.get(sid, phase=0)[0], "k_op")["metrics"]["c"] == 1
    proton.finalize()


def test_one_active_hook_sits_in_tritons_launch_chains_itself():
    proton.start("w1", backend="host", hook="triton")
    assert knobs.runtime.launch_enter_hook.calls == [LaunchHook().enter]
    assert knobs.runtime.launch_exit_hook.calls == [LaunchHook().exit]
    assert knobs.runtime.kernel_load_end_hook.calls == [HookManager.init_handle]
    proton.finalize()
    assert knobs.runtime.launch_enter_hook.calls == [] and knobs.runtime.kernel_load_end_hook.calls == []


def test_two_active_hooks_are_dispatched_by_the_manager_by_priority():
    calls = []

    class Tagging(proton.hooks.hook.Hook):
        priority = 200

        def init_handle(self, *a):
            pass

        def enter(self, md):
            calls.append("tag")

        def exit(self, md):
            calls.append("untag")

        def activate(self):
            pass

        def deactivate(self):
            pass
    sid = proton.start("w2", backend="host", hook="triton")
    HookManager.register(Tagging(), sid)
    assert knobs.runtime.launch_enter_hook.calls == [HookManager.enter]
    md = LazyDict({"name": "k", "function": 0, "stream": 0})
    md.add(lambda: {"name": "k_op"}, ())
    knobs.runtime.launch_enter_hook(md)
    knobs.runtime.launch_exit_hook(md)
    assert calls == ["tag", "untag"]
    proton.finalize()
    assert find(read_tree("w2.hatchet")[0], "k_op")


def test_a_session_activated_again_after_every_hook_went_inactive_gets_its_hook_back(mock):
    # Proton removes its dispatchers when the last active hook goes and never adds them back
    s = proton.start("back_s", backend="mock", hook="triton")
    t = proton.start("back_t", backend="mock", hook="triton")
    proton.deactivate(s)
    proton.finalize(t)
    assert knobs.runtime.launch_enter_hook.calls == []
    proton.activate(s)
    assert knobs.runtime.launch_enter_hook.calls == [LaunchHook().enter]
    launch(mock, "k", {"name": "k_op", "c": 1})
    proton.finalize(s)
    assert find(read_tree("back_s.hatchet")[0], "k_op")["metrics"]["c"] == 1


def test_metadata_with_keys_of_several_types_is_recorded_twice_alike(mock):
    proton.start("mixed", backend="mock", hook="triton")
    for _ in range(2):
        launch(mock, "k", {"name": "k_op", 7: "seven", "c": 1})
    proton.finalize()
    assert find(read_tree("mixed.hatchet")[0], "k_op")["metrics"]["c"] == 2


def test_a_launch_that_raised_before_its_exit_hook_does_not_stop_later_launches(mock):
    # Triton calls no exit hook when the launch itself raises; Proton then ignores every
    # later launch of the thread
    proton.start("noexit", backend="mock", hook="triton")
    with proton.scope("s"):
        md = LazyDict({"name": "k", "function": 0, "stream": 0})
        md.add(lambda: {"name": "failed_op", "c": 1}, ())
        knobs.runtime.launch_enter_hook(md)          # the launch raises here: no exit hook
        for _ in range(2):
            launch(mock, "k", {"name": "k_op", "c": 1})
        mock.launch("plain")
    proton.finalize()
    root, _ = read_tree("noexit.hatchet")
    assert find(root, "s", "k_op")["metrics"]["count"] == 2
    assert find(root, "s", "plain")["metrics"]["count"] == 1
    assert find(root, "s", "failed_op")["metrics"]["c"] == 1


def test_repeated_launches_keep_the_kind_an_entry_got_from_the_first_launch(mock):
    # as the general path (tree.metrics.add) does on every launch: the stored entry's kind, not
    # the key's (Proton writes two colliding metrics here: tests/conformance, KNOWN)
    proton.start("kind", backend="mock", hook="triton")
    launch(mock, "k", {"name": "k_op", "lr (pty)": 0.5, "c": 1})
    launch(mock, "m", {"name": "m_op", "lr": 0.5, "c": 1})
    for value in (0.25, 0.125):
        launch(mock, "k", {"name": "k_op", "lr": value, "c": 1})
        launch(mock, "m", {"name": "m_op", "lr (pty)": value, "c": 1})
    proton.finalize()
    root, _ = read_tree("kind.hatchet")
    assert find(root, "k_op")["metrics"]["lr"] == 0.125
    assert find(root, "m_op")["metrics"]["lr"] == 0.875
