"""States: the single per-thread slot, metadata_state wiping it, decorator, threads.

Each scenario is ``def name(proton, out, rec)`` (see ``__init__``).
"""
import threading


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


def state_decorator_raises(proton, out, rec):
    proton.start(out("sr"))

    @proton.state("st")
    def f():
        raise KeyError("k")
    try:
        f()
    except KeyError:
        rec("raised", True)
    with proton.scope("after_state_raise", {"m": 1}):  # the state is still set
        pass
    proton.exit_state()
    proton.finalize()


def state_metadata_and_colon_names(proton, out, rec):
    proton.start(out("mk"))
    with proton.metadata_state("k"):
        with proton.scope("s1"):
            pass
    with proton.metadata_state():
        with proton.scope("s2"):
            pass
    proton.enter_state("__proton_launch_metadata:kk")
    with proton.scope("u"):
        pass
    proton.exit_state()
    with proton.state("x:y"):
        with proton.scope("s"):
            pass
    with proton.scope("p:q", {"m": 1}):
        pass
    proton.finalize()


def state_at_enter_gone_at_exit(proton, out, rec):
    proton.start(out("ge"))
    with proton.state("u"):
        proton.enter_scope("a", metrics={"m": 1})
    proton.exit_scope(metrics={"e": 2})
    with proton.state("u"):
        with proton.scope("m"):
            with proton.scope("n"):
                pass
    proton.enter_scope("ct_outer")
    with proton.state("w"):
        with proton.cpu_timed_scope("c"):
            pass
    proton.exit_scope()
    proton.finalize()


def state_survives_cpu_timed_scope(proton, out, rec):
    proton.start(out("cs"))
    with proton.state("s"):
        with proton.cpu_timed_scope("c"):
            pass
        with proton.scope("a", {"m": 1}):
            pass
        with proton.scope("b"):
            pass
    proton.finalize()


def state_survives_cpu_timed_scope_in_trace(proton, out, rec):
    proton.start(out("ct"), data="trace")
    with proton.state("s"):
        with proton.cpu_timed_scope("c"):
            pass
        with proton.scope("a", {"m": 1}):
            pass
        with proton.scope("b"):
            pass
    proton.finalize()


def state_needs_an_active_session(proton, out, rec):
    s = proton.start(out("idle"))
    proton.deactivate(s)
    proton.enter_state("ignored")
    proton.activate(s)
    with proton.scope("a", {"m": 1}):
        pass
    proton.enter_state("kept")
    proton.deactivate(s)
    proton.exit_state()
    proton.activate(s)
    with proton.scope("b", {"m": 1}):
        pass
    proton.finalize()


def finalize_clears_the_state_of_its_thread(proton, out, rec):
    a = proton.start(out("one"))
    b = proton.start(out("two"))
    proton.enter_state("s")
    try:
        proton.finalize(a, "nope")
    except ValueError as e:
        rec("error", str(e))
    with proton.scope("kept", {"m": 1}):
        pass
    proton.activate(a)
    proton.finalize(a)
    with proton.scope("cleared", {"m": 1}):
        pass
    proton.finalize(b)
