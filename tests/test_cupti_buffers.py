"""Our activity buffers: 8-byte aligned, recycled, growing with the threads up to a ceiling; the
complete callback only enqueues."""
import ctypes
import os
import sys
import threading
import time

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from fakes.fake_cupti import (INCOMPLETE_KIND_BIT, KERNEL_OFFSETS, KIND_KERNEL, FakeCupti,  # noqa: E402
                              started_backend)

from proton_ctypes.backends.nvidia import buffers  # noqa: E402
from proton_ctypes.backends.nvidia.buffers import BufferPool  # noqa: E402

MIB = 1 << 20


def _request(pool):
    address, size, limit = ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_size_t()
    pool.request_callback(ctypes.byref(address), ctypes.byref(size), ctypes.byref(limit))
    return address.value, size.value


def test_buffers_are_aligned_and_recycled_without_new_allocations():
    pool = BufferPool(buffer_bytes=64 << 10, max_buffers=3)
    first, size = _request(pool)
    assert first % 8 == 0 and size == 64 << 10
    pool.complete_callback(None, 0, first, size, 128)
    assert pool.take_completed() == [(first, 128)]
    pool.release(first)
    again, _ = _request(pool)
    assert again == first and pool.allocated == 1


#: the largest page a touched byte may bring in (x86-64's transparent huge page)
HUGE_PAGE_BYTES = 2 * MIB
#: a page table entry of ``/proc/self/pagemap``: 8 bytes, bit 63 set when the page is in memory
PAGEMAP_ENTRY_BYTES, PAGE_PRESENT_BIT = 8, 1 << 63


def _resident_bytes(address, length):
    """The bytes of ``[address, address + length)`` in memory (``/proc/self/pagemap``)."""
    page = os.sysconf("SC_PAGE_SIZE")
    first, count = address // page, -(-length // page)
    with open("/proc/self/pagemap", "rb") as f:
        f.seek(first * PAGEMAP_ENTRY_BYTES)
        entries = np.frombuffer(f.read(count * PAGEMAP_ENTRY_BYTES), np.uint64)
    return int(np.count_nonzero(entries & np.uint64(PAGE_PRESENT_BIT))) * page


@pytest.mark.skipif(not os.path.exists("/proc/self/pagemap"), reason="needs Linux's /proc/self/pagemap")
def test_a_recycled_buffer_is_all_zeros_and_commits_only_what_cupti_wrote():
    pool = BufferPool(buffer_bytes=64 * MIB, max_buffers=2)           # Proton's size
    address, size = _request(pool)
    written = 100 << 10
    ctypes.memset(address, 0xAB, written)                             # CUPTI's records
    pool.complete_callback(None, 0, address, size, written)
    pool.take_completed()
    pool.release(address, written)
    again, _ = _request(pool)
    assert again == address
    # first (reading the rest maps the kernel's zero page there): not 64 MiB, at most the
    # transparent huge pages the written bytes and the zeroed margin lie in
    assert _resident_bytes(address, size) <= 2 * HUGE_PAGE_BYTES
    assert not pool.array(address).any()                              # zero where CUPTI will look


def test_a_buffer_released_without_its_valid_size_is_zeroed_whole():
    pool = BufferPool(buffer_bytes=64 << 10, max_buffers=2)
    address, size = _request(pool)
    ctypes.memset(address, 0xCD, size)
    pool.release(address)
    assert _request(pool)[0] == address and not pool.array(address).any()


def test_pool_hands_out_spares_at_its_ceiling():
    pool = BufferPool(buffer_bytes=64 << 10, max_buffers=2)
    assert _request(pool)[0] and _request(pool)[0]
    spare, size = _request(pool)
    assert spare and size == 64 << 10 and pool.is_spare(spare)
    assert pool.spared == 1 and pool.refused == 0 and pool.allocated == 2


def test_default_ceiling_is_an_eighth_of_memory_or_the_environment(monkeypatch):
    monkeypatch.delenv(buffers.LIMIT_ENV, raising=False)
    physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    assert buffers.buffer_limit_bytes() == physical // buffers.LIMIT_FRACTION
    assert buffers.buffer_limit_bytes({buffers.LIMIT_ENV: "96"}) == 96 * MIB
    assert BufferPool(4 * MIB).max_buffers == physical // buffers.LIMIT_FRACTION // (4 * MIB)
    monkeypatch.setenv(buffers.LIMIT_ENV, "16")
    assert BufferPool(4 * MIB).max_buffers == 4


@pytest.mark.parametrize("value", ["lots", "0", "-3"])
def test_a_bad_ceiling_in_the_environment_is_a_clear_error(value):
    with pytest.raises(ValueError, match=f"{buffers.LIMIT_ENV}=.*MiB"):
        buffers.buffer_limit_bytes({buffers.LIMIT_ENV: value})


def test_free_buffers_are_trimmed_to_what_is_out():
    pool = BufferPool(buffer_bytes=64 << 10, max_buffers=64)
    taken = [_request(pool)[0] for _ in range(20)]     # 20 threads held a buffer each
    for address in taken[:18]:                          # 18 of them ended
        pool.release(address)
    pool.trim()
    assert pool.outstanding == 2 and pool.allocated == 2 + buffers.MIN_FREE_KEPT
    assert pool.allocated_bytes == pool.allocated * (64 << 10)      # a mapping of its own each: no padding


def test_complete_callback_only_enqueues_on_the_calling_thread():
    pool = BufferPool(buffer_bytes=64 << 10, max_buffers=2)
    address, size = _request(pool)
    done = threading.Thread(target=pool.complete_callback, args=(None, 0, address, size, 40))
    done.start()
    done.join()
    assert list(pool.completed) == [(address, 40)] and pool.wake.is_set()
    assert pool.outstanding == 1  # still out until the parser releases it


def _wait_until_parsed(backend, timeout=2.0):
    deadline = time.monotonic() + timeout
    while (backend.pool.completed or backend.pool.outstanding > 1) and time.monotonic() < deadline:
        time.sleep(0.001)


def test_a_million_launches_on_one_thread_reuse_a_few_buffers():
    backend, fake, sink = started_backend(parse_batch_buffers=1)
    count = [0]
    backend.collector.sink = lambda batch: count.__setitem__(0, count[0] + len(batch))
    launched = 0
    while launched < 1_000_000:
        n = min(16_384, 1_000_000 - launched)
        fake.bulk_launch(n)
        launched += n
        _wait_until_parsed(backend)  # at a real launch rate the collector keeps up; pace the fake alike
    backend.stop()
    assert count[0] == 1_000_000
    assert backend.dropped == 0
    assert backend.pool.allocated_bytes < 64 * MIB
    assert backend.pool.requests > backend.pool.allocated + 8  # buffers came back and were reused


def test_unpaced_flood_is_bounded_and_every_launch_accounted_for():
    backend, fake, sink = started_backend(buffer_bytes=1 * MIB, max_buffers=4)
    count = [0]
    backend.collector.sink = lambda batch: count.__setitem__(0, count[0] + len(batch))
    fake.bulk_launch(200_000)      # far faster than any GPU launches: the pool reaches its ceiling
    backend.stop()
    # every figure in each message: a rare failure seen only locally said nothing of which one
    seen = dict(delivered=count[0], spare_kernels=backend.collector.spare_kernels, dropped=backend.cupti_dropped,
                spared=backend.pool.spared, allocated=backend.pool.allocated_bytes)
    assert backend.pool.allocated_bytes <= (4 + buffers.MAX_SPARES) * (MIB + 8), seen
    lost = backend.collector.spare_kernels + backend.cupti_dropped // 2
    assert count[0] + lost == 200_000, seen
    assert backend.pool.spared > 0 and backend.collector.spare_kernels > 0, seen


def test_collector_waits_for_a_batch_of_buffers_before_parsing():
    backend, fake, sink = started_backend(buffer_bytes=64 << 10, parse_batch_buffers=3)
    per_buffer = (64 << 10) // (fake.record_size + (40 if backend.launch_source == "api" else 0))
    first = 2 * per_buffer + per_buffer // 2
    for _ in range(first):         # 2 full buffers complete: fewer than 3, nothing parsed yet
        fake.launch("k")
    time.sleep(0.1)
    assert len(sink.rows()) == 0 and len(backend.pool.completed) == 2
    for _ in range(per_buffer):    # the third: parsed in one round
        fake.launch("k")
    deadline = time.monotonic() + 5
    while not sink.batches and time.monotonic() < deadline:
        time.sleep(0.005)
    assert len(sink.batches) == 1 and len(sink.rows()) >= 3 * per_buffer
    backend.stop()
    assert len(sink.rows()) == first + per_buffer


def test_completed_buffers_are_parsed_off_the_cupti_thread():
    backend, fake, sink = started_backend(buffer_bytes=64 << 10)
    for _ in range(600):           # ~2.5 buffers: full ones complete on the fake's worker thread
        fake.launch("k")
    backend.flush()
    backend.stop()
    assert len(sink.rows()) == 600
    assert not (sink.threads & fake.complete_threads)
    assert np.all(np.diff(sink.rows()["corr"].astype(np.int64)) > 0)


def test_a_kernel_launched_is_in_its_threads_buffer_marked_incomplete_until_it_completes():
    """As measured on the H100 (tests/gpu/probe_buffer_fill.py), and as the fake writes it."""
    backend, fake, sink = started_backend(FakeCupti(defer_kernels=True))
    fake.launch("k")
    address, _size, used = fake._bufs[threading.get_native_id()]
    record = address + used - fake.record_size
    assert ctypes.c_uint32.from_address(record).value == KIND_KERNEL | INCOMPLETE_KIND_BIT
    assert ctypes.c_uint32.from_address(record + KERNEL_OFFSETS["correlationId"]).value > 0
    assert ctypes.c_uint64.from_address(record + KERNEL_OFFSETS["start"]).value == 0
    fake.complete_kernels()
    assert ctypes.c_uint32.from_address(record).value == KIND_KERNEL
    backend.stop()
    assert len(sink.rows()) == 1


# --- TRITON_PROFILE_BUFFER_SIZE: the size of each activity buffer, as in Proton -------------------

def _profile_kernels(cupti, name, launches):
    """A cupti session ``name`` (the ``cupti`` fixture's) with ``launches`` kernels in scope
    ``s``: ``(its buffers' size, the kernels counted in its file)``."""
    import proton_ctypes as proton
    from conftest import find, read_tree

    fake, backend = cupti
    proton.start(name, backend="cupti")
    with proton.scope("s"):
        for _ in range(launches):
            fake.launch("k")
    size = backend.pool.buffer_bytes
    proton.finalize()
    tree, _ = read_tree(f"{name}.hatchet")
    return size, find(tree, "s", "k")["metrics"]["count"]


def test_activity_buffers_take_the_users_TRITON_PROFILE_BUFFER_SIZE(cupti, monkeypatch):
    monkeypatch.setenv("TRITON_PROFILE_BUFFER_SIZE", str(1 * MIB))
    assert _profile_kernels(cupti, "sized", 3000) == (1 * MIB, 3000)


def test_without_the_knob_buffers_keep_our_default_though_start_exports_protons(cupti, monkeypatch):
    monkeypatch.delenv("TRITON_PROFILE_BUFFER_SIZE", raising=False)
    assert _profile_kernels(cupti, "first", 10) == (buffers.DEFAULT_BUFFER_BYTES, 10)
    # exported where triton's Proton has the knob (3.9; not 3.6), as Proton does
    assert os.environ.get("TRITON_PROFILE_BUFFER_SIZE") in (None, "67108864")
    assert _profile_kernels(cupti, "second", 10) == (buffers.DEFAULT_BUFFER_BYTES, 10)


def test_a_size_changed_between_sessions_applies_at_the_next_start(cupti, monkeypatch):
    monkeypatch.setenv("TRITON_PROFILE_BUFFER_SIZE", str(1 * MIB))
    assert _profile_kernels(cupti, "one", 500) == (1 * MIB, 500)
    monkeypatch.setenv("TRITON_PROFILE_BUFFER_SIZE", str(2 * MIB))
    assert _profile_kernels(cupti, "two", 500) == (2 * MIB, 500)


@pytest.mark.parametrize("asked, used", [(1000, buffers.MIN_REQUESTED_BUFFER_BYTES), (65537, 65544),
                                         (3 * MIB, 3 * MIB)])
def test_a_requested_size_is_rounded_up_to_the_alignment_and_a_least_size(asked, used):
    assert buffers.pool_buffer_bytes(requested=asked) == used
    assert buffers.pool_buffer_bytes(explicit=16 << 10, requested=asked) == 16 << 10
    assert buffers.pool_buffer_bytes() == buffers.DEFAULT_BUFFER_BYTES


@pytest.mark.parametrize("value, expected", [("lots", "expected int"), ("0", "expected a positive number"),
                                             ("-8", "expected a positive number")])
def test_a_bad_buffer_size_is_a_clear_error_at_start_and_leaves_no_session(cupti, monkeypatch, value, expected):
    import proton_ctypes as proton
    from proton_ctypes.core.registry import G

    monkeypatch.setenv("TRITON_PROFILE_BUFFER_SIZE", value)
    with pytest.raises(RuntimeError, match=f"Unable to use TRITON_PROFILE_BUFFER_SIZE={value}: {expected}"):
        proton.start("bad", backend="cupti")
    assert not G.sessions
    monkeypatch.setenv("TRITON_PROFILE_BUFFER_SIZE", str(1 * MIB))
    assert _profile_kernels(cupti, "good", 5) == (1 * MIB, 5)


def test_a_buffer_size_set_through_tritons_knob_is_used(cupti, monkeypatch):
    knobs = pytest.importorskip("triton").knobs
    if "profile_buffer_size" not in getattr(knobs.proton, "knob_descriptors", {}):
        pytest.skip("this triton's Proton has no profile_buffer_size knob (it came in 3.9)")
    monkeypatch.delenv("TRITON_PROFILE_BUFFER_SIZE", raising=False)
    knobs.proton.profile_buffer_size = 2 * MIB          # sets the variable too, as triton's knobs do
    try:
        assert _profile_kernels(cupti, "knob", 20) == (2 * MIB, 20)
    finally:
        del knobs.proton.profile_buffer_size


def test_protons_periodic_flushing_buffer_size_places_every_kernel_by_position_across_many_buffers(monkeypatch):
    """What Proton's own ``test_periodic_flushing`` asks of a GPU: 256 KiB buffers (about a thousand
    kernel records each), launch positions, scopes, phases flushed as part files; every kernel
    lands under its scope in its phase, across buffer changes."""
    import proton_ctypes as proton
    from conftest import find, read_tree
    from fakes.fake_cupti import FakeDriver
    from proton_ctypes.backends import select
    from proton_ctypes.backends.cupti import CuptiBackend
    from proton_ctypes.backends.nvidia import activity

    monkeypatch.setenv(activity.LAUNCH_SOURCE_ENV, activity.LAUNCH_FROM_POSITION)
    monkeypatch.setenv("TRITON_PROFILE_BUFFER_SIZE", str(256 << 10))
    fake = FakeCupti(defer_kernels=True)
    backend = CuptiBackend(lib=fake, driver=FakeDriver(fake))
    select.register("cupti", lambda: backend)
    try:
        s = proton.start("pf", backend="cupti", mode="periodic_flushing:format=hatchet")
        for phase in range(3):
            for step in range(2500):
                with proton.scope(f"phase{phase}"):
                    fake.launch("k" if step % 2 else "j")
            proton.data.advance_phase(s)
        proton.finalize()
        assert backend.pool.buffer_bytes == 256 << 10 and backend.pool.requests > 5      # several buffers each
    finally:
        select.unregister("cupti")
    for phase in range(3):
        tree, _ = read_tree(f"pf.part_{phase}.hatchet")
        assert [find(tree, f"phase{phase}", k)["metrics"]["count"] for k in ("j", "k")] == [1250, 1250]
