"""The rocprofiler-sdk backend driven by the fake librocprofiler-sdk (no AMD GPU needed)."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from fakes.fake_rocprofiler import HIP_OPS, FakeRocprofilerSdk, gpu_agent
from proton_ctypes.backends import select
from proton_ctypes.backends.modes import NO_MODE
from proton_ctypes.backends.amd import sdk_runtime as rocm_sdk_runtime
from proton_ctypes.backends.amd.sdk_api import HIP_LAUNCH_OPERATION_IDS_0_5
from proton_ctypes.backends.rocprof import RocprofilerBackend
from proton_ctypes.tree import strings


@pytest.fixture
def make():
    """Build (fake, backend, batches) triples; shut every backend down afterwards."""
    made = []

    def build(environ=None, hip=False, backend_kwargs=None, **fake_kwargs):
        fake = FakeRocprofilerSdk(**fake_kwargs)
        b = RocprofilerBackend(lib=fake, environ={} if environ is None else environ, hip=hip,
                               synchronize=lambda: None, **(backend_kwargs or {}))
        made.append(b)
        return fake, b, []

    yield build
    for b in made:
        b.shutdown()
        if b.sdk is not None:
            rocm_sdk_runtime.forget(b.sdk)


def rows(batches):
    return np.concatenate(batches) if batches else np.zeros(0)


def names(batch):
    return [strings.name_of(int(i)) for i in batch["name_id"]]


def test_rocprof_batch_has_thread_launch_time_start_end_device_and_name(make):
    fake, b, out = make()
    b.start(out.append, NO_MODE)
    fake.load_code_object(["add_kernel"])
    t0 = time.time_ns()
    corr = [fake.launch("add_kernel", dur_ns=1500) for _ in range(3)]
    t1 = time.time_ns()
    b.flush()
    r = rows(out)
    assert len(r) == 3
    assert names(r) == ["add_kernel"] * 3
    assert (r["tid"] == threading.get_native_id()).all()
    assert ((r["launch_ns"] >= t0) & (r["launch_ns"] <= t1)).all()
    assert (r["start_ns"] - r["launch_ns"] == 5000).all()      # same SDK clock, one offset
    assert (r["end_ns"] - r["start_ns"] == 1500).all()
    assert (r["device"] == 0).all() and (r["stream"] == 0).all()
    assert r["corr"].tolist() == corr
    assert (r["py_node"] == -1).all() and (r["cap_tid"] == -1).all()


@pytest.mark.parametrize("version", [(0, 5, 0), (0, 6, 0), (1, 0, 0)])
def test_rocprof_reads_both_correlation_id_layouts(make, version):
    fake, b, out = make(version=version)
    b.start(out.append, NO_MODE)
    fake.load_code_object(["k"])
    t0 = time.time_ns()
    fake.launch("k")
    b.flush()
    r = rows(out)
    assert names(r) == ["k"] and r["launch_ns"][0] >= t0 and r["start_ns"][0] - r["launch_ns"][0] == 5000


def test_rocprof_kernel_names_drop_the_kd_suffix_and_unknown_ids_are_unknown(make):
    fake, b, out = make()
    b.start(out.append, NO_MODE)
    fake.load_code_object(["gemm"])
    fake.launch("gemm")
    fake.launch("never_loaded")
    b.flush()
    assert names(rows(out)) == ["gemm", "<unknown>"]


def test_rocprof_kernels_loaded_before_start_are_named(make):
    fake, b, out = make()
    fake.load_code_object(["early"])      # no tool yet: the SDK replays code objects at start
    b.start(out.append, NO_MODE)
    fake.launch("early")
    b.flush()
    assert names(rows(out)) == ["early"]


def test_rocprof_launch_threads_are_kept_apart(make):
    fake, b, out = make()
    b.start(out.append, NO_MODE)
    fake.load_code_object(["t"])
    tids = []

    def work():
        tids.append(threading.get_native_id())
        for _ in range(5):
            fake.launch("t")

    ts = [threading.Thread(target=work) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    b.flush()
    r = rows(out)
    got = dict(zip(*np.unique(r["tid"], return_counts=True)))
    assert got == {t: 5 for t in tids}


def test_rocprof_buffer_callbacks_run_on_the_sdk_thread(make):
    fake, b, out = make()
    b.start(out.append, NO_MODE)
    fake.launch("x")
    b.flush()
    assert fake.callback_threads and threading.get_native_id() not in fake.callback_threads


def test_rocprof_full_buffers_are_copied_before_the_sdk_recycles_them(make):
    fake, b, out = make(backend_kwargs={"buffer_bytes": 1024})
    b.start(out.append, NO_MODE)
    fake.load_code_object(["w"])
    for _ in range(20):
        fake.launch("w")
    deadline = time.time() + 5
    while not fake.callback_threads and time.time() < deadline:
        time.sleep(0.01)
    assert fake.callback_threads, "watermark reached: the SDK thread delivered before any flush"
    b.flush()
    r = rows(out)
    assert len(r) == 20 and names(r) == ["w"] * 20 and (r["end_ns"] - r["start_ns"] == 1000).all()


def test_rocprof_dropped_records_are_counted(make):
    fake, b, out = make(drop_records=2)
    b.start(out.append, NO_MODE)
    for _ in range(3):
        fake.launch("d")
    b.flush()
    assert len(rows(out)) == 1 and b.dropped == 2


def test_rocprof_kernel_waits_one_flush_for_a_late_launch_record(make):
    fake, b, out = make(hold_api_records=True)
    b.start(out.append, NO_MODE)
    t0 = time.time_ns()
    fake.launch("late")
    b.flush()
    assert len(rows(out)) == 0            # kernel record alone: carried, not guessed
    fake.release_api_records()
    b.flush()
    r = rows(out)
    assert len(r) == 1 and r["launch_ns"][0] >= t0 and r["start_ns"][0] - r["launch_ns"][0] == 5000
    assert b.unmatched == 0


def test_rocprof_stop_delivers_kernels_without_launch_record_at_their_start(make):
    fake, b, out = make(hold_api_records=True)
    b.start(out.append, NO_MODE)
    fake.launch("orphan")
    b.stop()
    r = rows(out)
    assert len(r) == 1 and r["launch_ns"][0] == r["start_ns"][0] and b.unmatched == 1


def test_rocprof_kernel_record_before_its_api_record_in_one_buffer(make):
    fake, b, out = make(kernel_first=True)
    b.start(out.append, NO_MODE)
    t0 = time.time_ns()
    fake.launch("kf")
    b.flush()
    r = rows(out)
    assert len(r) == 1 and r["launch_ns"][0] >= t0 and b.unmatched == 0


def test_rocprof_records_with_start_not_before_end_are_skipped(make):
    fake, b, out = make()
    b.start(out.append, NO_MODE)
    fake.load_code_object(["zero", "ok"])
    fake.launch("zero", dur_ns=0)
    fake.launch("ok")
    b.flush()
    assert names(rows(out)) == ["ok"] and b.invalid == 1


def test_rocprof_device_index_is_the_agents_gpu_ordinal(make):
    agents = [{"type": 1, "logical_node_type_id": 0, "name": "cpu"}, gpu_agent(0), gpu_agent(1, name="gfx90a")]
    fake, b, out = make(agents=agents)
    b.start(out.append, NO_MODE)
    fake.launch("a", device=0)
    fake.launch("b", device=1)
    fake.launch("c", device=7)              # an agent the SDK never listed: device 0, as Proton
    b.flush()
    assert rows(out)["device"].tolist() == [0, 1, 0]


def test_rocprof_rocr_visible_devices_renumbers_devices(make):
    agents = [gpu_agent(0), gpu_agent(1, name="gfx90a")]
    fake, b, out = make(agents=agents, environ={"ROCR_VISIBLE_DEVICES": "1"})
    b.start(out.append, NO_MODE)
    fake.launch("v", device=1)
    b.flush()
    assert rows(out)["device"].tolist() == [0]
    assert b.device_info([0]) == {"HIP": {"0": {"arch": "gfx90a", "bus_width": 8192, "clock_rate": 2100000,
                                                "memory_clock_rate": 1300000, "num_sms": 304}}}


def test_rocprof_streams_are_small_lane_numbers_per_queue(make):
    fake, b, out = make()
    b.start(out.append, NO_MODE)
    for q in (5, 9, 5):
        fake.launch("s", queue=q)
    b.flush()
    assert rows(out)["stream"].tolist() == [0, 1, 0]


def test_rocprof_traces_only_the_hip_launch_operations(make):
    fake, b, out = make()
    b.start(out.append, NO_MODE)
    ctx = b.rt.ctx["timestamp"].handle
    ops, _ = fake.contexts[ctx]["buffer"][5]
    assert ops == set(HIP_LAUNCH_OPERATION_IDS_0_5.values())
    assert HIP_OPS["hipMalloc"] not in ops and b.rt.ops_source == "sdk"
    assert fake.contexts[ctx]["extcorr"] is None          # no Python per launch by default


def test_rocprof_operation_ids_fall_back_to_the_header_table(make):
    fake, b, out = make(enumerate_ops=False)
    b.start(out.append, NO_MODE)
    assert b.rt.ops_source == "header-0.5.0" and b.rt.ops["hipModuleLaunchKernel"] == 308


def test_rocprof_disagreeing_clocks_fall_back_to_external_correlation(make):
    fake, b, out = make(clock_offset_ns=3_000_000)     # 3 ms off every Python clock
    b.start(out.append, NO_MODE)
    assert b.attribution == "extcorr" and not b.rt.calibration.agrees
    t0 = time.time_ns()
    fake.launch("x")
    t1 = time.time_ns()
    b.flush()
    r = rows(out)
    assert t0 <= r["launch_ns"][0] <= t1                 # stamped by Python on the launching thread
    assert 0 < r["start_ns"][0] - r["launch_ns"][0] < 1_000_000
    assert fake.external_requests[0][1] == r["launch_ns"][0]


def test_rocprof_python_context_uses_the_external_correlation_request(make):
    fake, b, out = make()
    b.start(out.append, NO_MODE, python_context=lambda: 41)
    fake.launch("p")
    b.flush()
    assert b.attribution == "extcorr" and rows(out)["py_node"].tolist() == [41]


def test_rocprof_attribution_knob_overrides_calibration(make):
    fake, b, out = make(clock_offset_ns=3_000_000, environ={"PROTON_CTYPES_ATTRIBUTION": "timestamp"})
    b.start(out.append, NO_MODE)
    assert b.attribution == "timestamp"
    fake2, b2, _ = make(environ={"PROTON_CTYPES_ATTRIBUTION": "extcorr"})
    b2.start(lambda batch: None, NO_MODE)
    assert b2.attribution == "extcorr"


def test_rocprof_periodic_flushing_delivers_without_flush(make):
    fake, b, out = make(backend_kwargs={"flush_interval_s": 0.02})
    b.start(out.append, select.parse_mode("rocprofiler", "periodic_flushing:format=chrome_trace"))
    assert b.mode.periodic_flushing and b.mode.format == "chrome_trace"
    fake.load_code_object(["tick"])
    fake.launch("tick")
    deadline = time.time() + 5
    while not out and time.time() < deadline:
        time.sleep(0.01)
    assert names(rows(out)) == ["tick"]
    b.stop()
    assert b._timer is None


def test_rocprof_sessions_see_only_their_own_kernels(make):
    fake, b, first = make()
    b.start(first.append, NO_MODE)
    fake.load_code_object(["one", "between", "two"])
    fake.launch("one")
    b.stop()
    fake.launch("between")                 # no session: never delivered
    second = []
    b.start(second.append, NO_MODE)
    fake.launch("two")
    b.stop()
    assert names(rows(first)) == ["one"] and names(rows(second)) == ["two"]
    # the profiling context is started once and kept running, as Proton does
    assert fake.calls.count("rocprofiler_start_context") == 2   # code objects + timestamp


def test_rocprof_tool_finalize_stops_accepting_records(make):
    fake, b, out = make()
    b.start(out.append, NO_MODE)
    fake.finalize()
    fake.launch("after_exit")
    b.flush()
    assert len(rows(out)) == 0


def test_rocprof_device_info_prefers_hip_python(make):
    class Enum:
        hipDeviceAttributeClockRate, hipDeviceAttributeMemoryClockRate = 1, 2
        hipDeviceAttributeMemoryBusWidth, hipDeviceAttributeMultiprocessorCount = 3, 4

    class Props:
        gcnArchName = b"gfx942:sramecc+:xnack-"

    class Hip:
        hipDeviceAttribute_t = Enum
        hipDeviceProp_t = Props

        @staticmethod
        def hipDeviceGetAttribute(attr, dev):
            return 0, {1: 2100000, 2: 1300000, 3: 8192, 4: 304}[attr]

        @staticmethod
        def hipGetDeviceProperties(props, dev):
            return (0,)

    fake, b, out = make(hip=Hip)
    assert b.device_info([0]) == {"HIP": {"0": {"arch": "gfx942", "bus_width": 8192, "clock_rate": 2100000,
                                                "memory_clock_rate": 1300000, "num_sms": 304}}}
    assert b.device_info([]) == {}


def test_rocprof_flush_retries_while_the_buffer_is_busy(make):
    fake, b, out = make()
    b.start(out.append, NO_MODE)
    fake.load_code_object(["busy"])
    fake.launch("busy")
    fake.busy_flushes = 3
    b.flush()
    assert names(rows(out)) == ["busy"] and fake.busy_flushes == 0


def test_rocprof_long_kernels_find_launch_records_many_flushes_old(make):
    fake, b, out = make(hold_kernel_records=True)
    b.start(out.append, NO_MODE)
    fake.load_code_object(["long"])
    t0 = time.time_ns()
    fake.launch("long")
    t1 = time.time_ns()
    for _ in range(6):                     # many flush rounds pass while the kernel runs
        b.flush()
    assert len(rows(out)) == 0
    fake.release_kernel_records()          # it completes now
    b.flush()
    r = rows(out)
    assert names(r) == ["long"] and t0 <= r["launch_ns"][0] <= t1 and b.unmatched == 0


def test_rocprof_contexts_are_never_restarted_across_sessions(make):
    fake, b, out = make()
    b.start(out.append, NO_MODE)
    b.stop()
    b.start(out.append, NO_MODE, python_context=lambda: 3)    # needs the external-correlation context
    b.stop()
    b.start(out.append, NO_MODE)                               # keeps it: no stop/start cycle
    fake.load_code_object(["again"])
    fake.launch("again")
    b.stop()
    assert b.attribution == "extcorr" and names(rows(out)) == ["again"] and rows(out)["py_node"].tolist() == [-1]
    assert fake.calls.count("rocprofiler_start_context") == 3    # code objects, timestamp, extcorr


def test_rocprof_scattered_headers_and_payloads_are_still_copied(make):
    fake, b, out = make()
    b.start(out.append, NO_MODE)
    fake.load_code_object(["s0", "s1"])
    fake.scatter = True
    fake.launch("s0", dur_ns=700)
    fake.launch("s1", dur_ns=900)
    b.flush()
    r = rows(out)
    assert sorted(zip(names(r), (r["end_ns"] - r["start_ns"]).tolist())) == [("s0", 700), ("s1", 900)]
    assert b.unmatched == 0 and b.dropped == 0
