"""Every CUPTI result code is checked and becomes a CuptiError carrying the vendor's text."""
import ast
import os
import pathlib
import re
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from fakes.fake_cupti import FakeCupti, FakeDriver  # noqa: E402

from proton_ctypes.backends.modes import NO_MODE  # noqa: E402
from proton_ctypes.backends.nvidia import lib as cupti_lib, locate  # noqa: E402
from proton_ctypes.backends.cupti import CuptiBackend  # noqa: E402


def test_non_zero_result_raises_with_function_name_and_vendor_string():
    lib = cupti_lib.load_cupti(lib=FakeCupti(fail={"cuptiActivityFlushAll": 15}))
    with pytest.raises(cupti_lib.CuptiError) as info:
        lib.flush_all()
    err = info.value
    assert isinstance(err, RuntimeError)
    assert (err.function, err.code, err.text) == ("cuptiActivityFlushAll", 15, "CUPTI_ERROR_NOT_INITIALIZED")
    assert "cuptiActivityFlushAll" in str(err) and "CUPTI_ERROR_NOT_INITIALIZED" in str(err)


def test_real_libcupti_error_text_comes_from_cuptiGetResultString():
    path = locate.triton_wheel_cupti()
    if path is None:
        pytest.skip("no libcupti in the triton wheel on this machine")
    lib = cupti_lib.load_cupti(path=path)
    assert lib.result_string(39) == "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"
    with pytest.raises(cupti_lib.CuptiError, match="CUPTI_ERROR_"):
        lib.call("cuptiActivityGetNextRecord", None, 0, None)   # the generic checked call


def test_failure_during_start_leaves_the_backend_stopped_and_restartable():
    fake = FakeCupti(fail={"cuptiActivityEnable": 1})
    backend = CuptiBackend(lib=fake, driver=FakeDriver(fake))
    with pytest.raises(cupti_lib.CuptiError, match="cuptiActivityEnable.*INVALID_PARAMETER"):
        backend.start(lambda batch: None, NO_MODE)
    assert not backend.running and fake.subscriber is None
    fake.fail.clear()
    backend.start(lambda batch: None, NO_MODE)
    assert backend.running
    backend.stop()


@pytest.mark.parametrize("method,args,function", [
    ("register_buffer_callbacks", (None, None), "cuptiActivityRegisterCallbacks"),
    ("set_thread_id_type", (1,), "cuptiSetThreadIdType"),
    ("enable_kind", (10,), "cuptiActivityEnable"),
    ("flush_all", (), "cuptiActivityFlushAll"),
    ("timestamp", (), "cuptiGetTimestamp"),
    ("push_external", (3, 7), "cuptiActivityPushExternalCorrelationId"),
    ("subscribe", (None,), "cuptiSubscribe"),
    ("enable_callback", (None, 3, 13), "cuptiEnableCallback"),
])
def test_every_checked_method_raises_with_cuptis_error_string(method, args, function):
    lib = cupti_lib.load_cupti(lib=FakeCupti(fail={function: 15}))
    with pytest.raises(cupti_lib.CuptiError, match=rf"^\[PROTON\] {function} failed: CUPTI error 15: "
                                                    r"CUPTI_ERROR_NOT_INITIALIZED$") as info:
        getattr(lib, method)(*args)
    assert (info.value.function, info.value.code) == (function, 15)


@pytest.mark.parametrize("method,args,function", [
    ("disable_kind", (10,), "cuptiActivityDisable"),
    ("flush_all_quietly", (), "cuptiActivityFlushAll"),
    ("unsubscribe", (None,), "cuptiUnsubscribe"),
    ("disable_callback", (None, 3, 13), "cuptiEnableCallback"),
])
def test_teardown_methods_ignore_failures(method, args, function):
    fake = FakeCupti(fail={function: 15})
    getattr(cupti_lib.load_cupti(lib=fake), method)(*args)
    assert fake.calls[function] == 1


def test_dropped_records_is_zero_when_cupti_cannot_say():
    fake = FakeCupti(drop_records=4, fail={"cuptiActivityGetNumDroppedRecords": 15})
    assert cupti_lib.load_cupti(lib=fake).dropped_records() == 0
    fake.fail.clear()
    fake.drop_records = 4
    assert cupti_lib.load_cupti(lib=fake).dropped_records() == 4


def test_only_cuptilib_calls_cupti_functions():
    """No module but nvidia/lib.py names a CUPTI function in code (docstrings and messages may)."""
    root = pathlib.Path(cupti_lib.__file__).resolve().parents[2]
    name = re.compile(r"^cupti[A-Z]\w*$")
    offenders = []
    for path in root.rglob("*.py"):
        if path == pathlib.Path(cupti_lib.__file__).resolve():
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Attribute) and name.match(node.attr):
                offenders.append((path.name, node.attr))
            elif isinstance(node, ast.Call):
                for arg in node.args:
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and name.match(arg.value):
                        offenders.append((path.name, arg.value))
    assert offenders == []
