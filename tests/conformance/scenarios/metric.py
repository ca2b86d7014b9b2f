"""Metrics given to scopes: accepted values, suffixes, aggregation, type and size errors.

Each scenario is ``def name(proton, out, rec)`` (see ``__init__``).
"""


def metrics_kinds(proton, out, rec):
    proton.start(out("m"))
    for _ in range(2):
        with proton.scope("outer", {"tokens (inc)": 128}):
            with proton.scope("inner", {"cpu_wait (ns)(exc)": 90, "flops": 1.5e9, "bytes": 1000}):
                pass
        proton.enter_scope("config", metrics={"tile_size (pty)": 128})
        proton.exit_scope()
    with proton.scope("vec", {"latency_samples": [10.0, 12.0, 11.0]}):
        pass
    with proton.scope("vec", {"latency_samples": [1, 2, 3]}):
        pass
    proton.finalize()


def metrics_values(proton, out, rec):
    import numpy as np
    proton.start(out("v"))
    with proton.scope("a", {"b": True, "big": 2 ** 63, "neg": -5, "f": 2.5, "npi": np.int32(7),
                            "npf": np.float64(0.25), "nan": float("nan"), "inf": float("inf")}):
        pass
    with proton.scope("lists", {"e": [], "t": (1, 2), "mix": [1, 2.5], "mix2": [2.5, 1]}):
        pass
    with proton.scope("roof", {"flops": 3, "flops8": 1, "flops16": 2, "flops64": 4, "bytes": 2.5,
                               "bytes2": 2.5, "other": 3}):
        pass
    with proton.scope("arr", {"a": np.array([1, 2]), "b": np.array([0.5, 1.5])}):
        pass
    proton.finalize()


def metrics_suffixes(proton, out, rec):
    proton.start(out("s"))
    for v in (2, 3):
        with proton.scope("n", {"z (exc) ": v, " q (pty)": v, "x (inc) ": v, "y (exc)z": v, "p (pty)(exc)": v,
                                "r (exc)(pty)": v, "e (exc) (pty)": v, "f (pty) (exc)": v, "q2 (pty) ": v,
                                "w (exc)(inc)": v, "k (EXC)": v, "y  (inc)": v}):
            pass
    proton.finalize()


def metrics_kind_fixed_by_first_add(proton, out, rec):
    proton.start(out("k"))
    with proton.scope("a", {"v": 1}):
        pass
    with proton.scope("a", {"v (pty)": 2}):
        pass
    with proton.scope("b", {"v (pty)": 5}):
        pass
    with proton.scope("b", {"v": 2}):
        pass
    with proton.scope("c", {"v": 1, "v (inc)": 2}):
        pass
    with proton.scope("d", {"p (pty)": [1, 2]}):
        pass
    with proton.scope("d", {"p (pty)": [1, 2, 3]}):
        pass
    proton.finalize()


def metrics_exit_scope(proton, out, rec):
    proton.start(out("x"))
    proton.enter_scope("e", metrics={"x": 1})
    proton.exit_scope(metrics={"y": 2, "x": 3})
    proton.finalize()


def metric_type_mismatch(proton, out, rec):
    proton.start(out("t"))
    with proton.scope("m", {"v": 1}):
        pass
    with proton.scope("m", {"v": 1.5}):
        pass


def metric_type_mismatch_partial_dict(proton, out, rec):
    proton.start(out("t"))
    with proton.scope("m", {"a": 1, "b": 1}):
        pass
    try:
        with proton.scope("m", {"c": 1, "b": 1.5, "a": 2}):
            pass
    except ValueError as e:
        rec("error", f"{type(e).__name__}: {e}")
    proton.finalize()


def vector_size_mismatch(proton, out, rec):
    proton.start(out("t"))
    with proton.scope("m", {"v": [1, 2]}):
        pass
    with proton.scope("m", {"v": [1, 2, 3]}):
        pass


def vector_type_mismatch(proton, out, rec):
    proton.start(out("t"))
    with proton.scope("m", {"v": [1, 2]}):
        pass
    with proton.scope("m", {"v": [1.5, 2]}):
        pass


def metric_bad_value(proton, out, rec):
    proton.start(out("t"))
    with proton.scope("m", {"v": "string"}):
        pass


def metric_none_value(proton, out, rec):
    proton.start(out("t"))
    with proton.scope("m", {"ok": 1, "v": None}):
        pass


def metric_errors_leave_the_scope_entered(proton, out, rec):
    proton.start(out("f"))
    try:
        with proton.scope("k", {1: 2}):
            pass
    except TypeError as e:
        rec("non_str_key", type(e).__name__)
    try:
        with proton.scope("p", {"v (pty)": 1}):
            pass
        with proton.scope("p", {"v (pty)": 2.5}):
            pass
    except ValueError as e:
        rec("property", str(e))
    with proton.scope("n1", {"v": 1}):
        pass
    with proton.scope("n2", {"v": 1.5}):
        pass
    proton.finalize()


def metric_bad_value_kinds(proton, out, rec):
    proton.start(out("b"))
    for i, v in enumerate(({"k": 1}, 1j, object(), [1, "x"])):
        try:
            proton.enter_scope(f"s{i}", metrics={"v": v})
        except TypeError as e:
            rec(str(i), str(e))
    proton.finalize()


def refused_scope_metrics_leave_no_scope_open(proton, out, rec):
    proton.start(out("r"))
    for i in range(3):
        try:
            with proton.scope("s", {"m": "x"}):
                pass
        except TypeError as e:
            rec(f"error{i}", f"{type(e).__name__}: {e}")
    with proton.scope("good", {"g": 1}):
        pass
    proton.finalize()


def one_key_metrics_repeated(proton, out, rec):
    proton.start(out("o"))
    proton.start(out("o2"))
    for value in (1, 2, True, 4):
        with proton.scope("i", {"n": value}):
            pass
    for key, value in (("x", 0.5), ("y", 0.5), ("x", 0.5), ("lr (pty)", 0.25), ("lr", 0.5), ("lr", 0.75)):
        with proton.scope("k", {key: value}):
            pass
    for _ in range(3):
        with proton.state("st"):
            with proton.scope("s", {"m": 2}):
                pass
    # after repeats, a float; on another node, an int beyond int64 (a double)
    for name, last in (("e1", 3.5), ("e2", 1 << 70)):
        for value in (1, 1, last):
            try:
                with proton.scope(name, {"n": value}):
                    pass
            except (TypeError, ValueError) as e:
                rec(f"{name} {value!r}", f"{type(e).__name__}: {e}")
    proton.finalize()


def metrics_kind_fixed_by_first_add_on_repeats(proton, out, rec):
    proton.start(out("kr"))
    proton.start(out("kr2"))
    for node, first, then in (("a", "v (pty)", "v"), ("b", "v", "v (pty)")):
        with proton.scope(node, {first: 0.5, "n": 1}):
            pass
        for value in (0.25, 0.125, 0.0625):   # repeats of one shape: the planned path
            with proton.scope(node, {then: value, "n": 1}):
                pass
        for value in (0.25, 0.125):           # one key: the entries a view keeps
            with proton.scope(node + "1", {first: 0.5}):
                pass
            with proton.scope(node + "1", {then: value}):
                pass
    proton.finalize()
