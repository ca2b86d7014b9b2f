"""Host-only scenarios run under both the real triton.profiler (oracle) and proton_ctypes.

Each scenario is ``def name(proton, out, rec)``: ``proton`` is the profiler module,
``out(name)`` a path in the output folder, ``rec(key, value)`` records a returned value.
Exceptions are recorded by the runner (type and message).  Keep scenarios free of
timing-dependent values; times are compared by presence only.
"""
import threading


def nested(proton, out, rec):
    proton.start(out("nested"))
    for _ in range(3):
        with proton.scope("test0"):
            with proton.scope("test1"):
                pass
            with proton.scope("test2"):
                pass
    proton.finalize()


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


def cpu_timed(proton, out, rec):
    proton.start(out("c"))
    with proton.cpu_timed_scope("host"):
        with proton.cpu_timed_scope("inner", {"cpu_time (ns)": 5}):
            pass
    for _ in range(2):
        with proton.cpu_timed_scope("rep"):
            pass

    @proton.cpu_timed_scope("deco")
    def f():
        return 3
    rec("ret", f())
    proton.finalize()


def cpu_time_reserved(proton, out, rec):
    proton.start(out("c"))
    proton.cpu_timed_scope("c", {"cpu_time": 1})


def states(proton, out, rec):
    proton.start(out("st"))
    with proton.scope("iteration"):
        with proton.state("optimizer"):
            with proton.scope("sub"):
                with proton.scope("leaf", {"v": 1}):
                    pass
        with proton.state("outer_state"):
            with proton.state("inner_state"):
                with proton.scope("x", {"m": 1}):
                    pass
            with proton.scope("after_inner", {"m": 1}):
                pass
        proton.enter_state("manual")
        proton.enter_state("manual2")
        with proton.scope("y"):
            pass
        proton.exit_state()
        with proton.scope("z"):
            pass
    with proton.state("empty"):
        pass
    proton.finalize()


def state_metadata_wipes(proton, out, rec):
    proton.start(out("md"))
    with proton.state("u"):
        with proton.scope("a", {"m": 1}):
            with proton.scope("b"):
                pass
        with proton.scope("c", {"k": 1}):
            pass
    proton.enter_scope("e")
    with proton.state("w"):
        proton.exit_scope(metrics={"e": 5})
    proton.finalize()


def state_before_start(proton, out, rec):
    proton.enter_state("pre")
    proton.start(out("pre"))
    with proton.scope("a", {"m": 1}):
        pass
    proton.finalize()


def state_decorator(proton, out, rec):
    proton.start(out("sd"))

    @proton.state("deco")
    def f():
        with proton.scope("inside"):
            pass
        return 7
    rec("ret", f())
    proton.finalize()


def threads_inherit_stack(proton, out, rec):
    proton.start(out("th"))
    res = []

    def work(i):
        with proton.scope(f"t{i}"):
            with proton.scope("inner", {"n": 1}):
                pass
        res.append(i)
    with proton.scope("outer"):
        ts = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    rec("done", sorted(res))
    proton.finalize()


def thread_state_not_inherited(proton, out, rec):
    proton.start(out("ts"))

    def work():
        with proton.scope("t", {"q": 1}):
            pass
    with proton.state("u"):
        t = threading.Thread(target=work)
        t.start()
        t.join()
    proton.finalize()


def thread_copy_at_first_use(proton, out, rec):
    proton.start(out("cf"))
    ev1, ev2 = threading.Event(), threading.Event()

    def work():
        ev1.wait()
        with proton.scope("t"):
            pass
        ev2.set()
    t = threading.Thread(target=work)
    t.start()
    with proton.scope("m"):
        pass
    with proton.scope("n"):
        ev1.set()
        ev2.wait()
    t.join()
    proton.finalize()


def two_sessions(proton, out, rec):
    s1 = proton.start(out("s1"))
    with proton.scope("both"):
        pass
    s2 = proton.start(out("s2"))
    rec("ids", [s1, s2])
    with proton.scope("both2"):
        pass
    proton.deactivate(s1)
    with proton.scope("only_s2"):
        pass
    proton.activate(s1)
    proton.deactivate(s2)
    with proton.scope("only_s1"):
        pass
    proton.finalize()


def scope_open_when_second_session_starts(proton, out, rec):
    s1 = proton.start(out("o1"))
    try:
        with proton.scope("a"):
            s2 = proton.start(out("o2"))
            with proton.scope("b"):
                pass
    except RuntimeError as e:  # Proton only (spec §0.3): ours closes "a" quietly
        rec("exit_error", f"{type(e).__name__}: {e}")
    proton.finalize(s2)
    proton.finalize(s1)


def deactivate_with_open_scope(proton, out, rec):
    s = proton.start(out("d"))
    with proton.scope("outer"):
        proton.deactivate(s)
        with proton.scope("skipped"):
            pass
        proton.activate(s)
        with proton.scope("counted"):
            pass
    proton.finalize()


def same_name_same_session(proton, out, rec):
    a = proton.start(out("r2"))
    b = proton.start(out("r2"), data="trace")
    rec("ids", [a, b])
    with proton.scope("x"):
        pass
    proton.deactivate(a)
    c = proton.start(out("r2"))
    rec("again", c)
    with proton.scope("y"):
        pass
    proton.finalize()


def ids_never_reused(proton, out, rec):
    ids = []
    for i in range(3):
        ids.append(proton.start(out(f"i{i}")))
        proton.finalize()
    rec("ids", ids)


def enter_exit_ids(proton, out, rec):
    proton.start(out("ee"))
    r = [proton.enter_scope("a"), proton.enter_scope("b"), proton.exit_scope(), proton.exit_scope("a"),
         proton.enter_scope("c"), proton.exit_scope("")]
    rec("ids", r)
    with proton.scope("s") as sc:
        rec("scope_id", sc.id)
    proton.finalize()


def exit_scope_mismatch(proton, out, rec):
    proton.start(out("mm"))
    proton.enter_scope("a")
    proton.exit_scope("b")


def exit_scope_empty(proton, out, rec):
    proton.start(out("em"))
    proton.enter_scope("a")
    proton.exit_scope()
    proton.exit_scope()


def profile_decorator(proton, out, rec):
    @proton.profile(name=out("deco"))
    def run(x):
        with proton.scope("inside"):
            pass
        return x + 1

    @proton.profile
    def bare():
        return "ok"
    rec("r1", run(1))
    rec("r2", run(2))
    rec("name", run.__name__)
    proton.finalize()


def no_session_noop(proton, out, rec):
    with proton.scope("x") as s:
        rec("id", s.id)
    rec("enter", proton.enter_scope("y"))
    rec("exit", proton.exit_scope())
    with proton.state("s"):
        pass
    rec("depth", proton.context.depth())


def context_depth(proton, out, rec):
    s = proton.start(out("dp"))
    rec("d0", proton.context.depth(s))
    with proton.scope("a"):
        with proton.scope("b"):
            rec("d2", proton.context.depth(s))
            with proton.state("st"):
                rec("d2s", proton.context.depth(s))
    proton.finalize()


def bad_context(proton, out, rec):
    proton.start(out("e"), context="nope")


def bad_data(proton, out, rec):
    proton.start(out("e"), data="nope")


def bad_backend(proton, out, rec):
    proton.start(out("e"), backend="nope")


def bad_everything(proton, out, rec):
    proton.start(out("e"), backend="bad", context="bad", data="bad")


def bad_context_and_data(proton, out, rec):
    proton.start(out("e"), context="bad", data="bad")


def bad_hook(proton, out, rec):
    proton.start(out("e"), hook="nope")


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


def unknown_session_ids(proton, out, rec):
    proton.start(out("u"))
    for name, fn in (("activate", lambda: proton.activate(99)), ("deactivate", lambda: proton.deactivate(99)),
                     ("depth", lambda: proton.context.depth(99)), ("get", lambda: proton.data.get(99)),
                     ("finalize", lambda: proton.finalize(99))):
        try:
            rec(name, fn())
        except Exception as e:
            rec(name, f"{type(e).__name__}: {e}")
    proton.finalize()


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


def trace_get_unsupported(proton, out, rec):
    s = proton.start(out("tg"), data="trace")
    proton.data.get(s)


def phases(proton, out, rec):
    s = proton.start(out("ph"))
    with proton.scope("p0"):
        pass
    with proton.scope("open"):
        rec("adv", proton.data.advance_phase(s))
        with proton.scope("p1"):
            pass
    with proton.scope("p1b"):
        pass
    rec("complete0", proton.data.is_phase_complete(s, 0))
    rec("complete1", proton.data.is_phase_complete(s, 1))
    rec("get0", proton.data.get(s, 0))
    rec("get1", proton.data.get(s, 1))
    rec("adv2", proton.data.advance_phase(s))
    proton.deactivate(s, flushing=True)
    rec("complete0_after_flush", proton.data.is_phase_complete(s, 0))
    proton.activate(s)
    proton.finalize()


def phases_clear(proton, out, rec):
    s = proton.start(out("pc"))
    with proton.scope("a"):
        pass
    proton.data.advance_phase(s)
    with proton.scope("b"):
        pass
    proton.data.clear(s, 0)
    try:
        proton.data.get(s, 0)
    except IndexError as e:
        rec("error", f"{type(e).__name__}: {e}")
    try:
        proton.data.get(s, 7)
    except IndexError as e:
        rec("error7", f"{type(e).__name__}: {e}")
    proton.finalize()


def data_none_session(proton, out, rec):
    d = proton.data
    rec("vals", [d.get(None), d.get_msgpack(None), d.advance_phase(None), d.is_phase_complete(None), d.clear(None)])


def pcsampling_interval(proton, out, rec):
    proton.mode.PCSampling(interval=0)


def mode_strings(proton, out, rec):
    m = proton.mode
    rec("pc", str(m.PCSampling(interval=10)))
    rec("default", str(m.Default()))
    rec("mma", str(m.MMA(granularity="warp_group", optimizations="clock32,time_shift", buffer_strategy="flush",
                         buffer_type="global", buffer_size=64)))
    for bad in ({"granularity": "nope"}, {"optimizations": "nope"}, {"buffer_type": "x"}):
        try:
            m.Default(**bad)
        except ValueError as e:
            rec(str(sorted(bad)), str(e))


def launch_hook_singleton(proton, out, rec):
    H = proton.hooks.LaunchHook
    a, b = H(), H()
    rec("same", a is b)
    rec("priority", a.priority)
    a.configure(include="add.*", exclude=".*_n4096")
    rec("match", [a._matches_kernel_name(n) for n in ("add_one", "mul", "add_one_n40960", None)])
    s = proton.start(out("lh"), hook="triton")
    t = proton.start(out("lh2"), hook="triton")
    HM = proton.hooks.HookManager
    rec("active", len(HM.active_hooks))
    proton.deactivate(s)
    rec("after_s", len(HM.active_hooks))
    proton.deactivate(t)
    rec("after_t", len(HM.active_hooks))
    proton.activate(s)
    rec("back", len(HM.active_hooks))
    proton.finalize()
    rec("end", len(HM.active_hooks))


def finalize_with_open_scope(proton, out, rec):
    s = proton.start(out("fo"))
    with proton.scope("a"):
        proton.finalize(s)
    rec("profiling_on", proton.flags.flags.profiling_on)
    proton.finalize()


def scope_decorator(proton, out, rec):
    proton.start(out("sdec"))

    @proton.scope("deco", {"c": 1})
    def f(x):
        return x * 2
    rec("r", [f(1), f(2)])
    rec("name", f.__name__)
    proton.finalize()


def knob_disable(proton, out, rec):
    import os
    os.environ["TRITON_PROTON_DISABLE"] = "1"
    try:
        try:
            import triton
            triton.knobs.proton.disable = True
        except Exception:
            pass
        rec("start", proton.start(out("dis")))
        with proton.scope("a") as s:
            rec("id", s.id)
        proton.finalize()
    finally:
        os.environ["TRITON_PROTON_DISABLE"] = "0"


def python_context(proton, out, rec):
    proton.start(out("py"), context="python")

    def inner():
        with proton.scope("x", {"m": 1}):
            pass

    def outer():
        inner()
        with proton.cpu_timed_scope("c"):
            pass
    for _ in range(2):
        outer()
    proton.enter_scope("e", metrics={"k": 2})
    proton.exit_scope()
    proton.finalize()


def trace_empty(proton, out, rec):
    proton.start(out("te"), data="trace")
    proton.finalize()


def _hook_launch(proton, name, meta):
    """One Triton launch as the runtime makes it: the launch hooks around a LazyDict."""
    from triton.compiler.compiler import LazyDict
    md = LazyDict({"name": name, "function": 0, "stream": 0})
    md.add(lambda: dict(meta), ())
    proton.hooks.HookManager.enter(md)
    proton.hooks.HookManager.exit(md)


def launch_hook_metrics_over_launches(proton, out, rec):
    import numpy as np
    proton.hooks.LaunchHook().configure()
    proton.start(out("hm"), hook="triton")
    with proton.scope("s"):
        for i in range(3):
            _hook_launch(proton, "k", {"name": "k_op", "flops32": 100, "bytes": 10.9, "c": i, "last (pty)": i,
                                       "label": "x", "none": None})
        _hook_launch(proton, "k", {"name": "k_op", "flops32": 100, "bytes": 10, "c": 1, "label": 4, "none": 2.0})
        _hook_launch(proton, "k", {"name": "k_op", "c": np.int64(5), "f": np.float64(0.5)})
        _hook_launch(proton, "k", {"name": "k_op", "c": True})
    proton.finalize()


def _hook_launches_then_a_bad_one(proton, out, rec, name, good, bad):
    """Two launches with metadata ``good``, then one with ``bad``; record its ValueError.

    Proton records no launch after a failing one, so the scenario ends there (proton_ctypes
    keeps recording: tests/test_launch_hook_plans.py)."""
    proton.hooks.LaunchHook().configure()
    proton.start(out(name), hook="triton")
    with proton.scope("s"):
        for _ in range(2):
            _hook_launch(proton, "k", good)
        try:
            _hook_launch(proton, "k", bad)
        except ValueError as e:
            rec("error", str(e))
    proton.finalize()


def launch_hook_type_mismatch(proton, out, rec):
    _hook_launches_then_a_bad_one(proton, out, rec, "hmm", {"name": "k_op", "a": 1, "c": 2, "z": 3},
                                  {"name": "k_op", "a": 1, "c": 2.5, "z": 3})


def launch_hook_int_beyond_int64(proton, out, rec):
    _hook_launches_then_a_bad_one(proton, out, rec, "hmw", {"name": "k_op", "a": 1, "c": 2},
                                  {"name": "k_op", "a": 1, "c": 2 ** 70})
