"""Metrics given to scopes: accepted values, name suffixes, aggregation,
type and size errors.

Expected values are those real Proton 3.9 writes for the same calls (the oracle runs of
``conformance/scenarios/metric.py``).  JSON cannot tell ``2`` from ``2.0`` by equality,
so the stored types are compared too (:func:`typed`).
"""
import pytest

import proton_ctypes as proton
from conftest import written

MISMATCH = "[PROTON] Metric value type mismatch for valueId 0 ({}): current={}, new={}"


def typed(metrics):
    """``{name: (type name, value)}``: an int stored as a double shows as ``float``."""
    def t(v):
        if isinstance(v, list):
            return ("list", [t(x) for x in v])
        return (type(v).__name__, v)
    return {k: t(v) for k, v in metrics.items()}


def one_scope(metrics, name="m"):
    """The metrics written for one scope ``name`` entered with ``metrics``."""
    proton.start(name, backend="host")
    with proton.scope(name, metrics):
        pass
    proton.finalize()
    return written(name)[name]


# --- accepted values ------------------------------------------------------------------------

def test_ints_bools_and_numpy_ints_are_stored_as_int64():
    import numpy as np
    assert typed(one_scope({"b": True, "neg": -5, "npi": np.int32(7), "max": 2 ** 63 - 1})) == {
        "b": ("int", 1), "neg": ("int", -5), "npi": ("int", 7), "max": ("int", 2 ** 63 - 1)}


def test_an_int_beyond_int64_is_stored_as_a_double():
    assert typed(one_scope({"big": 2 ** 63})) == {"big": ("float", 9.223372036854776e+18)}


def test_floats_and_numpy_float64_are_stored_as_doubles():
    import numpy as np
    assert typed(one_scope({"f": 2.5, "npf": np.float64(0.25)})) == {"f": ("float", 2.5), "npf": ("float", 0.25)}


def test_nan_and_infinities_are_written_as_json_null():
    assert one_scope({"nan": float("nan"), "inf": float("inf"), "ninf": float("-inf")}) == {
        "nan": None, "inf": None, "ninf": None}


def test_numpy_float32_is_stored_as_a_double():
    # a deliberate difference (README): Proton truncates np.float32(1.5) to the int 1
    import numpy as np
    assert typed(one_scope({"v": np.float32(1.5)})) == {"v": ("float", 1.5)}


def test_zero_dimensional_numpy_arrays_are_stored_as_their_scalar():
    # a float one as a double, as for np.float32 (README): Proton truncates np.array(3.5) to 3
    import numpy as np
    assert typed(one_scope({"f": np.array(3.5), "f32": np.array(0.5, np.float32), "i": np.array(7)})) == {
        "f": ("float", 3.5), "f32": ("float", 0.5), "i": ("int", 7)}


def test_lists_and_tuples_become_vectors_and_mixed_lists_vectors_of_doubles():
    assert typed(one_scope({"e": [], "t": (1, 2), "mix": [1, 2.5], "mix2": [2.5, 1]})) == {
        "e": ("list", []), "t": ("list", [("int", 1), ("int", 2)]),
        "mix": ("list", [("float", 1.0), ("float", 2.5)]), "mix2": ("list", [("float", 2.5), ("float", 1.0)])}


def test_numpy_arrays_become_vectors():
    import numpy as np
    assert typed(one_scope({"a": np.array([1, 2]), "b": np.array([0.5, 1.5])})) == {
        "a": ("list", [("int", 1), ("int", 2)]), "b": ("list", [("float", 0.5), ("float", 1.5)])}


def test_roofline_keys_are_normalised_flops_to_double_bytes_to_int():
    assert typed(one_scope({"flops": 3, "flops8": 1, "flops16": 2, "flops64": 4, "bytes": 2.5, "bytes2": 2.5,
                            "other": 3})) == {
        "flops": ("float", 3.0), "flops8": ("float", 1.0), "flops16": ("float", 2.0), "flops64": ("float", 4.0),
        "bytes": ("int", 2), "bytes2": ("float", 2.5), "other": ("int", 3)}


def test_roofline_lists_are_normalised_element_wise():
    assert typed(one_scope({"flops32": [1, 2], "bytes": [1.5, 2.5]})) == {
        "flops32": ("list", [("float", 1.0), ("float", 2.0)]), "bytes": ("list", [("int", 1), ("int", 2)])}


def test_a_one_element_cpu_tensor_is_stored_as_its_item():
    torch = pytest.importorskip("torch")
    assert typed(one_scope({"one": torch.tensor(3), "bytes": torch.tensor([1.5])})) == {
        "one": ("int", 3), "bytes": ("int", 1)}


# --- names and aggregation ------------------------------------------------------------------

def test_suffixes_are_parsed_the_last_one_wins_and_spaces_are_trimmed():
    proton.start("s", backend="host")
    for v in (2, 3):
        with proton.scope("n", {"z (exc) ": v, " q (pty)": v, "x (inc) ": v, "y (exc)z": v, "p (pty)(exc)": v,
                                "r (exc)(pty)": v, "e (exc) (pty)": v, "f (pty) (exc)": v, "q2 (pty) ": v,
                                "w (exc)(inc)": v, "k (EXC)": v, "y  (inc)": v}):
            pass
    proton.finalize()
    # summed: 2 + 3 = 5; properties: the last value, 3
    assert written("s")["n"] == {"e": 3, "f": 5, "k (EXC)": 5, "p": 5, "q": 3, "q2": 5, "r": 3, "w (inc)": 5,
                                 "x (inc)": 5, "y  (inc)": 5, "y z": 5, "z": 5}


def test_plain_inclusive_and_exclusive_metrics_are_summed_and_properties_overwritten():
    proton.start("kinds", backend="host")
    for _ in range(2):
        with proton.scope("outer", {"tokens (inc)": 128}):
            with proton.scope("inner", {"cpu_wait (ns)(exc)": 90, "flops": 1.5e9, "bytes": 1000}):
                pass
        proton.enter_scope("config", metrics={"tile_size (pty)": 128})
        proton.exit_scope()
    with proton.scope("pv", {"p (pty)": 5}):
        pass
    with proton.scope("pv", {"p (pty)": 6}):
        pass
    proton.finalize()
    assert written("kinds") == {"outer": {"tokens (inc)": 256},
                                "outer/inner": {"bytes": 2000, "cpu_wait (ns)": 180, "flops": 3000000000.0},
                                "config": {"tile_size": 128}, "pv": {"p": 6}}


def test_vectors_are_summed_element_wise():
    proton.start("vec", backend="host")
    for v in ([10.0, 12.0, 11.0], [1.0, 2.0, 3.0]):
        with proton.scope("vec", {"latency_samples": v}):
            pass
    for v in ([1, 2], (3, 4)):
        with proton.scope("ivec", {"s": v}):
            pass
    proton.finalize()
    tree = written("vec")
    assert typed(tree["vec"]) == {"latency_samples": ("list", [("float", 11.0), ("float", 14.0), ("float", 14.0)])}
    assert typed(tree["ivec"]) == {"s": ("list", [("int", 4), ("int", 6)])}


def test_the_first_add_at_a_node_fixes_the_kind_of_a_metric_name():
    proton.start("k", backend="host")
    for name, metrics in (("a", {"v": 1}), ("a", {"v (pty)": 2}),         # summed: 3
                          ("b", {"v (pty)": 5}), ("b", {"v": 2}),         # overwritten: 2
                          ("c", {"v": 1, "v (inc)": 2}),                  # two metrics
                          ("d", {"p (pty)": [1, 2]}), ("d", {"p (pty)": [1, 2, 3]})):  # a property may grow
        with proton.scope(name, metrics):
            pass
    proton.finalize()
    assert written("k") == {"a": {"v": 3}, "b": {"v": 2}, "c": {"v": 1, "v (inc)": 2}, "d": {"p": [1, 2, 3]}}


def test_the_same_name_may_have_another_type_at_another_node():
    proton.start("nodes", backend="host")
    with proton.scope("n1", {"v": 1}):
        pass
    with proton.scope("n2", {"v": 1.5}):
        pass
    proton.finalize()
    assert typed(written("nodes")["n1"]) == {"v": ("int", 1)}
    assert typed(written("nodes")["n2"]) == {"v": ("float", 1.5)}


def test_exit_scope_metrics_are_added_to_the_metrics_given_at_enter():
    proton.start("x", backend="host")
    proton.enter_scope("e", metrics={"x": 1})
    proton.exit_scope(metrics={"y": 2, "x": 3})
    proton.finalize()
    assert written("x") == {"e": {"x": 4, "y": 2}}


# --- errors ---------------------------------------------------------------------------------

def test_metric_changing_from_int_to_double_raises_type_mismatch():
    proton.start("t", backend="host")
    with proton.scope("m", {"v": 1}):
        pass
    with pytest.raises(ValueError) as e:
        with proton.scope("m", {"v": 1.5}):
            pass
    assert str(e.value) == MISMATCH.format("v", "int64_t", "double")


def test_property_changing_type_raises_type_mismatch():
    proton.start("t", backend="host")
    with proton.scope("p", {"v (pty)": 1}):
        pass
    with pytest.raises(ValueError) as e:
        proton.enter_scope("p", metrics={"v (pty)": 2.5})
    assert str(e.value) == MISMATCH.format("v", "int64_t", "double")


def test_vector_changing_element_type_raises_type_mismatch():
    proton.start("t", backend="host")
    with proton.scope("m", {"v": [1, 2]}):
        pass
    with pytest.raises(ValueError) as e:
        proton.enter_scope("m", metrics={"v": [1.5, 2]})
    assert str(e.value) == MISMATCH.format("v", "std::vector<int64_t>", "std::vector<double>")


def test_vector_changing_length_raises_size_mismatch():
    proton.start("t", backend="host")
    with proton.scope("m", {"v": [1, 2]}):
        pass
    with pytest.raises(ValueError) as e:
        proton.enter_scope("m", metrics={"v": [1, 2, 3]})
    assert str(e.value) == "[PROTON] Vector metric size mismatch for valueId 0 (v): current=2, new=3"


def test_type_mismatch_in_a_dict_keeps_the_keys_sorting_before_it_and_drops_the_rest():
    proton.start("t", backend="host")
    with proton.scope("m", {"a": 1, "b": 1}):
        pass
    with pytest.raises(ValueError) as e:
        with proton.scope("m", {"c": 1, "b": 1.5, "a": 2}):
            pass
    proton.finalize()
    assert str(e.value) == MISMATCH.format("b", "int64_t", "double")
    assert written("t") == {"m": {"a": 3, "b": 1}}


EXPECTED_VALUE = "the value must be an int, a float, a bool, a list or tuple of them, or a tensor"


@pytest.mark.parametrize("value, given", [
    ("string", "str ('string')"), (None, "NoneType (None)"), ({"k": 1}, "dict ({'k': 1})"),
    (1j, "complex (1j)"), ([1, "x"], "list ([1, 'x']); element 1 is str ('x')"),
], ids=["str", "None", "dict", "complex", "list_with_str"])
def test_metric_value_of_unsupported_type_raises_type_error_naming_the_key_and_the_expected_types(value, given):
    # Proton: TypeError "add_metrics(): incompatible function arguments ... Invoked with types: int, dict, dict"
    proton.start("bad", backend="host")
    with pytest.raises(TypeError) as e:
        proton.enter_scope("m", metrics={"v": value})
    assert str(e.value) == f"metric 'v': {EXPECTED_VALUE}, not {given}"


def test_metric_value_of_an_object_quotes_a_shortened_repr():
    class Long:
        def __repr__(self):
            return "x" * 500
    proton.start("bad", backend="host")
    with pytest.raises(TypeError) as e:
        proton.enter_scope("m", metrics={"v": Long()})
    assert str(e.value) == f"metric 'v': {EXPECTED_VALUE}, not Long ({'x' * 57}...)"


def test_metric_with_a_non_str_key_raises_type_error_naming_the_key():
    proton.start("bad", backend="host")
    with pytest.raises(TypeError) as e:
        proton.enter_scope("m", metrics={1: 2})
    assert str(e.value) == "metric names must be str, not int (1)"


@pytest.mark.parametrize("key, value, kind, stored", [
    ("flops", "lots", ValueError, "float"), ("flops32", None, TypeError, "float"),
    ("bytes", "many", ValueError, "int"), ("bytes", float("nan"), ValueError, "int"),
], ids=["flops_str", "flops32_none", "bytes_str", "bytes_nan"])
def test_roofline_value_that_is_not_a_number_keeps_protons_exception_type_and_names_the_key(key, value, kind, stored):
    # Proton: float("lots") / int(nan) raise from inside the scope without naming the metric
    proton.start("bad", backend="host")
    with pytest.raises(kind) as e:
        with proton.scope("s", {key: value}):
            pass
    assert str(e.value) == (f"metric {key!r}: the value must be a number or a list of numbers (stored as {stored}), "
                            f"not {type(value).__name__} ({value!r})")


@pytest.mark.parametrize("metrics", [[("flops", 1)], [1, 2], [[1]], "ab"], ids=["pairs", "numbers", "nested", "str"])
def test_metrics_that_are_not_a_dict_say_a_dict_is_expected(metrics):
    # Proton: AttributeError "'list' object has no attribute 'items'"; ours is an AttributeError and a TypeError
    proton.start("bad", backend="host")
    with pytest.raises(AttributeError) as e:
        with proton.scope("s", metrics):
            pass
    assert isinstance(e.value, TypeError)
    assert str(e.value) == f"metrics must be a dict {{name: value}}, not {type(metrics).__name__} ({metrics!r})"
    with pytest.raises(TypeError):
        proton.enter_scope("e", metrics=metrics)


def test_unsupported_value_keeps_no_key_of_the_dict_and_closes_the_scope():
    # Proton leaves "bad" open: "next" would land at bad/next
    proton.start("none", backend="host")
    with pytest.raises(TypeError):
        with proton.scope("bad", {"ok": 1, "v": None}):
            pass
    with proton.scope("next"):
        pass
    proton.finalize()
    assert written("none") == {"bad": {}, "next": {}}
