"""bench/pyspy_summary.py: a launching thread's py-spy samples sorted into groups."""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "bench"))
from pyspy_summary import group_of, report, summarize  # noqa: E402

RAW = """\
thread (7): MainThread;<module> (run.py:9);loop (run.py:5);JITFunction.run (triton/runtime/jit.py:712);launch (__triton_launcher.so);cuLaunchKernelEx (libcuda.so.580) 6
thread (7): MainThread;<module> (run.py:9);loop (run.py:5);JITFunction.run (triton/runtime/jit.py:712);launch (__triton_launcher.so);cuLaunchKernelEx (libcuda.so.580);0x1 (libcupti.so.13) 3
thread (7): MainThread;<module> (run.py:9);loop (run.py:5);scope.__exit__ (proton_ctypes/core/scopes.py:195) 4
thread (7): MainThread;<module> (run.py:9);loop (run.py:5);JITFunction.run (triton/runtime/jit.py:700) 2
thread (7): MainThread;<module> (run.py:9);setup (run.py:2);import_module (importlib/__init__.py:90) 50
thread (9): proton_ctypes-cupti;drain (proton_ctypes/backends/nvidia/collector.py:200) 5
"""


def test_a_stack_goes_to_the_first_group_it_matches():
    assert group_of("a;cuLaunchKernelEx (libcuda.so);0x1 (libcupti.so)") == "libcupti"
    assert group_of("a;JITFunction.run (triton/runtime/jit.py:1)") == "Triton (Python)"
    assert group_of("a;enter (triton/profiler/scope.py:3)") == "Proton (Python)"
    # Proton 3.9 through bench/proton_overlay.py: py-spy cuts its path at the overlay's folder
    assert group_of("a;scope._enter_scope (profiler/scope.py:48)") == "Proton (Python)"
    assert group_of("a;b (libc.so.6)") == "other"


def test_only_the_threads_stacks_through_the_loop_count_and_other_threads_are_listed(tmp_path):
    raw = tmp_path / "pyspy.txt"
    raw.write_text(RAW)
    s = summarize(str(raw), within="loop (run.py:5)")
    assert s["samples"] == 15
    assert s["groups"] == {"libcuda": 6, "libcupti": 3, "proton_ctypes (Python)": 4, "Triton (Python)": 2}
    assert s["profiler_frames"] == {"scope.__exit__ (proton_ctypes/core/scopes.py:195)": 4}
    assert s["other_threads"] == {"thread (9): proton_ctypes-cupti": 5}
    assert "26.67%" in report(str(raw), s)          # 4 of 15 samples in our scope code
