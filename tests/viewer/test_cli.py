"""The proton-viewer command line: entry points, Proton's error messages, usage."""

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

import proton_ctypes.viewer as viewer
from .helpers import run_viewer

REPO = Path(__file__).resolve().parents[2]


def test_package_exports_main():
    assert callable(viewer.main)


def test_python_m_runs_the_viewer(ref_dir):
    proc = subprocess.run([sys.executable, "-m", "proton_ctypes.viewer", "-m", "time/ns", "-d", "1",
                           "nested.hatchet"], cwd=ref_dir, capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(REPO)))
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "8319.000 ROOT\n\n", "")


def test_viewer_imports_only_stdlib_numpy_and_msgpack():
    # The Python API modules (GraphFrames, the [hatchet] extra) may import hatchet and pandas too.
    api_modules = {"frames.py", "frame_metrics.py", "frame_deps.py"}
    for source in (REPO / "proton_ctypes" / "viewer").glob("*.py"):
        allowed = set(sys.stdlib_module_names) | {"numpy", "msgpack"}
        if source.name in api_modules:
            allowed |= {"hatchet", "pandas"}
        for stmt in ast.walk(ast.parse(source.read_text())):
            if isinstance(stmt, ast.Import):
                names = [alias.name for alias in stmt.names]
            elif isinstance(stmt, ast.ImportFrom) and stmt.level == 0:
                names = [stmt.module]
            else:
                continue
            assert all(n.split(".")[0] in allowed for n in names), (source.name, names)


def test_importing_the_viewer_loads_no_triton_pandas_or_hatchet():
    code = ("import sys; import proton_ctypes; before = set(sys.modules); import proton_ctypes.viewer.cli; "
            "new = set(sys.modules) - before; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('triton', 'pandas', 'hatchet')) + "
            "sorted(m for m in new if m.startswith('proton_ctypes.') and not m.startswith('proton_ctypes.viewer')))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert proc.stdout.strip() == "[]", proc.stderr


def test_without_metrics_nothing_is_printed(ref_dir):
    assert run_viewer(["nested.hatchet"], cwd=ref_dir) == run_viewer(["-m", "", "nested.hatchet"], cwd=ref_dir)
    result = run_viewer(["nested.hatchet"], cwd=ref_dir)
    assert (result.code, result.out, result.err) == (0, "", "")


def test_list_takes_precedence_over_metrics(ref_dir):
    assert run_viewer(["-l", "-m", "time", "hook.hatchet"], cwd=ref_dir).out.startswith(
        "Available inclusive metrics:\n")


@pytest.mark.parametrize("argv, line", [
    (["-m", "foo", "nested.hatchet"],
     "RuntimeError: Metric foo is not found. Use the --list flag to list available metrics"),
    (["-m", "FOO", "nested.hatchet"],
     "RuntimeError: Metric foo is not found. Use the --list flag to list available metrics"),
    (["-m", "time", "-i", "a", "-e", "b", "nested.hatchet"], "ValueError: Cannot specify both include and exclude"),
    (["-m", "time/xx", "nested.hatchet"], "ValueError: Unsupported unit xx"),
    (["-m", "time"], "AssertionError: Must specify a file to read"),
    (["-m", "time", "-e", "ROOT", "nested.hatchet"],
     "EmptyFilter: The provided filter would have produced an empty GraphFrame."),
    (["-m", "avg_time/us", "cpu_timed.hatchet", "-i", "nothing_matches"],
     "EmptyFilter: The provided filter would have produced an empty GraphFrame."),
])
def test_errors_are_one_line_with_protons_exception_type_and_message(argv, line, ref_dir):
    result = run_viewer(argv, cwd=ref_dir)
    assert (result.code, result.out, result.err) == (1, "", line + "\n")


def test_a_failing_format_after_the_tree_keeps_the_printed_tree(tmp_path):
    # kernel-only profile: "count (inc)" is an integer column and {:.4} rejects integers, as in Proton
    (tmp_path / "k.hatchet").write_text('[{"frame": {"name": "ROOT", "type": "function"}, "metrics": '
                                        '{"count": 0}, "children": [{"frame": {"name": "k", "type": '
                                        '"function"}, "metrics": {"count": 2}, "children": []}]}, {}]')
    result = run_viewer(["-m", "count", "--print-sorted", "k.hatchet"], cwd=tmp_path)
    assert result.out == "2.000 ROOT\n└─ 2.000 k\n\nSorted kernels by metric count (inc)\n"
    assert result.err == "ValueError: Precision not allowed in integer format specifier\n"
    assert result.code == 1


@pytest.mark.parametrize("argv, message", [
    (["-f", "bogus"], "argument -f/--format: invalid choice: 'bogus'"),
    (["-d", "deep"], "argument -d/--depth: invalid int value: 'deep'"),
    (["-t", "high"], "argument -t/--threshold: invalid float value: 'high'"),
    (["-m"], "argument -m/--metrics: expected one argument"),
    # Proton: "AssertionError: Must specify a file to read", naming neither the option nor the pattern
    (["-z"], "unrecognized arguments: -z"),
    (["--unknown-option", "--bogus"], "unrecognized arguments: --unknown-option --bogus"),
    (["-i", "[unclosed"], "argument -i/--include: not a regular expression: '[unclosed' "
                          "(unterminated character set at position 0)"),
    (["-e", "a(b"], "argument -e/--exclude: not a regular expression: 'a(b' "
                    "(missing ), unterminated subpattern at position 1)"),
])
def test_usage_errors_are_one_line_with_exit_2(argv, message, ref_dir):
    result = run_viewer(["-m", "time"] + argv + ["nested.hatchet"] if argv != ["-m"] else argv, cwd=ref_dir)
    assert (result.code, result.out) == (2, "")
    assert result.err.startswith(f"proton-viewer: error: {message}") and result.err.count("\n") == 1


def test_help_documents_the_gate_grammar():
    result = run_viewer(["--help"])
    assert result.code == 0
    for text in ("--fail-if", "RULE  := [node: | total:] METRIC OP LIMIT", "--html", "json", "-diff"):
        assert text in result.out


def test_the_readme_example_for_a_machine_without_a_gpu_shows_numbers(tmp_path):
    # the README's viewer example used to be -m time/us, which shows nothing without kernels
    readme = (REPO / "README.md").read_text()
    section = readme.split("### On a machine without a GPU", 1)[1]
    script = section.split("```python\n", 1)[1].split("```", 1)[0]
    shown = section.split("```\n$ ", 1)[1].split("```", 1)[0].splitlines()
    (tmp_path / "train.py").write_text(script)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    subprocess.run([sys.executable, "train.py"], cwd=tmp_path, env=env, check=True, capture_output=True)
    argv = shown[0].split()[1:]
    proc = subprocess.run([sys.executable, "-m", "proton_ctypes.viewer"] + argv, cwd=tmp_path, env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stderr == ""
    rows, expected = proc.stdout.splitlines()[:3], shown[1:4]
    assert [r.split()[-1] for r in rows] == [e.split()[-1] for e in expected] == ["ROOT", "step", "forward"]
    assert [r.split()[-2] for r in rows] == [e.split()[-2] for e in expected]  # tokens: nan, 384.000, nan
    assert all(float(r.split()[-3]) > 0 for r in rows[1:])  # the host time of each cpu_timed_scope, in ms
