"""stop(): idempotent, safe after errors and at interpreter exit; the backend can start again."""
import os
import subprocess
import sys
import textwrap

sys.path.insert(0, os.path.dirname(__file__))
from fakes.fake_cupti import FakeCupti, FakeDriver, started_backend  # noqa: E402

from proton_ctypes.backends.cupti import CuptiBackend  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_stop_delivers_everything_and_switches_cupti_off():
    backend, fake, sink = started_backend()
    for _ in range(10):
        fake.launch("k")
    backend.stop()
    assert len(sink.rows()) == 10
    assert not fake.kinds and fake.subscriber is None and backend.pool.outstanding == 0
    assert backend._collector is None and not backend.running


def test_stop_twice_and_stop_before_start_are_no_ops():
    CuptiBackend(lib=FakeCupti(), driver=FakeDriver()).stop()
    backend, fake, sink = started_backend()
    backend.stop()
    backend.stop()


def test_backend_restarts_after_stop():
    backend, fake, sink = started_backend()
    fake.launch("first")
    backend.stop()
    backend.start(sink, "")
    fake.launch("second")
    backend.stop()
    assert len(sink.rows()) == 2


def test_a_failing_sink_does_not_leave_cupti_running():
    backend, fake, sink = started_backend()
    fake.launch("k")

    def broken(batch):
        raise ValueError("tree exploded")
    backend._sink = broken
    try:
        backend.stop()
    except ValueError:
        pass
    assert not backend.running and not fake.kinds and fake.subscriber is None


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
