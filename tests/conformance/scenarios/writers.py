"""Output files: hatchet_msgpack, chrome_trace, output format errors.

Each scenario is ``def name(proton, out, rec)`` (see ``__init__``).
"""
import threading


def msgpack_output(proton, out, rec):
    import msgpack
    s = proton.start(out("mp"))
    with proton.scope("a", {"zz": 1, "aa": 2.5, "i (inc)": 3, "k (pty)": 4, "v": [1, 2], "mm": 0}):
        with proton.scope("b"):
            with proton.scope("d"):
                with proton.scope("e"):
                    pass
    with proton.scope("f"):
        with proton.scope("g"):
            with proton.scope("h"):
                pass
    rec("get_msgpack", msgpack.unpackb(proton.data.get_msgpack(s)))
    rec("get", proton.data.get(s))
    proton.finalize(s, "hatchet_msgpack")


def trace_data(proton, out, rec):
    proton.start(out("tr"), data="trace")
    with proton.scope("a"):
        with proton.scope("b", {"m": 1, "z (exc)": 2.5, "v": [1, 2]}):
            pass
        with proton.state("st"):
            with proton.scope("c"):
                pass
        proton.enter_scope("e", metrics={"m": 1})
        proton.exit_scope(metrics={"m": 4})
        with proton.cpu_timed_scope("ct", {"k (pty)": 1, "y (inc)": 2}):
            pass

    def th():
        with proton.scope("t"):
            pass
    x = threading.Thread(target=th)
    x.start()
    x.join()
    proton.finalize()


def trace_empty(proton, out, rec):
    proton.start(out("te"), data="trace")
    proton.finalize()


def bad_output_format(proton, out, rec):
    s = proton.start(out("e"))
    with proton.scope("a"):
        pass
    try:
        proton.finalize(s, "nope")
    except ValueError as e:
        rec("error", f"{type(e).__name__}: {e}")
    rec("data_after", proton.data.get(s))
    proton.finalize(s, "HATCHET")


def output_format_not_supported(proton, out, rec):
    s = proton.start(out("ns"))
    try:
        proton.finalize(s, "chrome_trace")
    except ValueError as e:
        rec("error", f"{type(e).__name__}: {e}")
    proton.finalize()


def children_order_per_session(proton, out, rec):
    for name, order in (("s1", ("b", "a")), ("s2", ("a", "b"))):
        proton.start(out(name))
        for n in order:
            with proton.scope(n):
                pass
        proton.finalize()


def msgpack_nan_and_infinities(proton, out, rec):
    s = proton.start(out("mn"))
    with proton.scope("a", {"n": float("nan"), "inf": float("inf"), "ninf": float("-inf"), "big": 1e300}):
        pass
    proton.finalize(s, "hatchet_msgpack")


def trace_vector_of_doubles(proton, out, rec):
    proton.start(out("tv"), data="trace")
    with proton.scope("main", {"d": 0.5, "v": [1.5, 2.5], "i": [1, 2]}):
        pass
    proton.finalize()


def trace_phases_and_threads(proton, out, rec):
    s = proton.start(out("tp"), data="trace")

    def th():
        with proton.scope("t1"):
            pass
    x = threading.Thread(target=th)
    x.start()
    x.join()
    with proton.scope("main"):
        pass
    proton.data.advance_phase(s)
    with proton.scope("p1"):
        pass
    proton.finalize()


def failed_finalize_leaves_the_session_deactivated(proton, out, rec):
    s = proton.start(out("kept"))
    with proton.scope("a"):
        pass
    for fmt in ("nope", "chrome_trace"):
        try:
            proton.finalize(s, fmt)
        except ValueError as e:
            rec(fmt, str(e))
    with proton.scope("while_deactivated"):
        pass
    proton.activate(s)
    with proton.scope("after_activate"):
        pass
    proton.finalize()


def trace_events_check_metric_types_within_themselves(proton, out, rec):
    proton.start(out("types"), data="trace")
    for v in (1, 1.5, [1, 2], [1, 2, 3]):
        with proton.scope("m", {"v": v, "w (pty)": v}):
            pass
    proton.enter_scope("e", metrics={"x": 1})
    proton.exit_scope(metrics={"x": 2, "y": 0.5})
    proton.finalize()
