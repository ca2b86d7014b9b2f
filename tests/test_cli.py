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


# --- every mistake is one line, before the script runs, and leaves no file -------------------

MARK = "\nprint('the script ran')\n"
HAS_GPU = os.path.exists("/dev/nvidiactl") or os.path.exists("/dev/kfd")


def lines(text):
    return text.splitlines()


def test_no_script_is_a_usage_error_with_exit_2_and_no_file(tmp_path):
    # Proton: an IndexError traceback, exit 1, and an empty proton.hatchet
    r = run_cli(tmp_path, ["-b", "host", "-n", "x"])
    assert r.returncode == 2
    assert lines(r.stderr)[-1] == ("proton: error: the script to profile is missing (proton [options] script.py "
                                   "[args], or proton [options] pytest [args])")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("target, why", [("nope.py", "No such file or directory"),
                                         ("folder", "a folder without __main__.py")])
def test_a_script_that_cannot_be_opened_is_one_line_with_exit_2_and_no_file(tmp_path, target, why):
    # Proton: a runpy traceback, exit 1, and an empty x.hatchet
    (tmp_path / "folder").mkdir()
    r = run_cli(tmp_path, ["-b", "host", "-n", "x", target])
    assert (r.returncode, r.stdout, r.stderr) == (2, "", f"proton: error: cannot open {target}: {why}\n")
    assert sorted(os.listdir(tmp_path)) == ["folder"]


def test_an_unknown_mode_is_one_line_naming_the_modes_before_the_script_runs(tmp_path):
    r = run_cli(tmp_path, ["-b", "host", "-m", "bogusmode", "-n", "x", "script.py"], script=SCRIPT + MARK)
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == ("proton: error: -m bogusmode: [PROTON] HostProfiler: unsupported mode: bogusmode "
                        "(modes of the host backend: periodic_flushing; or leave -m out)\n")
    assert os.listdir(tmp_path) == ["script.py"]


@pytest.mark.skipif(HAS_GPU, reason="a GPU is present: -b cupti may start")
def test_a_gpu_backend_without_its_gpu_is_one_line_before_the_script_runs(tmp_path):
    # Proton: a traceback ending in CUPTI_ERROR_UNKNOWN, nothing saying there is no GPU
    r = run_cli(tmp_path, ["-b", "cupti", "-n", "x", "script.py"], script=SCRIPT + MARK)
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == ("proton: error: -b cupti needs an NVIDIA GPU, and none is usable here (no GPU driver); "
                        "leave -b out, or use -b host to profile without a GPU\n")
    assert os.listdir(tmp_path) == ["script.py"]


def test_a_missing_output_folder_is_created_and_the_profile_written(tmp_path):
    # Proton: the script runs to completion, then the profile is lost without a word (exit 0)
    r = run_cli(tmp_path, ["-b", "host", "-n", "sub/dir/run", "script.py"], script=SCRIPT)
    assert (r.returncode, r.stderr) == (0, "")
    assert [c["frame"]["name"] for c in tree(tmp_path / "sub" / "dir", "run")[0]["children"]] == ["in_script"]


def test_a_profile_that_cannot_be_written_is_one_line_with_exit_1(tmp_path):
    # Proton: the profile is lost without a word, exit 0
    (tmp_path / "out.hatchet").mkdir()  # a folder where the file should go: no write can succeed
    r = run_cli(tmp_path, ["-b", "host", "-n", "out", "script.py"], script=SCRIPT + MARK)
    assert r.returncode == 1 and "the script ran" in r.stdout
    assert lines(r.stderr) == ["proton: error: [Errno 21] Is a directory: 'out.hatchet': the profile 'out' was not written and "
                               "session 0 is still alive; fix the cause and call finalize again"]
    assert sorted(os.listdir(tmp_path)) == ["out.hatchet", "script.py"]  # no temporary file left


@pytest.mark.skipif(HAS_GPU, reason="a GPU is present: its backend is chosen")
def test_without_a_gpu_one_line_says_the_host_backend_was_chosen_and_why(tmp_path):
    # Proton: RuntimeError "0 active drivers"; before: a two-line warning echoing a source line
    r = run_cli(tmp_path, ["-n", "out", "script.py"], script=SCRIPT)
    assert (r.returncode, r.stderr) == (0, "proton: no GPU driver: host-only backend; -b host silences this\n")
    assert tree(tmp_path)[0]["children"]
    quiet = run_cli(tmp_path, ["-b", "host", "-n", "out", "script.py"], script=SCRIPT)
    assert (quiet.returncode, quiet.stderr) == (0, "")


def test_without_triton_the_backend_line_does_not_blame_the_driver(tmp_path):
    (tmp_path / "script.py").write_text(textwrap.dedent(SCRIPT))
    code = ("import sys; sys.modules['triton'] = None; sys.argv[0] = 'proton'; "
            "from proton_ctypes.proton import main; main()")
    r = subprocess.run([sys.executable, "-c", code, "-n", "out", "script.py"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=120, env=dict(os.environ, PYTHONPATH=REPO, PYTHONWARNINGS="ignore"))
    assert (r.returncode, r.stderr) == (0, "proton: triton is not installed: host-only backend; -b host silences this\n")
    assert tree(tmp_path)[0]["children"]


def test_version_option_prints_the_package_version(tmp_path):
    import proton_ctypes
    r = run_cli(tmp_path, ["--version"])
    assert (r.returncode, r.stdout) == (0, f"proton (proton_ctypes) {proton_ctypes.__version__}\n")
    v = subprocess.run([sys.executable, "-m", "proton_ctypes.viewer", "--version"], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=REPO))
    assert (v.returncode, v.stdout) == (0, f"proton-viewer (proton_ctypes) {proton_ctypes.__version__}\n")


def test_the_package_has_a_version_and_an_mit_license_that_the_metadata_names():
    import re
    import proton_ctypes
    assert re.fullmatch(r"\d+\.\d+\.\d+", proton_ctypes.__version__)
    project = open(os.path.join(REPO, "pyproject.toml")).read()
    assert 'license = "MIT"' in project and 'license-files = ["LICENSE"]' in project
    assert 'version = {attr = "proton_ctypes._version.__version__"}' in project
    assert open(os.path.join(REPO, "LICENSE")).readline().strip() == "MIT License"


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
