"""Installs anywhere: numpy and msgpack are all that the host-only profiler and proton-viewer need.

Two halves:

* ``pyproject.toml``'s dependencies, their environment markers evaluated for Linux, macOS and
  Windows: triton and cuda-python only on Linux x86_64/aarch64 (where they have wheels).
* :func:`scenario`, the life of a user without triton, cuda-python, torch, hip-python, hatchet
  and pandas (a Mac): ``import proton_ctypes``, a host-only profile read back from disk, the
  viewer on it, ``backend=None`` falling back with one warning, and an ImportError naming the
  package for each feature that needs one.  The tests run it in a subprocess where those packages
  are made unimportable; CI (``.ci/run``) also runs this file as a script in a fresh venv where
  they are not installed at all (``python tests/test_install.py --installed DIR``).

Only the standard library is imported at module level, so the script runs in that venv.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import os
import subprocess
import sys
import warnings

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: top-level modules of the optional packages (triton, cuda-python, torch, hip-python, llnl-hatchet, pandas)
OPTIONAL = ("triton", "cuda", "torch", "hip", "hatchet", "pandas")


class Blocker(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Makes the optional packages unimportable, as if not installed, and records each import of one.

    A lookup (``importlib.util.find_spec``) finds a spec with no submodule locations, so probes
    that only look pass unrecorded; loading it raises ``ModuleNotFoundError``.
    """

    def __init__(self, names=OPTIONAL):
        self.names = set(names)
        self.attempts = []

    def find_spec(self, fullname, path=None, target=None):
        if fullname.split(".")[0] in self.names:
            return importlib.machinery.ModuleSpec(fullname, self)
        return None

    def create_module(self, spec):
        self.attempts.append(spec.name)
        raise ModuleNotFoundError(f"No module named {spec.name!r}", name=spec.name)

    def exec_module(self, module):  # never reached: create_module raises
        raise ModuleNotFoundError(module.__name__)


def _import_error(fn) -> str:
    try:
        fn()
    except ImportError as e:
        return str(e)
    raise AssertionError(f"{fn} raised no ImportError")


def scenario(workdir: str, blocker=None) -> dict:
    """Run everything a user without the optional packages does; raise AssertionError on a failure."""
    os.chdir(workdir)
    loaded = sorted(m for m in sys.modules if m.split(".")[0] in OPTIONAL and sys.modules[m] is not None)
    assert not loaded, f"optional packages already imported: {loaded}"
    report = {}

    import proton_ctypes as proton
    report["package"] = proton.__file__

    # backend="host": scopes, states, metrics and cpu_timed_scope, written and read back
    proton.start("host_run", backend="host")
    with proton.cpu_timed_scope("outer", {"tokens": 3}):
        with proton.state("opt"):
            with proton.cpu_timed_scope("inner", {"flops": 2.5}):
                sum(range(100))
    proton.finalize()
    with open("host_run.hatchet") as f:
        root, device_info = json.load(f)
    assert root["frame"]["name"] == "ROOT" and device_info == {}, (root["frame"], device_info)
    outer = {c["frame"]["name"]: c for c in root["children"]}["outer"]
    assert outer["metrics"]["tokens"] == 3 and outer["metrics"]["cpu_time (ns)"] > 0, outer["metrics"]
    inner = outer["children"][0]
    leaf = inner["children"][0]  # a scope entered under a state is filed at scope/state, as Proton does
    assert [inner["frame"]["name"], leaf["frame"]["name"]] == ["inner", "opt"], outer
    assert leaf["metrics"]["flops"] == 2.5 and leaf["metrics"]["cpu_time (ns)"] > 0, leaf["metrics"]

    proton.start("msgpack_run", backend="host")
    with proton.cpu_timed_scope("only"):
        pass
    proton.finalize(output_format="hatchet_msgpack")
    import msgpack
    with open("msgpack_run.hatchet_msgpack", "rb") as f:
        mroot = msgpack.unpackb(f.read(), raw=False, strict_map_key=False)[0]
    assert [c["frame"]["name"] for c in mroot["children"]] == ["only"], mroot
    if blocker is not None:
        assert not blocker.attempts, f"the host-only path tried to import {blocker.attempts}"

    # backend=None: no GPU driver (no triton) -> the host backend, one UserWarning for the process
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for name in ("auto_1", "auto_2"):
            proton.start(name)
            with proton.scope("a", {"n": 1}):
                pass
            proton.finalize()
    texts = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
    # one line saying what was chosen and why: triton is missing here, no driver is to blame
    assert texts == ['proton_ctypes: triton is not installed: host-only backend (no kernel records); '
                     'backend="host" silences this'], texts
    assert os.path.exists("auto_1.hatchet") and os.path.exists("auto_2.hatchet")

    # features that need a missing package say which one (and leave no session behind).  The CUPTI
    # and ROCm backends load their vendor libraries through ctypes: cuda-python and hip-python only
    # help them (locating libcupti, device info), so they start without either.
    report["errors"] = errors = {
        "hook='triton'": _import_error(lambda: proton.start("no_hook", backend="host", hook="triton")),
        "backend='instrumentation'": _import_error(lambda: proton.start("no_instr", backend="instrumentation")),
        "proton_ctypes.language": _import_error(lambda: __import__("proton_ctypes.language")),
    }
    for feature, message in errors.items():
        assert message.startswith(f"proton_ctypes: {feature} needs triton (pip install triton; "
                                  "on Linux it comes with proton_ctypes)"), message
    proton.finalize()
    assert not any(os.path.exists(f"{n}.hatchet") for n in ("no_hook", "no_instr")), os.listdir(".")

    # proton-viewer: reads and prints the host profile with numpy and msgpack only
    viewer = subprocess.run([sys.executable, "-m", "proton_ctypes.viewer", "-m", "cpu_time/ns,tokens",
                             "host_run.hatchet"], capture_output=True, text=True, timeout=120)
    assert viewer.returncode == 0, viewer.stderr
    rows = viewer.stdout.splitlines()
    assert [r.split()[-1] for r in rows[:4]] == ["ROOT", "outer", "inner", "opt"], viewer.stdout
    assert rows[1].endswith(" 3.000 outer") and float(rows[3].split()[-3]) > 0, viewer.stdout
    report["viewer"] = viewer.stdout
    import proton_ctypes.viewer as pv
    if "read" in getattr(pv, "_FRAME_API", ()):  # the hatchet-based Python API, where this version has it
        assert "proton_ctypes[hatchet]" in _import_error(lambda: pv.read), "viewer.read without llnl-hatchet"
    return report


def _run_scenario(tmp_path, blocked=OPTIONAL):
    """:func:`scenario` in a fresh interpreter with ``blocked`` unimportable; its report."""
    env = dict(os.environ, PYTHONPATH=REPO, PROTON_CTYPES_ROCM_EARLY="0")
    proc = subprocess.run([sys.executable, __file__, "--block", ",".join(blocked), str(tmp_path)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


def test_host_profile_viewer_and_import_errors_without_optional_packages(tmp_path):
    report = _run_scenario(tmp_path)
    assert report["package"].startswith(os.path.join(REPO, "proton_ctypes"))
    assert set(report["errors"]) == {"hook='triton'", "backend='instrumentation'", "proton_ctypes.language"}
    assert "outer" in report["viewer"] and "inner" in report["viewer"]


def test_missing_extra_is_named(monkeypatch):
    from proton_ctypes.core import optional
    monkeypatch.setitem(sys.modules, "hip", None)
    try:
        optional.require("backend='rocprofiler'", "hip", "hip-python", extra="rocm")
    except ImportError as e:
        assert str(e).startswith("proton_ctypes: backend='rocprofiler' needs hip-python "
                                 "(pip install proton_ctypes[rocm])"), str(e)
        assert e.name == "hip"
    else:
        raise AssertionError("no ImportError")
    assert optional.require("x", ("no_such_module_xyz", "json"), "whatever") is json  # alternatives in order


def _requirements():
    import pytest
    tomllib = pytest.importorskip("tomllib")
    requirements = pytest.importorskip("packaging.requirements")
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    return project, [requirements.Requirement(r) for r in project["dependencies"]]


PLATFORMS = {  # (sys_platform, platform_machine) as pip reports them
    "linux-x86_64": ("linux", "x86_64"), "linux-aarch64": ("linux", "aarch64"), "linux-ppc64le": ("linux", "ppc64le"),
    "macos-arm64": ("darwin", "arm64"), "macos-x86_64": ("darwin", "x86_64"), "windows": ("win32", "AMD64"),
}


def test_dependencies_by_platform():
    project, reqs = _requirements()
    installed = {}
    for key, (plat, machine) in PLATFORMS.items():
        env = {"sys_platform": plat, "platform_machine": machine, "python_version": "3.11", "extra": ""}
        installed[key] = sorted(r.name for r in reqs if r.marker is None or r.marker.evaluate(env))
    gpu = ["cuda-python", "msgpack", "numpy", "triton"]
    assert installed == {"linux-x86_64": gpu, "linux-aarch64": gpu, "linux-ppc64le": ["msgpack", "numpy"],
                         "macos-arm64": ["msgpack", "numpy"], "macos-x86_64": ["msgpack", "numpy"],
                         "windows": ["msgpack", "numpy"]}
    triton = next(r for r in reqs if r.name == "triton")
    assert triton.specifier.contains("3.6.0") and not triton.specifier.contains("3.5.0")
    extras = project["optional-dependencies"]
    assert extras["rocm"] == ["hip-python"] and extras["test"] == ["pytest", "pytest-mock", "hypothesis"]
    assert extras["hatchet"] == ["llnl-hatchet", "pandas"]


if __name__ == "__main__":
    # python tests/test_install.py [--block triton,cuda,...] [--installed] WORKDIR
    args = sys.argv[1:]
    blocker = None
    if "--block" in args:
        i = args.index("--block")
        blocker = Blocker(args[i + 1].split(","))
        sys.meta_path.insert(0, blocker)
        del args[i:i + 2]
    if "--installed" in args:  # CI's bare venv: the optional packages must really be absent
        args.remove("--installed")
        import importlib.util
        present = [m for m in OPTIONAL if importlib.util.find_spec(m) is not None]
        assert not present, f"not a bare environment: {present} importable"
    result = scenario(os.path.abspath(args[0]), blocker)
    if "--installed" in sys.argv:
        assert "site-packages" in result["package"], f"imported {result['package']}, not the installed package"
    print(json.dumps(result))
