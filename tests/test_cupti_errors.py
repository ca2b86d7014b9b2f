"""Every CUPTI result code is checked and becomes a CuptiError carrying the vendor's text."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from fakes.fake_cupti import FakeCupti, FakeDriver  # noqa: E402

from proton_ctypes.backends.nvidia import lib as cupti_lib  # noqa: E402
from proton_ctypes.backends.cupti import CuptiBackend  # noqa: E402


def test_non_zero_result_raises_with_function_name_and_vendor_string():
    lib = cupti_lib.load_cupti(lib=FakeCupti(fail={"cuptiActivityFlushAll": 15}))
    with pytest.raises(cupti_lib.CuptiError) as info:
        lib.call("cuptiActivityFlushAll", 0)
    err = info.value
    assert isinstance(err, RuntimeError)
    assert (err.function, err.code, err.text) == ("cuptiActivityFlushAll", 15, "CUPTI_ERROR_NOT_INITIALIZED")
    assert "cuptiActivityFlushAll" in str(err) and "CUPTI_ERROR_NOT_INITIALIZED" in str(err)


def test_real_libcupti_error_text_comes_from_cuptiGetResultString():
    path = cupti_lib.triton_wheel_cupti()
    if path is None:
        pytest.skip("no libcupti in the triton wheel on this machine")
    lib = cupti_lib.load_cupti(path=path)
    assert lib.result_string(39) == "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"
    with pytest.raises(cupti_lib.CuptiError, match="CUPTI_ERROR_"):
        lib.call("cuptiActivityGetNextRecord", None, 0, None)


def test_failure_during_start_leaves_the_backend_stopped_and_restartable():
    fake = FakeCupti(fail={"cuptiActivityEnable": 1})
    backend = CuptiBackend(lib=fake, driver=FakeDriver(fake))
    with pytest.raises(cupti_lib.CuptiError, match="cuptiActivityEnable.*INVALID_PARAMETER"):
        backend.start(lambda batch: None, "")
    assert not backend.running and fake.subscriber is None
    fake.fail.clear()
    backend.start(lambda batch: None, "")
    assert backend.running
    backend.stop()
