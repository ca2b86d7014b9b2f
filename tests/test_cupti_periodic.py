"""mode="periodic_flushing": our own timer thread flushes CUPTI and delivers batches without flush()."""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(__file__))
from fakes.fake_cupti import started_backend  # noqa: E402


def _wait_for_rows(sink, n, timeout=5.0):
    deadline = time.monotonic() + timeout
    while len(sink.rows()) < n and time.monotonic() < deadline:
        time.sleep(0.005)
    return len(sink.rows())


def test_partial_buffers_are_delivered_on_the_timer():
    backend, fake, sink = started_backend(mode="periodic_flushing:format=hatchet", flush_interval_s=0.02)
    for _ in range(10):
        fake.launch("k")
    assert _wait_for_rows(sink, 10) == 10            # no flush() call: the timer did it
    for _ in range(5):
        fake.launch("k")
    assert _wait_for_rows(sink, 15) == 15
    assert len(sink.batches) >= 2 and fake.calls["cuptiActivityFlushAll"] >= 2
    backend.stop()


def test_default_mode_does_not_flush_partial_buffers_on_its_own():
    backend, fake, sink = started_backend(flush_interval_s=0.02)
    fake.launch("k")
    time.sleep(0.1)
    assert len(sink.rows()) == 0
    backend.stop()
    assert len(sink.rows()) == 1
