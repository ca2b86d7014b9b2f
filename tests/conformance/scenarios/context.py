"""Contexts: depth, the shadow stack across threads and sessions, python context.

Each scenario is ``def name(proton, out, rec)`` (see ``__init__``).
"""
import threading


def context_depth(proton, out, rec):
    s = proton.start(out("dp"))
    rec("d0", proton.context.depth(s))
    with proton.scope("a"):
        with proton.scope("b"):
            rec("d2", proton.context.depth(s))
            with proton.state("st"):
                rec("d2s", proton.context.depth(s))
    proton.finalize()


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


def python_context_generator_resumed_by_two_callers(proton, out, rec):
    proton.start(out("pg"), context="python")

    def steps():
        while True:
            with proton.scope("x", {"m": 1}):
                pass
            yield

    gen = steps()

    def first():
        next(gen)

    def second():
        next(gen)
    for caller in (first, second, second, first):
        caller()
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


def scope_open_when_second_session_starts(proton, out, rec):
    s1 = proton.start(out("o1"))
    try:
        with proton.scope("a"):
            s2 = proton.start(out("o2"))
            with proton.scope("b"):
                pass
    except RuntimeError as e:  # Proton only (a deliberate difference, README): ours closes "a" quietly
        rec("exit_error", f"{type(e).__name__}: {e}")
    proton.finalize(s2)
    proton.finalize(s1)


def session_started_in_another_thread(proton, out, rec):
    ev, ev2 = threading.Event(), threading.Event()
    sid = []

    def starter():
        sid.append(proton.start(out("sth")))
        with proton.scope("A"):
            ev.set()
            ev2.wait()
    t = threading.Thread(target=starter)
    t.start()
    ev.wait()
    with proton.scope("m"):
        rec("depth", proton.context.depth(sid[0]))
    ev2.set()
    t.join()
    proton.finalize()
