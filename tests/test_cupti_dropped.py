"""Dropped records are counted (CUPTI's count and records we could not use), never silent."""
import ctypes
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from fakes.fake_cupti import FakeCupti, started_backend  # noqa: E402

from proton_ctypes.backends.nvidia import buffers  # noqa: E402
from proton_ctypes.backends.nvidia.buffers import BufferPool  # noqa: E402


def test_cupti_dropped_count_is_collected_and_exposed():
    backend, fake, sink = started_backend(FakeCupti(drop_records=5))
    fake.launch("k")
    backend.stop()
    assert backend.dropped == 5 and backend.cupti_dropped == 5
    assert len(sink.rows()) == 1


def _records_per_launch(backend) -> int:
    """A kernel record per launch, plus its launch-API record where those are the launch source."""
    return 2 if backend.launch_source == "api" else 1


def test_records_without_timing_are_counted_as_dropped():
    backend, fake, sink = started_backend()
    fake.launch("k")
    fake.launch("untimed", timed=False)
    fake.launch("k")
    backend.stop()
    assert backend.dropped == 1
    assert len(sink.rows()) == 2
    if backend.launch_source == "api":         # the untimed record breaks the timestamp chain
        assert backend.stats["parse_walk"] >= 1


def test_records_past_the_buffer_ceiling_are_counted_as_lost():
    backend, fake, sink = started_backend(buffer_bytes=64 << 10, max_buffers=2)
    backend.collector.stop_thread()     # no collector: nobody recycles buffers
    for _ in range(1000):              # ~4 buffers' worth: 2 in the pool, the rest in spares
        fake.launch("k")
    backend.stop()
    assert backend.pool.spared > 0 and backend.pool.refused == 0
    assert backend.collector.spare_kernels > 0
    assert len(sink.rows()) + backend.collector.spare_kernels == 1000
    assert backend.dropped == backend.collector.spare_dropped == _records_per_launch(backend) * backend.collector.spare_kernels


@pytest.mark.parametrize("version", [26, 12080, 130001])
def test_buffer_requests_are_declined_only_from_cupti_27_on(version, monkeypatch):
    """Past the ceiling and the spares, CUPTI >= 27 is declined (it drops and counts the records);
    CUPTI before API version 27 can crash on a declined request: it always gets a spare."""
    monkeypatch.setattr(buffers, "MAX_SPARES", 1)
    backend, fake, sink = started_backend(FakeCupti(version=version), buffer_bytes=64 << 10, max_buffers=2)
    backend.collector.stop_thread()     # no collector: nobody recycles buffers
    for _ in range(1000):               # ~4 buffers' worth
        fake.launch("k")
    backend.stop()
    pool, stats = backend.pool, backend.stats
    parsed = stats["join_kernels"] + stats["join_api_records"]
    written = 1000 * _records_per_launch(backend)
    if version < 27:
        assert pool.refused == 0 and pool.spared >= 2 and backend.cupti_dropped == 0
        assert parsed + stats["spare_dropped"] == written
    else:
        assert pool.refused > 0 and pool.spared == 1
        assert parsed + stats["spare_dropped"] + backend.cupti_dropped == written
    assert backend.dropped >= written - parsed
    assert len(sink.rows()) == stats["join_kernels"] < 1000


def test_spare_buffers_are_recycled_not_accumulated():
    pool = BufferPool(buffer_bytes=64 << 10, max_buffers=2, can_decline=False)
    taken = [_request(pool) for _ in range(3)]
    assert all(address for address, _ in taken) and pool.spared == 1 and pool.spares == 1
    spare = taken[2][0]
    assert pool.is_spare(spare) and not pool.is_spare(taken[0][0])
    pool.release(spare)
    assert _request(pool)[0] == spare and pool.spares == 1 and pool.spared == 2


def test_a_pool_that_may_decline_does_so_only_past_its_spares(monkeypatch):
    monkeypatch.setattr(buffers, "MAX_SPARES", 2)
    pool = BufferPool(buffer_bytes=64 << 10, max_buffers=2)
    assert [_request(pool)[0] is None for _ in range(5)] == [False, False, False, False, True]
    assert pool.spares == 2 and pool.refused == 1


def _request(pool):
    address, size, limit = ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_size_t()
    pool.request_callback(ctypes.byref(address), ctypes.byref(size), ctypes.byref(limit))
    return address.value, size.value
