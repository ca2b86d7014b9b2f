"""bench/cupti_floor.py: the CUPTI floor rows of the GPU benches, checked over the fake libcupti
(the figures come from the H200; here: it switches on what its recipe says, CUPTI's buffers come
back to its pool, and it records nothing of the scopes)."""
import ctypes
import pathlib
import sys
import threading
import time

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "bench"))
from cupti_floor import Floor, floor_profiler  # noqa: E402
from fakes.fake_cupti import FakeCupti  # noqa: E402
from proton_ctypes.backends.nvidia.lib import load_cupti  # noqa: E402


@pytest.mark.parametrize("recipe, per_thread, timestamps", [("kernels", False, False), ("ours", True, True)])
def test_floor_switches_on_kernel_records_with_its_recipes_options_and_off_at_finalize(recipe, per_thread,
                                                                                     timestamps):
    fake = FakeCupti(per_thread_buffers=False)
    floor = floor_profiler(f"floor:{recipe}", lib=load_cupti(fake))
    floor.start("ignored", data="tree")
    assert fake.latency is timestamps
    assert fake.per_thread_buffers is per_thread
    for _ in range(50):
        with floor.scope("step"):
            floor.enter_scope("layer")
            fake.launch("tiny")
            floor.exit_scope("layer")
    floor.finalize()
    assert fake.latency is False
    assert floor.records_bytes > 0            # the kernel records reached the floor's buffers
    assert not floor._buffers                 # every buffer came back ...
    assert 1 <= len(floor._pool) <= 2         # ... to a pool that reuses them


def test_a_floor_detaches_cupti_at_finalize_and_a_second_start_attaches_it_afresh():
    fake = FakeCupti(per_thread_buffers=False)
    floor = floor_profiler("floor:per_thread", lib=load_cupti(fake))
    floor.start()
    fake.launch("first")
    floor.finalize()
    assert fake.calls["cuptiFinalize"] == 1 and fake.request is None
    before = floor.records_bytes
    floor.start()
    assert fake.request is not None and fake.per_thread_buffers is True
    fake.launch("second")
    floor.finalize()
    assert fake.calls["cuptiFinalize"] == 2
    assert floor.records_bytes > before > 0    # the second run's records reached the floor too


def test_an_unknown_floor_recipe_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown floor recipe 'api'"):
        Floor("api")


def test_kept_kernel_records_name_their_launching_thread_and_carry_queued_only_while_timestamps_are_on():
    import threading

    fake = FakeCupti()
    floor = Floor("per_thread", lib=load_cupti(fake), keep_records=True)
    floor.start()
    for _ in range(3):
        fake.launch("tiny")
    floor._lib.enable_latency_timestamps(True)
    other = threading.Thread(target=lambda: [fake.launch("tiny") for _ in range(2)])
    other.start()
    other.join()
    fake.launch("tiny")
    floor.finalize()
    me = threading.get_native_id()
    mine = sorted((start, queued) for owner, queued, start in floor.kernels if owner == me)
    theirs = [queued for owner, queued, _ in floor.kernels if owner != me]
    assert [q != 0 for _, q in mine] == [False, False, False, True]
    assert len(theirs) == 2 and all(theirs)


def test_overhead_floor_rows_are_bare_rows_naming_their_recipe_with_a_ratio_to_proton_and_no_finalize():
    from overhead_diagnostics import FLOOR_IMPLS
    from overhead_table import summarize

    case = "triton launch, one scope"

    def run(us, bare_us, finalize_s=0.01):
        return {case: {"us": us, "self_pairs_us": [us - bare_us], "finalize_s": finalize_s}}
    collected = {"bare": [{case: {"us": 10.0}}], "proton": [run(12.0, 10.0)], "proton_ctypes": [run(11.5, 10.0)],
                 "floor:kernels": [run(10.5, 10.0)], "floor:ours": [run(11.0, 10.0)]}
    rows = [r for r in summarize(collected) if r["case"] == case]
    floors = {r["floor"]: r for r in rows if "floor" in r}
    assert set(floors) == {"kernels", "ours"} and {"floor:" + f for f in floors} <= set(FLOOR_IMPLS)
    assert all(r["impl"] == "bare" for r in floors.values())
    assert floors["kernels"]["overhead_us"] == 0.5 and floors["kernels"]["ratio_to_proton"] == 0.25
    assert floors["ours"]["ratio_to_proton"] == 0.5
    assert "kernels_recorded" not in floors["ours"]         # a floor writes no profile to count
    finalize_impls = {r["impl"] for r in summarize(collected) if r["case"].startswith("finalize")}
    assert finalize_impls == {"proton", "proton_ctypes"}


def test_a_flushing_floor_hands_cupti_buffers_back_during_the_run_and_stops_at_finalize():
    fake = FakeCupti()
    floor = floor_profiler("floor:ours", lib=load_cupti(fake), flush_interval_s=0.01)
    floor.start()
    fake.launch("tiny")
    deadline = time.monotonic() + 5
    while floor.records_bytes == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert floor.records_bytes > 0            # flushed back before finalize
    floor.finalize()
    flushes = fake.calls["cuptiActivityFlushAll"]
    time.sleep(0.05)
    assert fake.calls["cuptiActivityFlushAll"] == flushes


def test_a_floor_names_each_threads_current_buffer_and_hands_each_kernel_record_to_its_hook():
    seen = []
    fake = FakeCupti()
    floor = Floor("per_thread", lib=load_cupti(fake), on_kernel=lambda *record: seen.append(record))
    floor.start()
    fake.launch("tiny")
    me = threading.get_native_id()
    address = floor.current[me]
    assert floor.request_number[address] == floor.requests == 1
    floor.finalize()
    assert [(owner, buffer, offset) for owner, buffer, offset in seen] == [(me, address, 0)]
    corr = ctypes.c_uint32.from_address(address + floor.field_offsets["correlationId"]).value
    assert corr > 0


def test_the_pylog_floor_logs_one_entry_per_scope_edge_on_every_thread_and_takes_the_logs_away(monkeypatch):
    import cupti_floor
    monkeypatch.setattr(cupti_floor, "LOG_TAKE_INTERVAL_S", 3600)     # its thread takes nothing meanwhile
    fake = FakeCupti(per_thread_buffers=False)
    floor = floor_profiler("floor:pylog", lib=load_cupti(fake))
    floor.start()
    assert fake.per_thread_buffers is True and fake.latency is False
    cupti_floor.take_logs()

    def work():
        for _ in range(10):
            with floor.scope("step"):
                floor.enter_scope("layer")
                fake.launch("tiny")
                floor.exit_scope("layer")

    t = threading.Thread(target=work)
    t.start()
    t.join()
    work()
    logs = [log for log in cupti_floor._all_logs if log]
    assert sorted(len(log) for log in logs) == [80, 80]    # 4 edges x 10 x (time, code), per thread
    assert all(isinstance(log[0], int) and log[1] == 0 for log in logs)
    floor.finalize()
    assert not any(cupti_floor._all_logs)                  # taken away, as a collector would
    assert floor.records_bytes > 0


@pytest.mark.parametrize("recipe", ["subscribed", "callbacks"])
def test_the_subscriber_floors_subscribe_switch_on_only_their_callbacks_and_leave_nothing_behind(recipe):
    from proton_ctypes.backends.nvidia import cbids
    fake = FakeCupti(per_thread_buffers=False)
    floor = floor_profiler(f"floor:{recipe}", lib=load_cupti(fake))
    floor.start()
    assert fake.subscriber is not None and fake.per_thread_buffers is True and fake.latency is False
    if recipe == "subscribed":
        assert not fake.enabled_callbacks
    else:   # what proton_ctypes switches on in the shadow context: graph nodes, graph launches, captures
        assert (cbids.CB_DOMAIN_RESOURCE, cbids.RESOURCE_GRAPHEXEC_CREATED) in fake.enabled_callbacks
        assert {(cbids.CB_DOMAIN_DRIVER_API, c) for c in cbids.DRIVER_GRAPH_LAUNCH_CBIDS} <= fake.enabled_callbacks
        assert not any(c in cbids.DRIVER_LAUNCH_CBIDS.values() and c not in cbids.DRIVER_GRAPH_LAUNCH_CBIDS
                       for d, c in fake.enabled_callbacks if d == cbids.CB_DOMAIN_DRIVER_API)   # no kernel launch
    fake.launch("tiny")
    floor.finalize()
    assert fake.calls["cuptiUnsubscribe"] == 1 and fake.subscriber is None and not fake.enabled_callbacks
    assert floor.records_bytes > 0
