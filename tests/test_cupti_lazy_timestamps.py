"""Lazy latency timestamps (``PROTON_CTYPES_LAZY_TIMESTAMPS=1``): a session of the kernel launch
source starts with CUPTI's latency timestamps off and switches them on at the first context
change (a thread's first scope or state, a session activated, deactivated, advanced or started
beside it). Kernels launched before carry no ``queued`` time and are filed as launched then:
under ROOT, in the session's first window and phase."""
import os
import sys
import threading
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from conftest import flat, read_tree  # noqa: E402

import proton_ctypes as proton  # noqa: E402
from proton_ctypes.backends.nvidia.activity import LAZY_TIMESTAMPS_ENV, lazy_timestamps  # noqa: E402

#: a kernel that starts on the GPU long after its launch (a busy queue)
LATE_NS = 50_000_000


@pytest.fixture
def lazy(monkeypatch, cupti):
    """``backend="cupti"`` over a fake libcupti with lazy timestamps (conftest's ``cupti``)."""
    monkeypatch.setenv(LAZY_TIMESTAMPS_ENV, "1")
    return cupti


def counts(path):
    return {k: m["count"] for k, m in flat(read_tree(path)[0]).items() if "count" in m}


def test_lazy_timestamps_are_off_unless_asked_for():
    assert not lazy_timestamps({})
    assert lazy_timestamps({LAZY_TIMESTAMPS_ENV: "1"})


def test_a_session_without_scopes_never_switches_the_timestamps_on_and_files_every_kernel(lazy):
    fake, backend = lazy
    proton.start("plain", backend="cupti")
    assert not fake.latency
    workers = [threading.Thread(target=lambda: [fake.launch("k") for _ in range(300)]) for _ in range(3)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    for _ in range(200):
        fake.launch("k", kernel_delay_ns=LATE_NS)   # still queued on the GPU when finalize comes
    assert not fake.latency
    proton.finalize()
    assert counts("plain.hatchet") == {"k": 1100}
    assert backend.collector.joiner.stats["lazy_matched"] == 1100


def test_the_first_scope_switches_them_on_and_kernels_before_it_stay_at_root(lazy):
    fake, _ = lazy
    proton.start("first", backend="cupti")
    for _ in range(5):
        fake.launch("before", kernel_delay_ns=LATE_NS // 10)   # starts on the GPU inside the scope
    with proton.scope("s"):
        assert fake.latency
        time.sleep(LATE_NS / 1e9)
        fake.launch("inside")
        with proton.scope("t"):
            fake.launch("inner")
    fake.launch("after")
    proton.finalize()
    assert counts("first.hatchet") == {"before": 5, "s/inside": 1, "s/t/inner": 1, "after": 1}


def test_a_state_on_another_thread_switches_them_on_for_every_thread(lazy):
    fake, _ = lazy
    proton.start("state", backend="cupti")
    fake.launch("early")
    done = threading.Event()

    def other():
        with proton.state("opt"):
            fake.launch("stated")
        done.set()
    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert fake.latency
    with proton.scope("s"):
        fake.launch("scoped")
    proton.finalize()
    assert counts("state.hatchet") == {"early": 1, "opt/stated": 1, "s/scoped": 1}


@pytest.mark.parametrize("again", [True, False], ids=["activated_again", "finalized_inactive"])
def test_kernels_launched_before_a_deactivate_count_and_those_while_inactive_do_not(lazy, again):
    fake, _ = lazy
    sid = proton.start("windows", backend="cupti")
    for _ in range(4):
        fake.launch("on", kernel_delay_ns=LATE_NS)       # run on the GPU after the deactivate
    proton.deactivate(sid)
    assert fake.latency
    fake.launch("off")
    if again:
        time.sleep(2 * LATE_NS / 1e9)                     # the late kernels ran while inactive
        proton.activate(sid)
        fake.launch("again")
    proton.finalize()
    assert counts("windows.hatchet") == ({"on": 4, "again": 1} if again else {"on": 4})


def test_kernels_launched_before_a_second_session_starts_are_not_its_own(lazy):
    fake, _ = lazy
    proton.start("one", backend="cupti")
    for _ in range(3):
        fake.launch("solo", kernel_delay_ns=LATE_NS)
    proton.start("two", backend="cupti")
    assert fake.latency
    fake.launch("both")
    proton.finalize()
    assert counts("one.hatchet") == {"solo": 3, "both": 1}
    assert counts("two.hatchet") == {"both": 1}


def test_kernels_launched_before_a_phase_advances_stay_in_the_first_phase(lazy):
    fake, _ = lazy
    sid = proton.start("phases", backend="cupti", mode="periodic_flushing")
    fake.launch("first", kernel_delay_ns=LATE_NS)
    proton.data.advance_phase(sid)
    fake.launch("second")
    proton.finalize()
    parts = sorted(p for p in os.listdir(".") if p.startswith("phases"))
    assert [counts(p) for p in parts] == [{"first": 1}, {"second": 1}]


def test_timestamps_are_switched_off_again_at_finalize_and_the_next_session_starts_lazy(lazy):
    fake, _ = lazy
    proton.start("a", backend="cupti")
    with proton.scope("s"):
        fake.launch("k")
    proton.finalize()
    assert not fake.latency
    proton.start("b", backend="cupti")
    assert not fake.latency
    fake.launch("k")
    proton.finalize()
    assert counts("b.hatchet") == {"k": 1}


def test_the_python_context_never_starts_lazy_and_no_context_change_switches_stamps_on(lazy):
    """The python context needs no stamps (its launch callback places every kernel): a scope
    entered does not switch them on as it would for a lazy session."""
    fake, _ = lazy
    proton.start("py", backend="cupti", context="python")
    assert not fake.latency
    with proton.scope("s"):
        fake.launch("k")
    assert not fake.latency
    proton.finalize()
