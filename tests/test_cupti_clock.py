"""Clock calibration at start: CUPTI time vs time.time_ns(), and the external-correlation fallback."""
import os
import sys
import time

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from fakes.fake_cupti import FakeCupti, started_backend  # noqa: E402

from proton_ctypes.backends.nvidia import lib as cupti_lib, locate  # noqa: E402


def test_small_offset_keeps_timestamp_attribution_and_times_are_corrected():
    backend, fake, sink = started_backend(FakeCupti(clock_offset_ns=20_000))
    before = time.time_ns()
    fake.launch("k")
    after = time.time_ns()
    backend.stop()
    assert backend.attribution == "timestamp"
    assert abs(backend.clock_offset_ns - 20_000) < 5_000
    row = sink.rows()[0]
    assert before - 5_000 <= row["launch_ns"] <= after + 5_000


def test_large_offset_switches_to_external_correlation_and_warns():
    with pytest.warns(RuntimeWarning, match="external correlation"):
        backend, fake, sink = started_backend(FakeCupti(clock_offset_ns=3_600 * 10**9))
    assert backend.attribution == "extcorr" and 39 in fake.kinds
    backend.push_external(7)
    fake.launch("in_scope_7")
    backend.push_external(8)
    fake.launch("in_scope_8")
    assert backend.pop_external() == 8
    assert backend.pop_external() == 7
    fake.launch("outside")
    backend.stop()
    rows = sink.rows()
    assert rows["py_node"].tolist() == [7, 8, -1]
    assert np.all(np.abs(rows["start_ns"] - time.time_ns()) < 60 * 10**9)   # converted to time.time_ns()


def test_extcorr_can_be_forced_by_environment(monkeypatch):
    monkeypatch.setenv("PROTON_CTYPES_ATTRIBUTION", "extcorr")
    backend, fake, sink = started_backend()
    assert backend.attribution == "extcorr"
    backend.stop()


def test_real_cupti_clock_is_time_time_ns():
    path = locate.triton_wheel_cupti()
    if path is None:
        pytest.skip("no libcupti in the triton wheel on this machine")
    lib = cupti_lib.load_cupti(path=path)
    best = None
    for _ in range(64):
        a = time.time_ns()
        stamp = lib.timestamp()
        b = time.time_ns()
        if best is None or b - a < best[0]:
            best = (b - a, stamp - (a + b) // 2)
    assert abs(best[1]) < 50_000, best
