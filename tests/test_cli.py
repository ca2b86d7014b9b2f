"""The ``proton`` command, and the same runs under the real 3.9 command."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from conformance.test_conformance import REASON as ORACLE_REASON

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TESTS = os.path.join(REPO, "tests")

REAL_MAIN = ("import sys; sys.path.insert(0, %r); from oracle.real_proton import load; load(); "
             "from triton.profiler.proton import main; sys.argv[0] = 'proton'; main()" % TESTS)


def run_cli(tmp_path, args, impl="ours", script=None):
    if script is not None:
        (tmp_path / "script.py").write_text(textwrap.dedent(script))
    env = dict(os.environ, PYTHONPATH=REPO, PYTHONWARNINGS="ignore")
    if impl == "ours":
        cmd = [sys.executable, "-m", "proton_ctypes"] + args
    else:
        cmd = [sys.executable, "-c", REAL_MAIN] + args
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def tree(tmp_path, name="out"):
    return json.load(open(tmp_path / f"{name}.hatchet"))


SCRIPT = """
import sys
import proton_ctypes as proton
print("argv", sys.argv[1:], __name__, proton.start("ignored"))
with proton.scope("in_script", {"n": 1}):
    pass
"""


def test_script_runs_as_main_with_its_arguments_and_start_returns_none(tmp_path):
    r = run_cli(tmp_path, ["-n", "out", "script.py", "a", "--flag"], script=SCRIPT)
    assert r.returncode == 0, r.stderr
    assert "argv ['a', '--flag'] __main__ None" in r.stdout
    root = tree(tmp_path)[0]
    assert [c["frame"]["name"] for c in root["children"]] == ["in_script"]
    assert not (tmp_path / "ignored.hatchet").exists()


def test_default_name_is_proton_in_the_working_directory(tmp_path):
    r = run_cli(tmp_path, ["script.py"], script=SCRIPT)
    assert r.returncode == 0
    assert (tmp_path / "proton.hatchet").exists()


def test_sys_exit_code_is_propagated_and_profile_written(tmp_path):
    r = run_cli(tmp_path, ["-n", "out", "script.py"], script=SCRIPT + "sys.exit(3)\n")
    assert r.returncode == 3
    assert tree(tmp_path)[0]["children"]


def test_exception_prints_message_exits_1_and_writes_profile(tmp_path):
    r = run_cli(tmp_path, ["-n", "out", "script.py"], script=SCRIPT + "raise RuntimeError('boom')\n")
    assert r.returncode == 1
    assert "An error occurred while executing the script:" in r.stdout
    assert "boom" in r.stderr + r.stdout
    assert tree(tmp_path)[0]["children"]


def test_keyboard_interrupt_exits_1_and_writes_profile(tmp_path):
    r = run_cli(tmp_path, ["-n", "out", "script.py"], script=SCRIPT + "raise KeyboardInterrupt\n")
    assert r.returncode == 1
    assert tree(tmp_path)[0]["children"]


def test_only_session_zero_may_be_used_inside_the_script(tmp_path):
    script = """
    import proton_ctypes as proton
    for f, a in ((proton.activate, 1), (proton.deactivate, 2), (proton.finalize, 5)):
        try:
            f(a)
        except ValueError as e:
            print(e)
    proton.deactivate()
    proton.activate(0)
    proton.finalize(0)
    """
    r = run_cli(tmp_path, ["-n", "out", "script.py"], script=script)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "Only one session can be activated when running from the command line.",
        "Only one session can be deactivated when running from the command line.",
        "Only one session can be finalized when running from the command line."]
    assert (tmp_path / "out.hatchet").exists()


def test_pytest_target_runs_in_process_and_returns_its_code(tmp_path):
    (tmp_path / "test_x.py").write_text(
        "import proton_ctypes as proton\n"
        "def test_a():\n    with proton.scope('in_test'):\n        pass\n"
        "def test_b():\n    assert False\n")
    r = run_cli(tmp_path, ["-n", "out", "pytest", "-q", "-p", "no:cacheprovider", "test_x.py"])
    assert r.returncode == 1
    names = [c["frame"]["name"] for c in tree(tmp_path)[0]["children"]]
    assert names == ["in_test"]


def test_bad_choice_is_a_usage_error(tmp_path):
    r = run_cli(tmp_path, ["-d", "nope", "script.py"], script=SCRIPT)
    assert r.returncode == 2
    assert "invalid choice" in r.stderr


def test_no_target_raises_index_error(tmp_path):
    r = run_cli(tmp_path, [])
    assert r.returncode == 1
    assert "IndexError" in r.stderr


@pytest.mark.skipif(ORACLE_REASON is not None, reason=ORACLE_REASON or "")
@pytest.mark.parametrize("tail,expect_code", [("", 0), ("sys.exit(3)\n", 3), ("raise RuntimeError('x')\n", 1)])
def test_same_files_and_exit_codes_as_the_real_proton_command(tmp_path, tail, expect_code):
    script = SCRIPT.replace("import proton_ctypes as proton", "import triton.profiler as proton") + tail
    real_dir, ours_dir = tmp_path / "real", tmp_path / "ours"
    real_dir.mkdir()
    ours_dir.mkdir()
    r_real = run_cli(real_dir, ["-n", "out", "script.py", "a"], impl="real", script=script)
    r_ours = run_cli(ours_dir, ["-n", "out", "script.py", "a"], impl="ours",
                     script=script.replace("import triton.profiler as proton", "import proton_ctypes as proton"))
    assert r_real.returncode == r_ours.returncode == expect_code
    assert r_real.stdout.splitlines()[:1] == r_ours.stdout.splitlines()[:1]
    assert tree(real_dir) == tree(ours_dir)
