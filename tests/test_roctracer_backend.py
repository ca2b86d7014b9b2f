"""The roctracer backend driven by the fake libroctracer64 and fake HSA runtime."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from fakes.fake_roctracer import HIP_API_IDS, FakeHsa, FakeRoctracer
from proton_ctypes.backends import select
from proton_ctypes.backends.modes import NO_MODE
from proton_ctypes.backends.amd import lib as rocm_lib
from proton_ctypes.backends.amd.tracer_api import RoctracerError
from proton_ctypes.backends.roctracer import RoctracerBackend, load_roctracer
from proton_ctypes.tree import strings


@pytest.fixture
def make():
    made = []

    def build(environ=None, gpu_nodes=(1,), backend_kwargs=None, **fake_kwargs):
        fake = FakeRoctracer(**fake_kwargs)
        b = RoctracerBackend(lib=fake, hsa=FakeHsa(gpu_nodes), environ={} if environ is None else environ,
                             hip=False, synchronize=lambda: None, **(backend_kwargs or {}))
        made.append(b)
        return fake, b, []

    yield build
    for b in made:
        b.stop()


def rows(batches):
    return np.concatenate(batches) if batches else np.zeros(0)


def names(batch):
    return [strings.name_of(int(i)) for i in batch["name_id"]]


def test_roctracer_batch_has_thread_launch_time_start_end_device_and_name(make):
    fake, b, out = make()
    b.start(out.append, NO_MODE)
    t0 = time.time_ns()
    corr = [fake.launch("axpy", dur_ns=2500) for _ in range(3)]
    t1 = time.time_ns()
    b.flush()
    r = rows(out)
    assert names(r) == ["axpy"] * 3 and r["corr"].tolist() == corr
    assert (r["tid"] == threading.get_native_id()).all()
    assert ((r["launch_ns"] >= t0) & (r["launch_ns"] <= t1)).all()
    assert (r["start_ns"] - r["launch_ns"] == 5000).all() and (r["end_ns"] - r["start_ns"] == 2500).all()
    assert (r["device"] == 0).all() and (r["py_node"] == -1).all()


def test_roctracer_device_ids_are_node_ids_minus_the_first_gpu_node(make):
    fake, b, out = make(gpu_nodes=(2, 3), gpu_node_base=2)
    b.start(out.append, NO_MODE)
    assert b.device_offset == 2
    fake.launch("a", device=0)
    fake.launch("b", device=1)
    b.flush()
    assert rows(out)["device"].tolist() == [0, 1]


def test_roctracer_traces_only_launch_operations_resolved_by_name(make):
    fake, b, out = make()
    b.start(out.append, NO_MODE)
    assert fake.api_activity == {HIP_API_IDS[n] for n in b.ops}
    assert HIP_API_IDS["hipMemcpy"] not in fake.api_activity and fake.api_callbacks == {}
    assert "hipGraphLaunch" not in b.ops            # unknown to this HIP: skipped, not an error


def test_roctracer_launch_threads_are_kept_apart(make):
    fake, b, out = make()
    b.start(out.append, NO_MODE)
    tids = []

    def work():
        tids.append(threading.get_native_id())
        for _ in range(4):
            fake.launch("t")

    ts = [threading.Thread(target=work) for _ in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    b.flush()
    assert dict(zip(*np.unique(rows(out)["tid"], return_counts=True))) == {t: 4 for t in tids}


def test_roctracer_buffers_arrive_on_roctracers_thread_and_are_copied(make):
    fake, b, out = make(backend_kwargs={"buffer_bytes": 512})
    b.start(out.append, NO_MODE)
    for _ in range(10):
        fake.launch("w")
    deadline = time.time() + 5
    while not fake.callback_threads and time.time() < deadline:
        time.sleep(0.01)
    assert fake.callback_threads and threading.get_native_id() not in fake.callback_threads
    b.flush()
    r = rows(out)
    assert len(r) == 10 and names(r) == ["w"] * 10


def test_roctracer_partial_records_are_counted_as_dropped(make):
    fake, b, out = make(partial_tail=True)
    b.start(out.append, NO_MODE)
    fake.launch("p")
    b.flush()
    assert len(rows(out)) == 1 and b.dropped == 1


def test_roctracer_disagreeing_clocks_stamp_launches_in_python(make):
    fake, b, out = make(clock_offset_ns=-4_000_000)
    b.start(out.append, NO_MODE)
    assert b.attribution == "extcorr" and set(fake.api_callbacks) == set(fake.api_activity)
    t0 = time.time_ns()
    fake.launch("x")
    t1 = time.time_ns()
    b.flush()
    r = rows(out)
    assert t0 <= r["launch_ns"][0] <= t1 and 0 < r["start_ns"][0] - r["launch_ns"][0] < 1_000_000


def test_roctracer_python_context_is_read_on_the_launching_thread(make):
    fake, b, out = make()
    b.start(out.append, NO_MODE, python_context=lambda: threading.get_native_id())
    fake.launch("p")
    b.flush()
    assert rows(out)["py_node"].tolist() == [threading.get_native_id()]


def test_roctracer_each_session_opens_and_closes_the_pool(make):
    fake, b, first = make()
    b.start(first.append, NO_MODE)
    fake.launch("one")
    b.stop()
    assert fake.pool is None and fake.domains == set() and fake.api_activity == set()
    fake.launch("between")
    second = []
    b.start(second.append, NO_MODE)
    fake.launch("two")
    b.stop()
    assert names(rows(first)) == ["one"] and names(rows(second)) == ["two"]
    assert fake.calls.count("roctracer_open_pool") == 2 and fake.calls.count("roctracer_close_pool") == 2


def test_roctracer_periodic_flushing_delivers_without_flush(make):
    fake, b, out = make(backend_kwargs={"flush_interval_s": 0.02})
    b.start(out.append, select.parse_mode("roctracer", "periodic_flushing"))
    assert b.mode.format == "hatchet"
    fake.launch("tick")
    deadline = time.time() + 5
    while not out and time.time() < deadline:
        time.sleep(0.01)
    assert names(rows(out)) == ["tick"]


def test_roctracer_records_with_begin_not_before_end_are_skipped(make):
    fake, b, out = make()
    b.start(out.append, NO_MODE)
    fake.launch("zero", dur_ns=0)
    fake.launch("ok")
    b.flush()
    assert names(rows(out)) == ["ok"] and b.invalid == 1


# ------------------------------------------------------------------ errors
def test_roctracer_missing_library_raises_protons_message():
    env = {"TRITON_ROCTRACER_LIB_PATH": "/nonexistent/lib", "ROCM_PATH": "/nonexistent"}
    if rocm_lib.library_available(rocm_lib.ROCTRACER_SONAME, env):
        pytest.skip("libroctracer64.so is installed on this machine")
    with pytest.raises(RuntimeError) as e:
        RoctracerBackend(environ=env).start(lambda b: None, NO_MODE)
    assert str(e.value) == "[PROTON] Could not load `libroctracer64.so`"


def test_roctracer_library_knobs_are_tried_first(tmp_path):
    env = {"TRITON_ROCTRACER_LIB_PATH": str(tmp_path), "TRITON_ROCTRACER_LIBRARY": "libroctracer64.so.4"}
    assert rocm_lib.candidates(rocm_lib.ROCTRACER_SONAME, env)[0] == (str(tmp_path / "libroctracer64.so.4"), "knob")
    fake = FakeRoctracer()
    assert load_roctracer(fake).lib is fake


def test_roctracer_failed_status_carries_the_error_string(make):
    fake, b, out = make(fail={"roctracer_open_pool": -6})
    with pytest.raises(RoctracerError) as e:
        b.start(out.append, NO_MODE)
    assert str(e.value) == "[PROTON] roctracer_open_pool failed: roctracer_open_pool(), error -6 (status -6)"


def test_roctracer_unknown_mode_and_pcsampling_use_protons_message():
    for mode in ("nope", "pcsampling"):
        with pytest.raises(ValueError) as e:
            select.parse_mode("roctracer", mode)
        assert str(e.value) == f"[PROTON] RoctracerProfiler: unsupported mode: {mode}"


def test_roctracer_visible_devices_variables_are_refused(make):
    fake, b, out = make(environ={"CUDA_VISIBLE_DEVICES": "0"})
    with pytest.raises(ValueError) as e:
        b.start(out.append, NO_MODE)
    assert str(e.value) == ("Proton does not work when the environment variable CUDA_VISIBLE_DEVICES is set on "
                            "AMD GPUs. Please unset it and use `ROCR_VISIBLE_DEVICES` instead")
    assert fake.calls == []


def test_roctracer_failed_start_closes_the_pool_again(make):
    fake, b, out = make(fail={"roctracer_enable_domain_activity": -1})
    with pytest.raises(RoctracerError):
        b.start(out.append, NO_MODE)
    assert fake.pool is None and fake.api_activity == set()
    fake.fail.clear()
    b.start(out.append, NO_MODE)
    fake.launch("retry")
    b.flush()
    assert names(rows(out)) == ["retry"]


def test_roctracer_device_info_comes_from_hsa_without_hip_python(make):
    fake, b, out = make(gpu_nodes=(2, 3), gpu_node_base=2)
    b.start(out.append, NO_MODE)
    assert b.device_info([1]) == {"HIP": {"1": {"arch": "gfx942", "bus_width": 8192, "clock_rate": 2100000,
                                                "memory_clock_rate": 1300000, "num_sms": 304}}}
    assert b.device_info([]) == {}
