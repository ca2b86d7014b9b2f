"""Mode strings and start-time errors: unsupported modes, pcsampling, another CUPTI subscriber."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from fakes.fake_cupti import EXISTING_DRIVER_CBIDS, EXISTING_RUNTIME_CBIDS, FakeCupti, FakeDriver  # noqa: E402

from conftest import parsed  # noqa: E402
from proton_ctypes.backends import select  # noqa: E402
from proton_ctypes.backends.cupti import CuptiBackend  # noqa: E402
from proton_ctypes.backends.modes import NO_MODE  # noqa: E402


@pytest.mark.parametrize("mode,expected", [
    (None, ("", {})), ("", ("", {})),
    ("periodic_flushing", ("periodic_flushing", {"format": "hatchet"})),
    ("periodic_flushing:format=chrome_trace", ("periodic_flushing", {"format": "chrome_trace"})),
    ("periodic_flushing:format=hatchet_msgpack", ("periodic_flushing", {"format": "hatchet_msgpack"})),
])
def test_supported_modes_parse(mode, expected):
    assert parsed("cupti", mode) == expected


@pytest.mark.parametrize("mode,message", [
    ("nope", "unsupported mode: nope"),
    ("periodic_flushing:format=csv", "unsupported format: csv"),
    ("periodic_flushing:size=3", "unsupported option key: size"),
    ("nope:format=hatchet", "unsupported mode: nope"),
    ("PCSampling", "unsupported mode: PCSampling"),
])
def test_unsupported_mode_raises_protons_value_error(mode, message):
    with pytest.raises(ValueError, match=rf"^\[PROTON\] CuptiProfiler: {message}$"):
        select.parse_mode("cupti", mode)


def test_start_refuses_a_bad_mode_with_the_parsers_message():
    import proton_ctypes as proton
    for mode in ("nope", "periodic_flushing:format=csv", "periodic_flushing:size=3", "pcsampling:interval=0"):
        with pytest.raises(ValueError) as session_layer:
            select.parse_mode("mock", mode)
        with pytest.raises(ValueError) as start:
            proton.start("m", backend="mock", mode=mode)
        assert str(start.value) == str(session_layer.value)


def test_periodic_formats_are_the_writers_formats():
    from proton_ctypes.writers import FORMATS
    for fmt in FORMATS:
        assert parsed("cupti", f"periodic_flushing:format={fmt}") == ("periodic_flushing", {"format": fmt})


def test_only_the_first_periodic_option_is_read_as_in_proton():
    assert parsed("cupti", "periodic_flushing:format=chrome_trace:size=3") == \
        ("periodic_flushing", {"format": "chrome_trace"})
    assert parsed("cupti", "periodic_flushing:flag:format=csv") == ("periodic_flushing", {"format": "hatchet"})


@pytest.mark.parametrize("mode", ["pcsampling", "pcsampling:interval=1000"])
def test_pcsampling_is_accepted(mode):
    """Implemented since; its behaviour is tested in test_cupti_pcsampling.py."""
    assert parsed("cupti", mode) == ("pcsampling", {"interval": 1000})


def test_another_cupti_subscriber_is_a_clear_error_not_a_crash():
    fake = FakeCupti(multiple_subscribers=True)
    backend = CuptiBackend(lib=fake, driver=FakeDriver(fake))
    with pytest.raises(RuntimeError) as info:
        backend.start(lambda batch: None, NO_MODE)
    assert "torch.profiler" in str(info.value) and "nsys" in str(info.value)
    assert not backend.running and not fake.kinds           # nothing was switched on
    assert "cuptiActivityRegisterCallbacks" not in fake.calls


def test_starting_twice_is_refused():
    backend = CuptiBackend(lib=FakeCupti(), driver=FakeDriver())
    backend.start(lambda batch: None, NO_MODE)
    with pytest.raises(RuntimeError, match="already started"):
        backend.start(lambda batch: None, NO_MODE)
    backend.stop()


def test_deny_list_leaves_only_launch_api_records_on():
    """Where the launch-API records are the launch source (a CUPTI without latency timestamps)."""
    fake = FakeCupti(latency_timestamps=False)
    backend = CuptiBackend(lib=fake, driver=FakeDriver(fake))
    backend.start(lambda batch: None, NO_MODE)
    try:
        on = {cbid for cbid in EXISTING_DRIVER_CBIDS if fake._api_enabled(4, cbid)}
        assert on == {307, 442, 652, 653, 477, 478, 514, 515}
        on_runtime = {cbid for cbid in EXISTING_RUNTIME_CBIDS if fake._api_enabled(5, cbid)}
        assert on_runtime == {211, 214, 430, 431, 269, 270, 311, 312}
        assert {10, 4, 5} <= fake.kinds
    finally:
        backend.stop()
    assert not fake.kinds
