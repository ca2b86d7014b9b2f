"""A scope that adds metrics of one shape again and again reuses a plan of the stored
entries (tree.metric_plans.add_planned; for one plain key, the entries the view keeps in
``scope_ones``); every result equals the one of the general path."""
import pytest

import proton_ctypes as proton
from proton_ctypes.tree.metric_plans import MAX_PLANS


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


def test_plans_follow_a_new_phase(sessions):   # one key: the entries kept in scope_ones too
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


def test_repeats_keep_the_kind_an_entry_got_from_its_first_add_under_another_key(sessions):
    # the kind is the stored entry's, not the key's: a property stays one under a plain key,
    # and a summed entry stays summed under a "(pty)" key, on the planned path as on the first add
    with proton.scope("a", {"lr (pty)": 0.5, "n": 1}):
        pass
    with proton.scope("b", {"lr": 0.5, "n": 1}):
        pass
    for value in (0.25, 0.125):
        with proton.scope("a", {"lr": value, "n": 1}):
            pass
        with proton.scope("b", {"lr (pty)": value, "n": 1}):
            pass
    assert _metrics(sessions[0], "a") == {"lr": 0.125, "n": 3}
    assert _metrics(sessions[0], "b") == {"lr": 0.875, "n": 3}


def test_one_key_metrics_repeated_sum_in_every_session(sessions):
    for _ in range(5):
        with proton.scope("i", {"n": 3}):
            pass
        with proton.scope("f", {"loss": 0.5}):
            pass
    for s in sessions:
        assert _metrics(s, "i") == {"n": 15} and type(_metrics(s, "i")["n"]) is int
        assert _metrics(s, "f") == {"loss": 2.5}


def test_one_key_metrics_alternating_keys_sum_each(sessions):
    for key in ("x", "y", "x", "x", "z", "y"):
        with proton.scope("a", {key: 2}):
            pass
    assert _metrics(sessions[1], "a") == {"x": 6, "y": 4, "z": 2}


def test_one_key_metric_of_another_type_after_repeats_raises_and_closes_the_scope(sessions):
    for _ in range(3):
        with proton.scope("a", {"n": 1}):
            pass
    with pytest.raises(ValueError, match="current=int64_t, new=double"):
        with proton.scope("a", {"n": 1.5}):
            pass
    with proton.scope("b", {"n": 1}):   # the refused scope is not left open: "b" is a root child
        pass
    assert _metrics(sessions[0], "a") == {"n": 3}
    assert _metrics(sessions[0], "b") == {"n": 1}


def test_one_key_int_beyond_int64_after_repeats_is_a_double_and_mismatches(sessions):
    for _ in range(2):
        with proton.scope("a", {"n": 1}):
            pass
    with pytest.raises(ValueError, match="current=int64_t, new=double"):
        with proton.scope("a", {"n": 1 << 70}):
            pass
    assert _metrics(sessions[2], "a") == {"n": 2}


def test_one_key_bool_after_repeats_sums_as_on_a_fresh_node(sessions):
    for value in (1, 1, True):
        with proton.scope("a", {"n": value}):
            pass
    for value in (True, 1):   # the general path's bool, on a node with no entry kept
        with proton.scope("b", {"n": value}):
            pass
    assert _metrics(sessions[0], "a")["n"] == _metrics(sessions[0], "b")["n"] + 1


def test_one_key_property_keeps_the_last_value(sessions):
    for i in range(4):
        with proton.scope("a", {"lr (pty)": 0.1 * i}):
            pass
    assert _metrics(sessions[0], "a") == {"lr": pytest.approx(0.3)}


def test_one_key_after_a_property_of_the_same_name_keeps_overwriting(sessions):
    with proton.scope("a", {"lr (pty)": 0.5}):
        pass
    for value in (0.25, 0.125):
        with proton.scope("a", {"lr": value}):
            pass
    assert _metrics(sessions[1], "a") == {"lr": 0.125}


def test_one_key_metrics_on_more_nodes_than_a_view_keeps_still_sum(sessions):
    names = [f"s{i}" for i in range(MAX_PLANS + 10)]
    for _ in range(2):
        for name in names:
            with proton.scope(name, {"n": 1}):
                pass
    assert all(_metrics(sessions[2], name) == {"n": 2} for name in (names[0], names[MAX_PLANS - 1], names[-1]))


def test_one_key_metrics_under_a_state_sum_on_the_state_node(sessions):
    for _ in range(3):
        with proton.state("s"):
            with proton.scope("a", {"n": 1}):
                pass
    with proton.scope("a", {"n": 1}):
        pass
    assert _metrics(sessions[0], "a", "s") == {"n": 3}
    assert _metrics(sessions[0], "a") == {"n": 1}


hypothesis = pytest.importorskip("hypothesis", reason="the property test needs hypothesis (the [test] extra)")
st = hypothesis.strategies
#: metric keys with no suffix: plain ones keep the type given; the roofline keys convert
#: (``flops`` to double, ``bytes`` to int64), as Proton does
PLAIN_KEYS, ROOFLINE = ("n", "m", "loss"), {"flops": float, "bytes": int}
KEYS = PLAIN_KEYS + tuple(ROOFLINE)
SMALL_INTS = st.integers(-1000, 1000)
SMALL_FLOATS = st.integers(-1000, 1000).map(float)       # exact sums: the order of adds cannot matter


@st.composite
def scope_calls(draw):
    """A type per plain key (fixed for the run: a changed type is an error), and a list of
    (scope name, metrics dict) with random key subsets in random orders."""
    types = {k: draw(st.sampled_from((int, float))) for k in PLAIN_KEYS}
    calls = []
    for _ in range(draw(st.integers(1, 25))):
        keys = draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=len(KEYS), unique=True))
        values = {}
        for k in keys:
            t = types.get(k) or draw(st.sampled_from((int, float)))
            values[k] = draw(SMALL_INTS if t is int else SMALL_FLOATS)
        calls.append((draw(st.sampled_from(("a", "b"))), values))
    return calls


# the mock fixture only registers the mock backend: the same for every example
@hypothesis.settings(max_examples=60, deadline=None,
                     suppress_health_check=[hypothesis.HealthCheck.function_scoped_fixture])
@hypothesis.given(calls=scope_calls())
def test_scopes_with_random_metric_shapes_sum_each_key_as_proton_types_it(calls, tmp_path_factory, mock):
    out = tmp_path_factory.mktemp("plans")
    ids = [proton.start(str(out / f"p{i}"), backend="mock") for i in range(2)]
    try:
        for name, metrics in calls:
            with proton.scope(name, metrics):
                pass
        expected = {}
        for name, metrics in calls:
            node = expected.setdefault(name, {})
            for k, val in metrics.items():
                val = ROOFLINE.get(k, type(val))(val)
                node[k] = node.get(k, 0) + val
        for s in ids:
            for name, want in expected.items():
                got = _metrics(s, name)
                assert got == want
                assert {k: type(v) for k, v in got.items()} == {k: type(v) for k, v in want.items()}
    finally:
        proton.finalize()
