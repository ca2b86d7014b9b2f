"""bench/proton_overlay.py: real Proton of another triton release for the GPU benches (the H200
has triton 3.6; graph metrics need Proton 3.9). Here: an overlay takes only Proton's files out of
a wheel, and loads them over the installed triton instead of its own Proton."""
import os
import pathlib
import subprocess
import sys
import zipfile

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[1] / "bench"
sys.path.insert(0, str(BENCH))
import proton_overlay  # noqa: E402


def _wheel(path, names):
    with zipfile.ZipFile(path, "w") as z:
        for n in names:
            z.writestr(n, b"x")
    return str(path)


def test_build_takes_protons_library_package_and_instrumentation_module_only(tmp_path):
    wheel = _wheel(tmp_path / "triton.whl", ["triton/_C/libproton.so", "triton/_C/libtriton.so",
                                             "triton/profiler/__init__.py", "triton/profiler/hooks/hook.py",
                                             "triton/_instrumentation.py", "triton/language/core.py"])
    got = proton_overlay.build(wheel, str(tmp_path / "o"))
    rel = sorted(os.path.relpath(p, tmp_path / "o") for p in got)
    assert rel == ["triton/_C/libproton.so", "triton/_instrumentation.py", "triton/profiler/__init__.py",
                   "triton/profiler/hooks/hook.py"]
    assert not (tmp_path / "o" / "triton" / "_C" / "libtriton.so").exists()


def test_build_refuses_a_wheel_without_proton(tmp_path):
    wheel = _wheel(tmp_path / "other.whl", ["triton/language/core.py"])
    with pytest.raises(ValueError, match="no triton/_C/libproton.so"):
        proton_overlay.build(wheel, str(tmp_path / "o"))


def test_with_the_overlay_named_the_benches_proton_is_the_overlays(installed_proton_overlay):
    root = installed_proton_overlay
    overlay = root / "triton"
    program = ("import sys; sys.path.insert(0, sys.argv[1]); import proton_overlay as o; p = o.real_proton(); "
               "import triton._C.libproton as lp; print(p.__file__); print(lp.__file__); print(o.command_prefix())")
    env = dict(os.environ, **{proton_overlay.OVERLAY_ENV: str(root)})
    r = subprocess.run([sys.executable, "-c", program, str(BENCH)], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    profiler_file, lib_file, prefix = r.stdout.split("\n")[:3]
    assert profiler_file.startswith(str(overlay / "profiler"))
    assert lib_file == str(overlay / "_C" / "libproton.so")
    assert prefix == f"{proton_overlay.OVERLAY_ENV}={root} "


def test_the_overlay_refuses_to_load_over_a_proton_already_imported():
    pytest.importorskip("triton")
    program = ("import sys; sys.path.insert(0, sys.argv[1]); import triton.profiler; import proton_overlay as o; "
               "o.install('/nonexistent')")
    r = subprocess.run([sys.executable, "-c", program, str(BENCH)], capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "triton's own Proton is imported already" in r.stderr
