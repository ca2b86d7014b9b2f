"""A scope that adds metrics of one shape again and again reuses a plan of the stored
entries (tree.metric_plans.add_planned); every result equals the one of the general path."""
import pytest

import proton_ctypes as proton


def _metrics(session, *path, phase=0):
    node = proton.data.get(session, phase)[0]
    for name in path:
        node = next(c for c in node["children"] if c["frame"]["name"] == name)
    return node["metrics"]


@pytest.fixture
def sessions(tmp_path, monkeypatch, mock):
    monkeypatch.chdir(tmp_path)
    ids = [proton.start(f"p{i}", backend="mock") for i in range(3)]
    yield ids
    proton.finalize()


def test_repeated_metrics_sum_in_every_session(sessions):
    for _ in range(5):
        with proton.scope("a", {"tokens": 2, "loss": 0.5, "bytes (inc)": 8, "step (exc)": 1}):
            pass
    for s in sessions:
        assert _metrics(s, "a") == {"tokens": 10, "loss": 2.5, "bytes (inc)": 40, "step": 5}


def test_repeated_property_keeps_the_last_value(sessions):
    for i in range(4):
        with proton.scope("a", {"lr (pty)": 0.1 * i, "n": 1}):
            pass
    assert _metrics(sessions[0], "a") == {"lr": pytest.approx(0.3), "n": 4}


def test_roofline_keys_keep_their_type_on_repeat(sessions):
    for _ in range(3):
        with proton.scope("a", {"flops": 2, "bytes": 3.0}):
            pass
    m = _metrics(sessions[1], "a")
    assert m == {"flops": 6.0, "bytes": 9}
    assert type(m["flops"]) is float and type(m["bytes"]) is int


def test_a_changed_value_type_after_repeats_raises_the_type_mismatch(sessions):
    for _ in range(3):
        with proton.scope("a", {"b": 1, "c": 2}):
            pass
    with pytest.raises(ValueError, match=r"Metric value type mismatch for valueId 0 \(c\): "
                                         r"current=int64_t, new=double"):
        with proton.scope("a", {"b": 1, "c": 2.5}):
            pass
    # keys are applied in sorted order: "b" before the failing "c" stays applied
    assert _metrics(sessions[0], "a") == {"b": 4, "c": 6}


def test_an_int_beyond_int64_after_repeats_is_a_double_and_mismatches(sessions):
    for _ in range(2):
        with proton.scope("a", {"n": 1}):
            pass
    with pytest.raises(ValueError, match="current=int64_t, new=double"):
        with proton.scope("a", {"n": 1 << 70, "m": 1}):
            pass


def test_key_order_of_the_dict_does_not_change_the_result(sessions):
    with proton.scope("a", {"x": 1, "y": 2.0}):
        pass
    with proton.scope("a", {"y": 2.0, "x": 1}):
        pass
    assert _metrics(sessions[2], "a") == {"x": 2, "y": 4.0}


def test_plans_follow_a_new_phase(sessions):
    for _ in range(2):
        with proton.scope("a", {"n": 1}):
            pass
    proton.data.advance_phase(sessions[0])
    for _ in range(3):
        with proton.scope("a", {"n": 1}):
            pass
    assert _metrics(sessions[0], "a") == {"n": 2}
    assert _metrics(sessions[0], "a", phase=1) == {"n": 3}
    assert _metrics(sessions[1], "a") == {"n": 5}


def test_a_scope_whose_metrics_alternate_between_shapes_sums_each_key(sessions):
    for i in range(6):
        metrics = {"tokens": 1, "loss": 0.5} if i % 2 else {"tokens": 2, "flops": 3.0, "step (exc)": 1}
        with proton.scope("a", metrics):
            pass
    assert _metrics(sessions[0], "a") == {"tokens": 9, "loss": 1.5, "flops": 9.0, "step": 3}


def test_dicts_of_one_size_with_other_keys_add_their_own_keys(sessions):
    for key in ("x", "y", "x", "z", "y", "x"):
        with proton.scope("a", {key: 1, "n": 2.0}):
            pass
    assert _metrics(sessions[1], "a") == {"x": 3, "y": 2, "z": 1, "n": 12.0}


def test_more_shapes_than_a_node_keeps_plans_for_still_add_every_metric(sessions):
    for _ in range(2):
        for key in ("k0", "k1", "k2", "k3", "k4", "k5"):
            with proton.scope("a", {key: 1}):
                pass
            with proton.scope("a", {key: 1, "both": 1}):
                pass
    assert _metrics(sessions[2], "a") == {**{f"k{i}": 4 for i in range(6)}, "both": 12}
