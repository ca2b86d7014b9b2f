"""Sessions: ids, names, several sessions, activate/deactivate, the profile decorator, bad arguments.

Each scenario is ``def name(proton, out, rec)`` (see ``__init__``).
"""
import os


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


def finalize_with_open_scope(proton, out, rec):
    s = proton.start(out("fo"))
    with proton.scope("a"):
        proton.finalize(s)
    rec("profiling_on", proton.flags.flags.profiling_on)
    proton.finalize()


def knob_disable(proton, out, rec):
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


def activate_deactivate_all(proton, out, rec):
    proton.start(out("a1"))
    proton.start(out("a2"))
    proton.deactivate()
    with proton.scope("off"):
        pass
    proton.activate()
    with proton.scope("on"):
        pass
    proton.finalize()


def profile_decorator_raises(proton, out, rec):
    @proton.profile
    def bare():
        with proton.scope("in_bare"):
            pass
        return 5
    rec("bare", bare())

    @proton.profile(name=out("r"))
    def boom():
        raise KeyError("x")
    try:
        boom()
    except KeyError:
        rec("raised", True)
    with proton.scope("after_boom"):  # boom's session is still active
        pass
    proton.finalize()


def argument_type_errors(proton, out, rec):
    s = proton.start(out("types"))
    calls = {
        "start_name": lambda: proton.start(123),
        "start_context": lambda: proton.start(out("n"), context=5),
        "start_data": lambda: proton.start(out("n"), data=5),
        "scope_name": lambda: proton.scope(123).__enter__(),
        "enter_scope_name": lambda: proton.enter_scope(3),
        "state_name": lambda: proton.state(5).__enter__(),
        "enter_state_name": lambda: proton.enter_state(5),
        "finalize_session": lambda: proton.finalize("x"),
        "finalize_format": lambda: proton.finalize(s, 5),
        "activate": lambda: proton.activate("x"),
        "deactivate": lambda: proton.deactivate("x"),
        "deactivate_flushing": lambda: proton.deactivate(s, "y"),
        "get": lambda: proton.data.get("x"),
        "get_phase": lambda: proton.data.get(s, "p"),
        "get_msgpack": lambda: proton.data.get_msgpack("x"),
        "advance_phase": lambda: proton.data.advance_phase("x"),
        "is_phase_complete": lambda: proton.data.is_phase_complete("x"),
        "clear": lambda: proton.data.clear("x"),
        "depth": lambda: proton.context.depth("x"),
    }
    for name, call in calls.items():
        try:
            call()
            rec(name, "no error")
        except TypeError as e:
            rec(name, f"{type(e).__name__}: {e}")
    with proton.scope("after"):
        pass
    proton.finalize()


def finalize_into_a_missing_folder(proton, out, rec):
    """A session named into folders that do not exist: ``finalize`` returns, and the other
    session (an existing folder) is written, in both.  Proton writes nothing there and says
    nothing; proton_ctypes creates the folders and writes the profile (a deliberate difference,
    README; ``normalize.DEVIATIONS`` leaves the created folder out)."""
    lost = proton.start(os.path.join(out("missing"), "run", "prof"))
    kept = proton.start(out("kept"))
    rec("ids", [lost, kept])
    with proton.scope("a"):
        pass
    proton.finalize()
    rec("after", "finalize returned")
