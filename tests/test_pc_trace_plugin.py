"""tests/gpu/pc_trace_plugin.py, the PC-sampling trace used to diagnose Proton's test_pcsampling on
the H200: run here over the fake libcupti, it writes each test's id and each sampling range with
the launched kernel and the samples per function it collected."""
import json
import os
import pathlib
import subprocess
import sys

TESTS = pathlib.Path(__file__).resolve().parent
TARGET = "test_cupti_pcsampling.py::test_samples_of_a_kernel_still_queued_at_its_stop_go_to_its_own_launch_not_the_next"


def test_each_range_is_written_with_its_kernel_and_the_samples_of_each_function(tmp_path):
    trace = tmp_path / "trace.jsonl"
    env = dict(os.environ, PROTON_CTYPES_PC_TRACE=str(trace), PYTEST_PLUGINS="pc_trace_plugin",
               PYTHONPATH=os.pathsep.join([str(TESTS / "gpu"), str(TESTS.parent)]))
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(TESTS / TARGET)],
                       env=env, capture_output=True, text=True, timeout=120, cwd=str(TESTS.parent))
    assert p.returncode == 0, p.stdout[-2000:]
    lines = [json.loads(x) for x in trace.read_text().splitlines()]
    assert lines[0]["test"].endswith(TARGET.split("::")[1])
    ranges = [x["range"] for x in lines[1:]]
    # the fake's fill samples arrive with foo's range (a kernel sampled outside its own range)
    assert [(r["kernel"], r["samples"]) for r in ranges[:2]] == [("fill", {}), ("foo", {"fill": 4, "foo": 5})]
    assert all(r["start_ns"] <= r["started_ns"] <= r["stop_ns"] and r["errors"] == 0 for r in ranges)
