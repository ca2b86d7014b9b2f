"""stop(): idempotent, safe after errors and at interpreter exit; the backend can start again."""
import os
import subprocess
import sys
import textwrap
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from fakes.fake_cupti import FakeCupti, FakeDriver, started_backend  # noqa: E402

from proton_ctypes.backends.modes import NO_MODE  # noqa: E402
from proton_ctypes.backends.cupti import CuptiBackend  # noqa: E402
from proton_ctypes.backends.nvidia.activity import FINALIZE_ENV  # noqa: E402
from proton_ctypes.tree import strings  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _switched_off(backend, fake):
    return (not fake.kinds and fake.subscriber is None and not fake.enabled_callbacks
            and backend.pool.outstanding == 0 and backend.collector.thread is None and not backend.running)


def test_stop_delivers_everything_and_switches_cupti_off():
    backend, fake, sink = started_backend()
    for _ in range(10):
        fake.launch("k")
    backend.stop()
    assert len(sink.rows()) == 10
    assert _switched_off(backend, fake)


def test_stop_before_start_touches_nothing():
    fake = FakeCupti()
    backend = CuptiBackend(lib=fake, driver=FakeDriver())
    backend.stop()
    assert not backend.running and backend.lib is None and fake.calls == {}


def test_a_second_stop_makes_no_cupti_call_and_delivers_nothing_twice():
    backend, fake, sink = started_backend()
    fake.launch("k")
    backend.stop()
    calls, batches = dict(fake.calls), len(sink.batches)
    backend.stop()
    assert fake.calls == calls and len(sink.batches) == batches and len(sink.rows()) == 1


def test_backend_restarts_after_stop():
    backend, fake, sink = started_backend()
    fake.launch("first")
    backend.stop()
    backend.start(sink, NO_MODE)
    assert backend.running and fake.kinds and fake.subscriber is not None
    fake.launch("second")
    backend.stop()
    assert len(sink.rows()) == 2 and _switched_off(backend, fake)


def test_a_failing_sink_raises_at_stop_and_does_not_leave_cupti_running():
    backend, fake, sink = started_backend()
    fake.launch("k")

    def broken(batch):
        raise ValueError("tree exploded")
    backend.collector.sink = broken
    with pytest.raises(ValueError, match="tree exploded"):
        backend.stop()
    assert _switched_off(backend, fake)
    assert backend.collector.sink is None


def test_a_failing_cupti_flush_at_stop_still_switches_everything_off():
    backend, fake, sink = started_backend()
    fake.launch("k")
    fake.fail["cuptiActivityFlushAll"] = 15
    backend.stop()                     # CUPTI keeps its partial buffer; the error is not raised
    assert not fake.kinds and fake.subscriber is None and not backend.running
    assert backend.collector.thread is None and fake.calls["cuptiActivityFlushAll"] >= 1


def test_a_failing_device_synchronisation_at_stop_warns_and_still_delivers():
    class BrokenDriver(FakeDriver):
        def synchronize(self):
            raise RuntimeError("device lost")
    fake = FakeCupti()
    backend = CuptiBackend(lib=fake, driver=BrokenDriver(fake))
    rows = []
    backend.start(rows.append, NO_MODE)
    fake.launch("k")
    with pytest.warns(RuntimeWarning, match="device synchronisation failed at stop.*device lost"):
        backend.stop()
    assert sum(len(batch) for batch in rows) == 1 and _switched_off(backend, fake)


def test_the_exit_handler_after_an_explicit_stop_is_a_no_op():
    backend, fake, sink = started_backend()
    backend.stop()
    calls = dict(fake.calls)
    backend._stop_at_exit()
    assert fake.calls == calls and not backend.running


def test_interpreter_exit_without_stop_is_clean():
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {os.path.join(ROOT, 'tests')!r}); sys.path.insert(0, {ROOT!r})
        import atexit
        from fakes.fake_cupti import FakeCupti, started_backend
        fake = FakeCupti()
        atexit.register(lambda: print("rows", len(sink.rows()), "kinds", sorted(fake.kinds)))  # runs last
        backend, fake, sink = started_backend(fake)
        for _ in range(5):
            fake.launch("k")
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "rows 5 kinds []" in out.stdout
    assert "Traceback" not in out.stderr


def test_cupti_is_detached_at_every_stop_and_the_next_session_attaches_afresh():
    backend, fake, sink = started_backend()
    fake.launch("first")
    backend.stop()
    assert fake.calls["cuptiFinalize"] == 1 and fake.request is None   # CUPTI forgot the buffer callbacks
    backend.start(sink, NO_MODE)
    assert fake.request is not None and fake.kinds and fake.thread_id_type == 1
    fake.launch("second")
    backend.stop()
    assert fake.calls["cuptiFinalize"] == 2
    assert sorted(strings.name_of(i) for i in sink.rows()["name_id"]) == ["first", "second"]


def test_asked_to_keep_cupti_attached_a_stop_leaves_it_and_the_next_session_loses_nothing(monkeypatch):
    monkeypatch.setenv(FINALIZE_ENV, "0")
    backend, fake, sink = started_backend()
    fake.launch("first")
    backend.stop()
    assert fake.calls.get("cuptiFinalize", 0) == 0
    backend.start(sink, NO_MODE)
    fake.launch("second")
    backend.stop()
    assert fake.calls.get("cuptiFinalize", 0) == 0
    assert sorted(strings.name_of(i) for i in sink.rows()["name_id"]) == ["first", "second"]


#: how long the forked child of the test below may take (it blocked for good without the fix's reset)
CHILD_DEADLINE_S = 10


def test_a_forked_child_makes_no_cupti_call_at_its_exit_and_the_parent_loses_nothing():
    # a child of fork() that ends normally runs the atexit handlers it inherited; CUPTI's
    # state, CUPTI's threads and the collector belong to the parent, so the stop must not run there
    backend, fake, sink = started_backend()
    fake.launch("before")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            calls = dict(fake.calls)
            backend._stop_at_exit()            # what the child's interpreter exit runs
            os.write(write, b"none" if fake.calls == calls and not backend.running else b"called")
        finally:
            os._exit(0)
    os.close(write)
    deadline = time.monotonic() + CHILD_DEADLINE_S
    while os.waitpid(pid, os.WNOHANG) == (0, 0):
        if time.monotonic() > deadline:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the forked child's exit blocked in the backend's stop")
        time.sleep(0.01)
    assert os.read(read, 16) == b"none"
    os.close(read)
    fake.launch("after")
    backend.stop()
    assert sorted(strings.name_of(i) for i in sink.rows()["name_id"]) == ["after", "before"]
