"""Finding and loading libcupti: the documented order, and clear errors when nothing is found."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from fakes.fake_cupti import FakeCupti  # noqa: E402

from proton_ctypes.backends.nvidia import lib as cupti_lib, locate  # noqa: E402


@pytest.fixture
def nowhere(monkeypatch):
    """Every source empty; tests switch one on at a time."""
    monkeypatch.delenv("TRITON_CUPTI_LIB_PATH", raising=False)
    monkeypatch.setattr(locate, "mapped_cupti", lambda *a: None)
    monkeypatch.setattr(locate, "_from_pathfinder", lambda: None)
    monkeypatch.setattr(locate, "triton_wheel_cupti", lambda: None)
    return monkeypatch


def test_env_directory_wins_over_everything(nowhere, tmp_path):
    (tmp_path / "libcupti.so.13").write_bytes(b"")
    nowhere.setenv("TRITON_CUPTI_LIB_PATH", str(tmp_path))
    nowhere.setattr(locate, "mapped_cupti", lambda *a: "/mapped/libcupti.so")
    assert locate.find_cupti() == ("TRITON_CUPTI_LIB_PATH", str(tmp_path / "libcupti.so.13"))


def test_env_file_is_accepted(nowhere, tmp_path):
    lib = tmp_path / "libcupti.so.2025.1.1"
    lib.write_bytes(b"")
    nowhere.setenv("TRITON_CUPTI_LIB_PATH", str(lib))
    assert locate.find_cupti() == ("TRITON_CUPTI_LIB_PATH", str(lib))


def test_env_directory_without_library_is_an_error(nowhere, tmp_path):
    nowhere.setenv("TRITON_CUPTI_LIB_PATH", str(tmp_path))
    with pytest.raises(RuntimeError, match="holds no libcupti"):
        locate.find_cupti()


def test_mapped_library_comes_before_pathfinder_and_wheel(nowhere):
    nowhere.setattr(locate, "mapped_cupti", lambda *a: "/torch/libcupti.so.13")
    nowhere.setattr(locate, "_from_pathfinder", lambda: "/pathfinder/libcupti.so")
    nowhere.setattr(locate, "triton_wheel_cupti", lambda: "/triton/libcupti.so")
    assert locate.find_cupti() == ("mapped", "/torch/libcupti.so.13")


def test_pathfinder_comes_before_the_triton_wheel(nowhere):
    nowhere.setattr(locate, "_from_pathfinder", lambda: "/pathfinder/libcupti.so")
    nowhere.setattr(locate, "triton_wheel_cupti", lambda: "/triton/libcupti.so")
    assert locate.find_cupti() == ("cuda.pathfinder", "/pathfinder/libcupti.so")


def test_triton_wheel_is_the_last_resort(nowhere):
    nowhere.setattr(locate, "triton_wheel_cupti", lambda: "/triton/libcupti.so")
    assert locate.find_cupti() == ("triton wheel", "/triton/libcupti.so")


def test_nothing_found_names_what_is_missing(nowhere):
    with pytest.raises(RuntimeError) as info:
        locate.find_cupti()
    message = str(info.value)
    assert "libcupti not found" in message and "TRITON_CUPTI_LIB_PATH" in message
    assert "nvidia-cuda-cupti" in message


def test_mapped_cupti_reads_proc_maps_format(tmp_path):
    lib = tmp_path / "libcupti.so.13"
    lib.write_bytes(b"")
    maps = tmp_path / "maps"
    maps.write_text("7f00-7f01 r--p 00000000 00:10 1234   /usr/lib/libc.so.6\n"
                    f"7f02-7f03 r-xp 00001000 00:10 5678   {lib}\n")
    assert locate.mapped_cupti(str(maps)) == str(lib)
    assert locate.mapped_cupti(str(tmp_path / "no-such-file")) is None


def test_injected_fake_is_wrapped_and_versioned():
    lib = cupti_lib.load_cupti(lib=FakeCupti(version=12080))
    assert lib.source == "injected" and lib.version == 12080


def test_real_library_gets_one_declaration_per_function():
    path = locate.triton_wheel_cupti()
    if path is None:
        pytest.skip("no libcupti in the triton wheel on this machine")
    lib = cupti_lib.load_cupti(path=path)
    assert lib.version > 0
    for name, argtypes in cupti_lib.PROTOTYPES.items():
        fn = getattr(lib.lib, name)
        assert fn.argtypes == argtypes and fn.restype is not None


def test_unloadable_path_raises_runtime_error(tmp_path):
    bogus = tmp_path / "libcupti.so"
    bogus.write_bytes(b"not an ELF file")
    with pytest.raises(RuntimeError, match="could not load libcupti"):
        cupti_lib.load_cupti(path=str(bogus))
