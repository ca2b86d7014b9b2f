"""``proton_ctypes._rocm``: TheRock (ROCm as Python wheels) runtime discovery, as 3.9's
``triton.profiler._rocm``.

A fake ``rocm_sdk`` module and fake library files stand in for TheRock.  Every scenario also
runs against 3.9's own module (loaded from its file, where triton 3.9 is installed) and both
must leave the same environment and make the same calls.
"""
import importlib.util
import os
import sys
import types

import pytest

import proton_ctypes
from proton_ctypes import _rocm

LIBS = ("amdhip64", "rocprofiler-sdk", "rocprofiler-sdk-roctx", "roctracer64", "roctx64")
VARS = ("TRITON_LIBHIP_PATH", "TRITON_HSA_RUNTIME_PATH", "TRITON_HSA_RUNTIME_LIBRARY",
        "TRITON_ROCPROFILER_SDK_LIB_PATH", "TRITON_ROCPROFILER_SDK_LIBRARY", "TRITON_ROCTRACER_LIB_PATH",
        "TRITON_ROCTRACER_LIBRARY", "TRITON_ROCTX_LIB_PATH", "TRITON_ROCTX_LIBRARY")


def _real_module():
    spec = importlib.util.find_spec("triton")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(spec.submodule_search_locations[0], "profiler", "_rocm.py")
    if not os.path.exists(path):
        return None
    s = importlib.util.spec_from_file_location("_real_proton_rocm", path)
    mod = importlib.util.module_from_spec(s)
    s.loader.exec_module(mod)
    return mod


_REAL = _real_module()
IMPLS = [pytest.param(_rocm, id="ours"),
         pytest.param(_REAL, id="real", marks=pytest.mark.skipif(_REAL is None, reason="no triton 3.9 _rocm.py"))]


@pytest.fixture
def therock(tmp_path, monkeypatch):
    """A fake TheRock install: ``rocm_sdk`` finding libraries under ``tmp_path``."""
    for v in VARS:
        monkeypatch.delenv(v, raising=False)
    lib = tmp_path / "_rocm_sdk_core" / "lib"
    lib.mkdir(parents=True)
    paths = {}
    for name in LIBS:
        p = lib / f"lib{name}.so.7"
        p.write_bytes(b"")
        paths[name] = p
    (lib / "libhsa-runtime64.so.1").write_bytes(b"")
    calls = []
    sdk = types.ModuleType("rocm_sdk")
    sdk.find_libraries = lambda *names: [paths[n] for n in names]
    sdk.preload_libraries = lambda *names: calls.append(names)
    monkeypatch.setitem(sys.modules, "rocm_sdk", sdk)
    loaded = []
    monkeypatch.setattr("ctypes.CDLL", lambda path, mode=0: loaded.append((path, mode)) or "hsa-handle")
    return types.SimpleNamespace(lib=lib, paths=paths, preloaded=calls, loaded=loaded, sdk=sdk)


def _run(mod):
    mod.find_therock_rocm_libraries.cache_clear()
    try:
        return mod.configure_runtime()
    finally:
        mod.find_therock_rocm_libraries.cache_clear()


@pytest.mark.parametrize("mod", IMPLS)
def test_configure_runtime_without_therock(mod, monkeypatch):
    monkeypatch.setattr(mod, "find_therock_rocm_libraries", lambda: None)
    assert mod.configure_runtime() is None


@pytest.mark.parametrize("mod", IMPLS)
def test_no_rocm_sdk_installed_means_none(mod, monkeypatch):
    monkeypatch.setitem(sys.modules, "rocm_sdk", None)  # import raises ImportError
    before = dict(os.environ)
    assert _run(mod) is None
    assert dict(os.environ) == before


@pytest.mark.parametrize("mod", IMPLS)
def test_missing_hsa_means_none(mod, therock):
    (therock.lib / "libhsa-runtime64.so.1").unlink()
    assert _run(mod) is None
    assert not any(v in os.environ for v in VARS)


@pytest.mark.parametrize("mod", IMPLS)
def test_missing_library_means_none(mod, therock):
    def find(*names):
        raise FileNotFoundError(names[0])
    therock.sdk.find_libraries = find
    assert _run(mod) is None


@pytest.mark.parametrize("mod", IMPLS)
def test_therock_sets_every_variable_and_preloads(mod, therock):
    lib = str(therock.lib)
    assert _run(mod) == "hsa-handle"
    assert os.environ["TRITON_LIBHIP_PATH"] == str(therock.paths["amdhip64"])
    assert (os.environ["TRITON_HSA_RUNTIME_PATH"], os.environ["TRITON_HSA_RUNTIME_LIBRARY"]) == \
        (lib, "libhsa-runtime64.so.1")
    assert (os.environ["TRITON_ROCPROFILER_SDK_LIB_PATH"], os.environ["TRITON_ROCPROFILER_SDK_LIBRARY"]) == \
        (lib, "librocprofiler-sdk.so.7")
    assert (os.environ["TRITON_ROCTRACER_LIB_PATH"], os.environ["TRITON_ROCTRACER_LIBRARY"]) == \
        (lib, "libroctracer64.so.7")
    assert os.environ["TRITON_ROCTX_LIBRARY"] == str(therock.paths["roctx64"])
    assert "TRITON_ROCTX_LIB_PATH" not in os.environ
    import ctypes
    assert therock.loaded == [(os.path.join(lib, "libhsa-runtime64.so.1"), ctypes.RTLD_GLOBAL | os.RTLD_NOW)]
    assert therock.preloaded == [LIBS[:1] + ("roctx64", "rocprofiler-sdk", "rocprofiler-sdk-roctx", "roctracer64")]


@pytest.mark.parametrize("mod", IMPLS)
def test_user_settings_are_kept_and_not_preloaded(mod, therock, monkeypatch):
    monkeypatch.setenv("TRITON_LIBHIP_PATH", "/mine/libamdhip64.so")
    monkeypatch.setenv("TRITON_ROCTRACER_LIBRARY", "libroctracer64.so")
    monkeypatch.setenv("TRITON_ROCTX_LIB_PATH", "/mine")
    monkeypatch.setenv("TRITON_HSA_RUNTIME_LIBRARY", "/mine/libhsa.so")
    assert _run(mod) == "hsa-handle"
    assert os.environ["TRITON_LIBHIP_PATH"] == "/mine/libamdhip64.so"
    assert os.environ["TRITON_ROCTRACER_LIBRARY"] == "libroctracer64.so"
    assert "TRITON_ROCTRACER_LIB_PATH" not in os.environ
    assert "TRITON_ROCTX_LIBRARY" not in os.environ
    assert "TRITON_HSA_RUNTIME_PATH" not in os.environ
    assert therock.loaded[0][0] == "/mine/libhsa.so"  # an absolute library name is used as is
    assert therock.preloaded == [("rocprofiler-sdk", "rocprofiler-sdk-roctx")]


@pytest.mark.skipif(_REAL is None, reason="no triton 3.9 _rocm.py")
@pytest.mark.parametrize("preset", [{}, {"TRITON_ROCPROFILER_SDK_LIB_PATH": "/x"}, {"TRITON_ROCTX_LIBRARY": "r"},
                                    {"TRITON_HSA_RUNTIME_PATH": "/h"}])
def test_same_environment_as_real(therock, monkeypatch, preset):
    results = []
    for mod in (_REAL, _rocm):
        for v in VARS:
            monkeypatch.delenv(v, raising=False)
        for k, v in preset.items():
            monkeypatch.setenv(k, v)
        therock.loaded.clear()
        therock.preloaded.clear()
        out = _run(mod)
        results.append((out, {v: os.environ.get(v) for v in VARS}, list(therock.loaded), list(therock.preloaded)))
    assert results[0] == results[1]


def test_package_import_configured_the_runtime_and_exports_configure_runtime_as_triton_3_9():
    # no TheRock here: the import ran configure_runtime and kept its (None) result
    assert proton_ctypes.configure_runtime is proton_ctypes._rocm.configure_runtime
    assert hasattr(proton_ctypes, "_hsa_runtime_handle")
    if importlib.util.find_spec("rocm_sdk") is None:
        assert proton_ctypes._hsa_runtime_handle is None
