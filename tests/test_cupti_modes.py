"""Mode strings and start-time errors: unsupported modes, pcsampling, another CUPTI subscriber."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from fakes.fake_cupti import EXISTING_DRIVER_CBIDS, EXISTING_RUNTIME_CBIDS, FakeCupti, FakeDriver  # noqa: E402

from proton_ctypes.backends.cupti import CuptiBackend, parse_mode  # noqa: E402


@pytest.mark.parametrize("mode,expected", [
    (None, ("", {})), ("", ("", {})),
    ("periodic_flushing", ("periodic_flushing", {"format": "hatchet"})),
    ("periodic_flushing:format=chrome_trace", ("periodic_flushing", {"format": "chrome_trace"})),
    ("periodic_flushing:format=hatchet_msgpack", ("periodic_flushing", {"format": "hatchet_msgpack"})),
])
def test_supported_modes_parse(mode, expected):
    assert parse_mode(mode) == expected


@pytest.mark.parametrize("mode,message", [
    ("nope", "unsupported mode: nope"),
    ("periodic_flushing:format=csv", "unsupported format: csv"),
    ("periodic_flushing:size=3", "unsupported option key: size"),
])
def test_unsupported_mode_raises_protons_value_error(mode, message):
    with pytest.raises(ValueError, match=rf"^\[PROTON\] CuptiProfiler: {message}$"):
        parse_mode(mode)


def test_mode_errors_agree_with_the_profilers_own_validation():
    from proton_ctypes.backends import select
    for mode in ("nope", "periodic_flushing:format=csv", "periodic_flushing:size=3"):
        with pytest.raises(ValueError) as ours:
            parse_mode(mode)
        with pytest.raises(ValueError) as theirs:
            select.validate_mode("cupti", mode)
        assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize("mode", ["pcsampling", "pcsampling:interval=1000"])
def test_pcsampling_is_accepted(mode):
    """Implemented since; its behaviour is tested in test_cupti_pcsampling.py."""
    assert parse_mode(mode) == ("pcsampling", {"interval": 1000, "sampling_period": 10})


def test_another_cupti_subscriber_is_a_clear_error_not_a_crash():
    fake = FakeCupti(multiple_subscribers=True)
    backend = CuptiBackend(lib=fake, driver=FakeDriver(fake))
    with pytest.raises(RuntimeError) as info:
        backend.start(lambda batch: None, "")
    assert "torch.profiler" in str(info.value) and "nsys" in str(info.value)
    assert not backend.running and not fake.kinds           # nothing was switched on
    assert "cuptiActivityRegisterCallbacks" not in fake.calls


def test_starting_twice_is_refused():
    backend = CuptiBackend(lib=FakeCupti(), driver=FakeDriver())
    backend.start(lambda batch: None, "")
    with pytest.raises(RuntimeError, match="already started"):
        backend.start(lambda batch: None, "")
    backend.stop()


def test_deny_list_leaves_only_launch_api_records_on():
    fake = FakeCupti()
    backend = CuptiBackend(lib=fake, driver=FakeDriver(fake))
    backend.start(lambda batch: None, "")
    try:
        on = {cbid for cbid in EXISTING_DRIVER_CBIDS if fake._api_enabled(4, cbid)}
        assert on == {307, 442, 652, 653, 477, 478, 514, 515}
        on_runtime = {cbid for cbid in EXISTING_RUNTIME_CBIDS if fake._api_enabled(5, cbid)}
        assert on_runtime == {211, 214, 430, 431, 269, 270, 311, 312}
        assert {10, 4, 5} <= fake.kinds
    finally:
        backend.stop()
    assert not fake.kinds
