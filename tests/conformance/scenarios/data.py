"""proton.data (spec §7.4, §10.5): phases, clear, the None session, trace data.

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
