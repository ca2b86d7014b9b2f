"""proton.data: phases, clear, the None session, trace data.

Each scenario is ``def name(proton, out, rec)`` (see ``__init__``).
"""


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


def phases_scope_open_across_an_advance(proton, out, rec):
    """A scope still open when the phase advances is in the new phase only once something
    happens in it (a child scope, a state).  (Metrics given at its exit raise an IndexError
    from libproton: not compared.)"""
    s = proton.start(out("po"))
    with proton.scope("idle"):
        proton.data.advance_phase(s)
    with proton.scope("child"):
        proton.data.advance_phase(s)
        with proton.scope("inner"):
            pass
    with proton.scope("state"):
        proton.data.advance_phase(s)
        with proton.state("st"):
            pass
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


def trace_get_unsupported(proton, out, rec):
    s = proton.start(out("tg"), data="trace")
    proton.data.get(s)


def phases_clear_up_to(proton, out, rec):
    s = proton.start(out("cu"))
    with proton.scope("a"):
        pass
    proton.data.advance_phase(s)
    with proton.scope("b"):
        pass
    proton.data.advance_phase(s)
    with proton.scope("c"):
        pass
    rec("complete9", proton.data.is_phase_complete(s, 9))
    proton.data.clear(s, 1, clear_up_to_phase=True)
    for p in (0, 1, 2):
        try:
            rec(f"get{p}", proton.data.get(s, p))
        except IndexError as e:
            rec(f"get{p}", f"{type(e).__name__}: {e}")
    proton.finalize()


def data_errors_and_deactivated_session(proton, out, rec):
    s = proton.start(out("t"), data="trace")
    calls = (("get_msgpack", lambda: proton.data.get_msgpack(s)), ("advance", lambda: proton.data.advance_phase(s)),
             ("complete", lambda: proton.data.is_phase_complete(s, 0)), ("clear", lambda: proton.data.clear(s, 0)))
    calls += tuple((f"{n}99", lambda f=getattr(proton.data, n): f(99))
                   for n in ("get", "get_msgpack", "advance_phase", "is_phase_complete", "clear"))
    for name, f in calls:
        try:
            rec(name, repr(f()))
        except Exception as e:
            rec(name, f"{type(e).__name__}: {e}")
    proton.finalize()
    s = proton.start(out("d"))
    with proton.scope("a"):
        pass
    proton.deactivate(s)
    rec("deactivated_get", proton.data.get(s))
    proton.finalize(s)
    try:
        proton.data.get(s)
    except IndexError as e:
        rec("finalized_get", str(e).replace(str(s), "<s>"))
