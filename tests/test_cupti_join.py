"""Kernel rows get the launching thread (native id) and launch time by correlation id."""
import os
import sys
import threading
import time

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from fakes.fake_cupti import FakeCupti, started_backend  # noqa: E402

from proton_ctypes.backends.base import KERNEL_DTYPE  # noqa: E402
from proton_ctypes.backends.nvidia.activity import LAUNCH_SOURCE_ENV  # noqa: E402
from proton_ctypes.tree import strings  # noqa: E402


def test_rows_carry_native_thread_id_and_a_launch_time_inside_the_python_window(monkeypatch):
    monkeypatch.setenv(LAUNCH_SOURCE_ENV, "kernel")       # the latency timestamps: times of the launch call
    backend, fake, sink = started_backend()
    windows = []
    for _ in range(50):
        before = time.time_ns()
        fake.launch("tiny")
        windows.append((before, time.time_ns()))
    backend.stop()
    rows = sink.rows()
    assert rows.dtype == KERNEL_DTYPE and len(rows) == 50
    assert np.all(rows["tid"] == threading.get_native_id())
    lo, hi = np.array(windows).T
    assert np.all((rows["launch_ns"] >= lo) & (rows["launch_ns"] <= hi))
    assert np.all(rows["start_ns"] > rows["launch_ns"]) and np.all(rows["end_ns"] - rows["start_ns"] == 800)
    assert {strings.name_of(i) for i in rows["name_id"]} == {"tiny"}
    assert np.all(rows["cap_tid"] == -1) and np.all(rows["py_node"] == -1)


def test_launches_from_several_threads_keep_their_own_thread_ids():
    backend, fake, sink = started_backend()
    tids = {}

    def worker(name):
        tids[name] = threading.get_native_id()
        for _ in range(200):
            fake.launch(name, stream=hash(name) % 5)

    threads = [threading.Thread(target=worker, args=(f"k{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    backend.stop()
    rows = sink.rows()
    assert len(rows) == 800
    for name, tid in tids.items():
        mine = rows[rows["name_id"] == strings.intern(name)]
        assert len(mine) == 200 and np.all(mine["tid"] == tid)


def test_kernel_and_api_records_in_different_buffers_still_join():
    fake = FakeCupti(defer_kernels=True)      # kernel records arrive after their API records
    backend, fake, sink = started_backend(fake, buffer_bytes=8 << 10)
    for _ in range(300):
        fake.launch("late")
    fake.cuptiActivityFlushAll(0)             # API records only, through the collector
    time.sleep(0.05)
    backend.flush()                           # the device "finishes": kernel records now
    backend.stop()
    rows = sink.rows()
    assert len(rows) == 300 and np.all(rows["tid"] == threading.get_native_id())
    assert backend.stats["join_api_missing"] == 0


def test_runtime_api_launches_join_like_driver_ones():
    backend, fake, sink = started_backend()
    fake.launch("torch_kernel", api="runtime")
    fake.launch("triton_kernel", api="driver")
    backend.stop()
    rows = sink.rows()
    assert len(rows) == 2 and np.all(rows["tid"] == threading.get_native_id())


def test_kernels_without_api_records_are_delivered_with_unknown_thread():
    """The launch-API source (a CUPTI without latency timestamps) with no API record coming."""
    backend, fake, sink = started_backend(FakeCupti(api_record_mode="none", latency_timestamps=False))
    for _ in range(20):
        fake.launch("orphan")
    with pytest.warns(RuntimeWarning, match="no launch-API records"):
        backend.stop()
    rows = sink.rows()
    assert len(rows) == 20 and np.all(rows["tid"] == -1)
    assert np.all(rows["launch_ns"] == rows["start_ns"])


def test_each_kernel_name_pointer_is_read_once():
    backend, fake, sink = started_backend()
    reads = []
    original = backend.collector.joiner.name_reader
    backend.collector.joiner.name_reader = lambda ptr: reads.append(ptr) or original(ptr)
    for _ in range(100):
        fake.launch("a")
        fake.launch("b")
    backend.flush()
    for _ in range(100):
        fake.launch("a")
    backend.stop()
    assert len(reads) == 2 and len(sink.rows()) == 300


def test_a_batch_mixing_known_and_new_name_pointers_names_every_kernel_by_its_own_pointer():
    from proton_ctypes.backends.nvidia.join import Joiner
    names = {0x7F00_0000_0010: "gemm", 0x7F00_0000_0020: "softmax", 0xFFFF_FFFF_FFFF_FF00: "high_bits",
             0x10: "low"}
    reads = []
    joiner = Joiner(name_reader=lambda ptr: reads.append(ptr) or names[ptr])
    first = np.array([0x7F00_0000_0020, 0x7F00_0000_0010, 0x7F00_0000_0020], np.uint64)
    second = np.array([0x10, 0x7F00_0000_0010, 0xFFFF_FFFF_FFFF_FF00, 0x7F00_0000_0020, 0, 0x10], np.uint64)
    got = [strings.name_of(int(i)) for i in np.concatenate([joiner._name_ids(first), joiner._name_ids(second)])]
    assert got == ["softmax", "gemm", "softmax", "low", "gemm", "high_bits", "softmax", "<unknown kernel>", "low"]
    assert sorted(reads) == sorted(names)          # each pointer read once, the null one never
