"""Dropped records are counted (CUPTI's count and records we could not use), never silent."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from fakes.fake_cupti import FakeCupti, started_backend  # noqa: E402


def test_cupti_dropped_count_is_collected_and_exposed():
    backend, fake, sink = started_backend(FakeCupti(drop_records=5))
    fake.launch("k")
    backend.stop()
    assert backend.dropped == 5 and backend.cupti_dropped == 5
    assert len(sink.rows()) == 1


def test_records_without_timing_are_counted_as_dropped():
    backend, fake, sink = started_backend()
    fake.launch("k")
    fake.launch("untimed", timed=False)
    fake.launch("k")
    backend.stop()
    assert backend.dropped == 1
    assert len(sink.rows()) == 2 and backend.stats["parse_walk"] >= 1


def test_refused_buffers_show_up_as_dropped_records():
    backend, fake, sink = started_backend(buffer_bytes=64 << 10, max_buffers=2)
    backend._stop_event.set()          # no collector: nobody recycles buffers
    backend.pool.wake.set()
    backend._collector.join()
    for _ in range(1000):              # ~4 buffers' worth
        fake.launch("k")
    backend.stop()
    assert backend.pool.refused > 0
    assert backend.dropped > 0 and len(sink.rows()) < 1000 <= len(sink.rows()) + backend.dropped
