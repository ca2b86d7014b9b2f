"""LaunchHook (hook="triton") semantics with a fake Triton launch."""
import os

import pytest

import proton_ctypes as proton
from conftest import find, read_tree, written
from proton_ctypes.hooks import HookManager, LaunchHook


class FakeLazyDict:
    """What Triton passes to launch hooks: ``data`` (raw until ``get()``, then the evaluated
    dict, as Triton's LazyDict replaces it) and ``get()`` (evaluates once)."""

    def __init__(self, name, meta=None):
        self.data = {"name": name}
        self.meta = meta
        self.evaluated = 0

    def get(self):
        if self.meta:
            self.evaluated += 1
            self.data = self.data | self.meta(self.data["name"])
            self.meta = None
        return self.data


def launch(mock, name, meta=None):
    md = FakeLazyDict(name, meta)
    HookManager.enter(md)
    mock.launch(name)
    HookManager.exit(md)
    return md


def meta_fn(name):
    return {"name": f"{name}_n2048", "bytes": 16384, "flops32": 2048.0, "my_counter": 7, "label": "x",
            "function": object(), "stream": 3, "none": None}


def test_launch_hook_is_a_singleton_with_priority_100():
    assert LaunchHook() is LaunchHook()
    assert LaunchHook.priority == 100


def test_metadata_name_names_the_kernel_node_and_numbers_become_metrics(mock):
    LaunchHook().configure()
    proton.start("hook", backend="mock", hook="triton")
    with proton.scope("with_meta"):
        launch(mock, "add_one", meta_fn)
        launch(mock, "add_one")
    proton.finalize()
    root, _ = read_tree("hook.hatchet")
    node = find(root, "with_meta", "add_one_n2048")
    assert node["metrics"] == {"bytes": 16384, "count": 1, "device_id": "0", "device_type": "CUDA",
                               "flops32": 2048.0, "my_counter": 7, "time (ns)": 1000}
    assert find(root, "with_meta", "add_one")["metrics"]["count"] == 1
    assert root["metrics"] == {"bytes": 0, "count": 0, "flops32": 0, "my_counter": 0, "time (ns)": 0}


def test_exclude_on_compiled_name_skips_metadata_evaluation(mock):
    LaunchHook().configure(exclude="add.*")
    try:
        proton.start("ex", backend="mock", hook="triton")
        md = launch(mock, "add_one", meta_fn)
        proton.finalize()
    finally:
        LaunchHook().configure()
    assert md.evaluated == 0
    root, _ = read_tree("ex.hatchet")
    assert find(root, "add_one")["metrics"]["count"] == 1


def test_exclude_on_the_metadata_name_records_the_kernel_as_a_plain_launch(mock):
    LaunchHook().configure(exclude=".*_n2048")
    try:
        proton.start("exmeta", backend="mock", hook="triton")
        with proton.scope("s"):
            md = launch(mock, "add_one", meta_fn)
        proton.finalize()
    finally:
        LaunchHook().configure()
    assert md.evaluated == 1
    root, _ = read_tree("exmeta.hatchet")
    node = find(root, "s", "add_one")
    assert node["metrics"]["count"] == 1 and "bytes" not in node["metrics"]
    assert [c["frame"]["name"] for c in find(root, "s")["children"]] == ["add_one"]


def test_include_is_anchored_at_the_start_only():
    h = LaunchHook()
    h.configure(include="add.*", exclude=".*_n4096")
    try:
        assert [h._matches_kernel_name(n) for n in ("add_one", "xadd", "add_one_n40960", None)] == \
            [True, False, False, True]
    finally:
        h.configure()


def test_launches_inside_launch_metadata_are_not_ops(mock):
    LaunchHook().configure()
    proton.start("nested", backend="mock", hook="triton")

    def meta(name):
        inner = FakeLazyDict("helper")
        HookManager.enter(inner)
        mock.launch("helper")
        HookManager.exit(inner)
        return {"name": "outer_op"}
    launch(mock, "outer", meta)
    proton.finalize()
    root, _ = read_tree("nested.hatchet")
    md = find(root, "__proton_launch_metadata", "outer")
    assert find(md, "helper")["metrics"]["count"] == 1
    assert find(root, "outer_op")["metrics"]["count"] == 1


def test_hook_stays_active_while_any_session_holds_it():
    s = proton.start("a", backend="host", hook="triton")
    t = proton.start("b", backend="host", hook="triton")
    assert HookManager.active_hooks == [LaunchHook()]
    proton.deactivate(s)
    assert HookManager.active_hooks == [LaunchHook()]
    proton.deactivate(t)
    assert HookManager.active_hooks == []
    proton.activate(s)
    assert HookManager.active_hooks == [LaunchHook()]
    proton.finalize()
    assert HookManager.active_hooks == []


def test_unsupported_hook_string_raises_before_any_session_exists():
    # Proton creates the session first: it stays alive and a later finalize writes it
    with pytest.raises(ValueError, match="^Unsupported hook: 'nope'$"):
        proton.start("uh", backend="host", hook="nope")
    with proton.scope("recorded"):
        pass
    proton.finalize()
    assert not os.path.exists("uh.hatchet")


def triton_launch(name, meta):
    """One launch as Triton's runtime makes it: the hooks around a LazyDict (no kernel runs)."""
    from triton.compiler.compiler import LazyDict
    md = LazyDict({"name": name, "function": 0, "stream": 0})
    md.add(lambda: dict(meta), ())
    HookManager.enter(md)
    HookManager.exit(md)


def test_launch_metadata_numbers_are_summed_on_the_op_node_and_other_values_dropped():
    # real Proton 3.9 writes exactly this tree for these launches (host only: no kernel metrics)
    import numpy as np
    LaunchHook().configure()
    proton.start("hm", backend="host", hook="triton")
    with proton.scope("s"):
        for i in range(3):
            triton_launch("k", {"name": "k_op", "flops32": 100, "bytes": 10.9, "c": i, "last (pty)": i,
                                "label": "x", "none": None})
        triton_launch("k", {"name": "k_op", "flops32": 100, "bytes": 10, "c": 1, "label": 4, "none": 2.0})
        triton_launch("k", {"name": "k_op", "c": np.int64(5), "f": np.float64(0.5)})
        triton_launch("k", {"name": "k_op", "c": True})
    proton.finalize()
    assert written("hm") == {"s": {}, "s/k_op": {"bytes": 40, "c": 10, "f": 0.5, "flops32": 400.0, "label": 4,
                                                 "last": 2, "none": 2.0}}


@pytest.mark.parametrize("bad", [2.5, 2 ** 70], ids=["double", "int_beyond_int64"])
def test_launch_metadata_changing_type_raises_and_keeps_the_keys_sorting_before_it(bad):
    LaunchHook().configure()
    proton.start("hmm", backend="host", hook="triton")
    with proton.scope("s"):
        for _ in range(2):
            triton_launch("k", {"name": "k_op", "a": 1, "c": 2, "z": 3})
        with pytest.raises(ValueError) as e:
            triton_launch("k", {"name": "k_op", "a": 1, "c": bad, "z": 3})
    proton.finalize()
    assert str(e.value) == "[PROTON] Metric value type mismatch for valueId 0 (c): current=int64_t, new=double"
    assert written("hmm") == {"s": {}, "s/k_op": {"a": 3, "c": 4, "z": 6}}
