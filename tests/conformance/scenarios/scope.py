"""Scopes: nesting, enter_scope/exit_scope ids and errors, the decorator, no session, cpu_timed_scope.

Each scenario is ``def name(proton, out, rec)`` (see ``__init__``).
"""


def nested(proton, out, rec):
    proton.start(out("nested"))
    for _ in range(3):
        with proton.scope("test0"):
            with proton.scope("test1"):
                pass
            with proton.scope("test2"):
                pass
    proton.finalize()


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


def scope_decorator(proton, out, rec):
    proton.start(out("sdec"))

    @proton.scope("deco", {"c": 1})
    def f(x):
        return x * 2
    rec("r", [f(1), f(2)])
    rec("name", f.__name__)
    proton.finalize()


def no_session_noop(proton, out, rec):
    with proton.scope("x") as s:
        rec("id", s.id)
    rec("enter", proton.enter_scope("y"))
    rec("exit", proton.exit_scope())
    with proton.state("s"):
        pass
    rec("depth", proton.context.depth())


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


def scope_decorator_raises(proton, out, rec):
    proton.start(out("sr"))

    @proton.scope("sc")
    def g():
        raise KeyError("k")
    try:
        g()
    except KeyError:
        rec("decorator_raised", True)
    with proton.scope("after_scope_raise"):
        pass
    try:
        with proton.scope("cm"):
            raise KeyError("z")
    except KeyError as e:
        rec("propagated", str(e))
    with proton.scope("ROOT", {"r": 1}):
        pass
    proton.finalize()


def subclass_overriding_enter_and_exit(proton, out, rec):
    calls = []

    class traced(proton.scope):
        def _enter_scope(self):
            calls.append(["enter", self.name])
            super()._enter_scope()

        def _exit_scope(self):
            calls.append(["exit", self.name])
            super()._exit_scope()

    proton.start(out("sub"))
    for _ in range(3):
        with traced("a", {"m": 1}):
            with traced("b"):
                pass
    traced("deco")(lambda: None)()
    proton.finalize()
    rec("calls", calls)
