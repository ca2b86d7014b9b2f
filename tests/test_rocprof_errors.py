"""Every error path of the rocprofiler-sdk backend: loading, status codes, environment, modes."""
from __future__ import annotations

import ast
import ctypes
import pathlib

import pytest

from fakes.fake_rocprofiler import FakeRocprofilerSdk
from proton_ctypes.backends import select
from proton_ctypes.backends.amd import lib as rocm_lib, sdk_runtime as rocm_sdk_runtime
from proton_ctypes.backends.modes import NO_MODE
from conftest import parsed
from proton_ctypes.backends.amd.sdk_api import RocprofilerError, SdkLib
from proton_ctypes.backends.amd.tracer_api import RoctracerError, TracerLib
from proton_ctypes.backends.rocprof import RocprofilerBackend, load_rocprofiler

HIP_MSG = ("Proton does not work when the environment variable HIP_VISIBLE_DEVICES is set on AMD GPUs. "
           "Please unset it and use `ROCR_VISIBLE_DEVICES` instead")


@pytest.fixture
def backends():
    made = []

    def build(fake=None, environ=None):
        fake = fake or FakeRocprofilerSdk()
        b = RocprofilerBackend(lib=fake, environ={} if environ is None else environ, hip=False,
                               synchronize=lambda: None)
        made.append(b)
        return fake, b

    yield build
    for b in made:
        b.shutdown()
        if b.sdk is not None:
            rocm_sdk_runtime.forget(b.sdk)


def test_rocprof_missing_library_raises_protons_message():
    env = {"TRITON_ROCPROFILER_SDK_LIB_PATH": "/nonexistent/rocm/lib", "ROCM_PATH": "/nonexistent/rocm"}
    if rocm_lib.library_available(rocm_lib.ROCPROFILER_SDK_SONAME, env):
        pytest.skip("librocprofiler-sdk.so is installed on this machine")
    with pytest.raises(RuntimeError) as e:
        RocprofilerBackend(environ=env).start(lambda b: None, NO_MODE)
    assert str(e.value) == "[PROTON] Could not load `librocprofiler-sdk.so`"


def test_rocprof_library_knobs_are_tried_first(tmp_path):
    lib = tmp_path / "librocprofiler-sdk.so.1"
    lib.write_bytes(b"")
    env = {"TRITON_ROCPROFILER_SDK_LIB_PATH": str(tmp_path), "TRITON_ROCPROFILER_SDK_LIBRARY": lib.name}
    assert rocm_lib.candidates(rocm_lib.ROCPROFILER_SDK_SONAME, env)[0] == (str(lib), "knob")
    opened = []
    loaded = rocm_lib.load_library(rocm_lib.ROCPROFILER_SDK_SONAME, opener=lambda p: opened.append(p) or "L",
                                   environ=env)
    assert loaded == ("L", str(lib), "knob") and opened == [str(lib)]
    assert rocm_lib.candidates(rocm_lib.ROCPROFILER_SDK_SONAME, {"ROCM_PATH": "/r"})[-2:] == [
        ("/opt/rocm/lib/librocprofiler-sdk.so", "rocm"), ("librocprofiler-sdk.so", "ldpath")]


def test_rocprof_injected_library_is_used_as_is():
    fake = FakeRocprofilerSdk()
    sdk = load_rocprofiler(fake)
    assert sdk.lib is fake and sdk.source == "injected" and sdk.version() == (0, 5, 0)


def test_rocprof_failed_status_carries_the_status_string(backends):
    fake, b = backends(FakeRocprofilerSdk(fail={"rocprofiler_create_buffer": 3}))
    with pytest.raises(RuntimeError) as e:
        b.start(lambda batch: None, NO_MODE)
    assert "rocprofiler_create_buffer failed: No valid buffer for given buffer id (status 3)" in str(e.value)


def test_rocprof_failed_flush_raises_rocprofiler_error(backends):
    fake, b = backends()
    b.start(lambda batch: None, NO_MODE)
    fake.fail["rocprofiler_flush_buffer"] = 1
    with pytest.raises(RocprofilerError) as e:
        b.flush()
    assert e.value.func == "rocprofiler_flush_buffer" and e.value.text == "Generalized error"
    fake.fail.clear()


def test_rocprof_sdk_configured_by_someone_else_is_a_clear_error(backends):
    fake, b = backends(FakeRocprofilerSdk(already_configured=True))
    with pytest.raises(RocprofilerError) as e:
        b.start(lambda batch: None, NO_MODE)
    msg = str(e.value)
    assert "rocprofiler_force_configure" in msg and "not valid outside of rocprofiler configuration" in msg
    assert "before the first HIP call" in msg


@pytest.mark.parametrize("env,var", [({"HIP_VISIBLE_DEVICES": "0"}, "HIP_VISIBLE_DEVICES"),
                                     ({"CUDA_VISIBLE_DEVICES": ""}, "CUDA_VISIBLE_DEVICES"),
                                     ({"CUDA_VISIBLE_DEVICES": "1", "HIP_VISIBLE_DEVICES": "1"},
                                      "HIP_VISIBLE_DEVICES")])
def test_rocprof_visible_devices_variables_are_refused(backends, env, var):
    fake, b = backends(environ=env)
    with pytest.raises(ValueError) as e:
        b.start(lambda batch: None, NO_MODE)
    assert str(e.value) == HIP_MSG.replace("HIP_VISIBLE_DEVICES is set", f"{var} is set")
    assert fake.calls == []          # refused before touching the SDK


def test_rocprof_check_amd_env_reads_os_environ(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setenv("HIP_VISIBLE_DEVICES", "")
    with pytest.raises(ValueError, match="HIP_VISIBLE_DEVICES is set on AMD GPUs"):
        rocm_lib.check_amd_env()


def test_rocprof_unknown_mode_uses_protons_profiler_name():
    with pytest.raises(ValueError) as e:
        select.parse_mode("rocprofiler", "nope")
    assert str(e.value) == "[PROTON] RocprofSDKProfiler: unsupported mode: nope"


def test_rocprof_pcsampling_is_refused_naming_the_mode(backends):
    fake, b = backends()
    with pytest.raises(NotImplementedError) as e:
        b.start(lambda batch: None, select.parse_mode("rocprofiler", "pcsampling:interval=1000"))
    assert isinstance(e.value, ValueError)                 # Proton 3.8 raised ValueError here
    assert str(e.value).startswith("[PROTON] RocprofSDKProfiler: unsupported mode: pcsampling")


@pytest.mark.parametrize("mode,msg", [
    ("periodic_flushing:format=csv", "[PROTON] RocprofSDKProfiler: unsupported format: csv"),
    ("periodic_flushing:every=1", "[PROTON] RocprofSDKProfiler: unsupported option key: every")])
def test_rocprof_periodic_flushing_options_are_checked(mode, msg):
    with pytest.raises(ValueError) as e:
        select.parse_mode("rocprofiler", mode)
    assert str(e.value) == msg


def test_rocprof_mode_objects_are_read_through_str(backends):
    class Mode:
        def __str__(self):
            return "periodic_flushing:format=hatchet_msgpack"

    fake, b = backends()
    b.start(lambda batch: None, select.parse_mode("rocprofiler", Mode()))
    assert b.mode.periodic_flushing and b.mode.format == "hatchet_msgpack"
    assert parsed("rocprofiler", None) == ("", {})


def test_rocprof_mode_names_are_matched_exactly():
    for mode in ("Periodic_Flushing", "nope"):
        with pytest.raises(ValueError) as session_error:
            select.parse_mode("rocprofiler", mode)
        assert str(session_error.value) == f"[PROTON] RocprofSDKProfiler: unsupported mode: {mode}"


def test_rocprof_backend_never_imports_the_api_layer():
    root = pathlib.Path(__file__).resolve().parents[1] / "proton_ctypes" / "backends"
    paths = list((root / "amd").glob("*.py")) + [root / "rocprof.py", root / "roctracer.py", root / "modes.py"]
    assert len(paths) > 3
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                mod = ("." * node.level) + (node.module or "")
                assert not any(x in mod for x in ("profile", "scope", "state", "session")), (path.name, mod)


@pytest.mark.parametrize("wrapper,error,function,soname", [
    (SdkLib, RocprofilerError, "rocprofiler_flush_buffer", "librocprofiler-sdk.so"),
    (TracerLib, RoctracerError, "roctracer_flush_activity", "libroctracer64.so"),
])
def test_both_amd_libraries_share_one_checked_wrapper(wrapper, error, function, soname):
    assert issubclass(wrapper, rocm_lib.VendorLib) and issubclass(error, rocm_lib.VendorError)
    assert wrapper.call is rocm_lib.VendorLib.call and wrapper.raw is rocm_lib.VendorLib.raw
    lib = wrapper(object())                      # exports nothing
    assert not lib.has(function)
    with pytest.raises(error) as e:
        lib.call(function)
    assert (e.value.func, e.value.status) == (function, rocm_lib.STATUS_NOT_EXPORTED)
    assert str(e.value) == f"[PROTON] {function} failed: function not exported by this {soname} (status -1)"


def test_the_shared_wrapper_declares_a_real_library_once():
    libc = ctypes.CDLL(None)
    prototypes = {"strlen": (ctypes.c_size_t, [ctypes.c_char_p]), "no_such_function_here": (ctypes.c_int, [])}
    rocm_lib.declare(libc, prototypes)
    assert libc.strlen.argtypes == [ctypes.c_char_p] and libc.strlen(b"four") == 4
