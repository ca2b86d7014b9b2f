#!/usr/bin/env python3
"""Run Proton's own test suite (third_party/proton/test of the pinned triton commit) against
proton_ctypes (``--impl ours``) or against the real ``triton.profiler`` (``--impl real``).

The upstream files are never copied into the project: they are read from a local cache
(default ``.upstream/third_party/proton/test``, git-ignored).  Without a GPU, ``--impl real``
runs Proton host-only through the oracle recipe (tests/oracle/real_proton.py)
and the tests get ``--device cpu``; with a GPU, the real profiler runs as it is.

    python tests/upstream/run.py --impl ours
    python tests/upstream/run.py --impl real --files test_api.py --junit /tmp/real.xml
    python tests/upstream/run.py --compare /tmp/real.xml /tmp/ours.xml
    python tests/upstream/run.py --setup-deps      # pandas + llnl-hatchet for the viewer's frame API

Extra pytest arguments go after ``--`` (e.g. ``-- -k scope -x``).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SHIM = os.path.join(HERE, "shim")
DEFAULT_UPSTREAM = os.path.join(REPO, ".upstream", "third_party", "proton", "test")
DEFAULT_DEPS = os.path.join(REPO, ".upstream", "pydeps")
DEFAULT_FILES = ["test_api.py", "test_profile.py", "test_cmd.py", "test_viewer.py"]
#: what the real viewer needs and the project does not (installed apart, see --setup-deps)
VIEWER_DEPS = ["pandas<3", "llnl-hatchet"]

COMMAND_TEMPLATE = """#!{python}
# proton upstream harness: the `{name}` command of whichever profiler triton.profiler is
import sys
from triton.profiler.{module} import main
sys.exit(main())
"""


def gpu_available() -> bool:
    try:
        import torch
        return bool(torch.cuda.is_available())
    except Exception:
        return False


def setup_deps(target: str, wheels: str = None) -> None:
    """pip-install the real viewer's pandas + llnl-hatchet into ``target`` (offline from the
    folder ``wheels`` when given), then delete every distribution there that this environment
    already has (numpy above all), so that putting ``target`` on PYTHONPATH adds packages
    without replacing any."""
    from importlib import metadata
    if wheels:  # every wheel there, as they are (numpy left out: the machine has its own)
        reqs = ["--no-deps", "--no-index", *sorted(os.path.join(wheels, w) for w in os.listdir(wheels)
                                                  if w.endswith(".whl"))]
    else:
        reqs = VIEWER_DEPS
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target", target, *reqs], check=True)
    for entry in sorted(os.listdir(target)):
        if not entry.endswith(".dist-info"):
            continue
        info = os.path.join(target, entry)
        with open(os.path.join(info, "METADATA"), encoding="utf-8") as f:
            name = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("Name:")), None)
        try:
            metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        with open(os.path.join(info, "RECORD"), encoding="utf-8") as f:
            files = [ln.split(",", 1)[0] for ln in f if ln.strip()]
        for rel in files:
            path = os.path.normpath(os.path.join(target, rel))
            if path.startswith(os.path.abspath(target) + os.sep) and os.path.isfile(path):
                os.unlink(path)
        shutil.rmtree(info, ignore_errors=True)
        print(f"setup-deps: dropped {name} (already installed here)")
    for root, dirs, files in os.walk(target, topdown=False):  # folders left empty
        if root != target and not os.listdir(root):
            os.rmdir(root)


def download_wheels(dest: str, python_version: str) -> None:
    """Wheels of the viewer deps for another machine's Python (offline ``--setup-deps --wheels``),
    without numpy (every machine that runs triton has it)."""
    plats = ["manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64"]
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "-d", dest, "--only-binary", ":all:",
                    "--python-version", python_version, *[a for p in plats for a in ("--platform", p)],
                    *VIEWER_DEPS], check=True)
    for w in os.listdir(dest):
        if w.startswith("numpy-"):
            os.unlink(os.path.join(dest, w))


def make_bin(dirname: str) -> None:
    """``proton`` and ``proton-viewer`` commands resolving through ``triton.profiler``
    (so the alias decides which profiler they are)."""
    for name, module in (("proton", "proton"), ("proton-viewer", "viewer")):
        path = os.path.join(dirname, name)
        with open(path, "w") as f:
            f.write(COMMAND_TEMPLATE.format(python=sys.executable, name=name, module=module))
        os.chmod(path, 0o755)


def parse_junit(path: str) -> dict:
    """Counts and per-test outcome (``passed/failed/error/skipped``, one-line reason) of a junit XML."""
    root = ET.parse(path).getroot()
    tests = {}
    for case in root.iter("testcase"):
        cls = case.get("classname", "")
        module = cls.split(".")[-1] if cls else ""
        tid = f"{module}.py::{case.get('name')}" if module else case.get("name")
        outcome, reason = "passed", ""
        for tag in ("failure", "error", "skipped"):
            el = case.find(tag)
            if el is not None:
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[tag]
                reason = one_line(el.get("message") or el.text or "")
                if outcome in ("failed", "error"):
                    reason = best_reason(el.get("message") or "", el.text or "")
                break
        props = {pr.get("name"): pr.get("value") for pr in case.iter("property")}
        if tid in tests and outcome == "passed":
            continue  # teardown error entries repeat the test: keep the worse outcome
        tests[tid] = {"outcome": outcome, "reason": reason, "left_on": bool(props.get("proton_left_on"))}
    counts = {k: 0 for k in ("passed", "failed", "skipped", "error")}
    for t in tests.values():
        counts[t["outcome"]] += 1
    return {"counts": counts, "tests": tests}


#: first-error fragments of a test file that cannot even be imported here (a module or name the
#: installed triton lacks): the file is not runnable on this machine, not a failure
IMPORT_ERRORS = ("ImportError", "ModuleNotFoundError")


#: a test file importing this tests Proton's C++ binding itself, which proton_ctypes replaces
LIBPROTON_MODULE = "triton._C.libproton"


def import_reason(source: str, error: str, triton_version: str) -> str:
    """Why a test file whose imports fail (``error``) cannot run here, from its ``source``: it
    tests libproton, or it needs a newer Triton than ``triton_version``; else the error alone."""
    if LIBPROTON_MODULE in source:
        return f"tests libproton, Proton's C++ binding ({LIBPROTON_MODULE}), which proton_ctypes replaces: {error}"
    if "from 'triton." in error or "No module named 'triton." in error:
        return f"its imports need a Triton newer than the installed {triton_version}: {error}"
    return error


def machine() -> str:
    """The machine line every results file of this repository carries (host, GPU and driver,
    Python and module versions): ``bench/results_file.machine``."""
    sys.path.insert(0, os.path.join(REPO, "bench"))
    try:
        from results_file import machine as describe
    finally:
        sys.path.pop(0)
    return describe()


def _installed_triton() -> str:
    try:
        from importlib.metadata import version
        return version("triton")
    except Exception:
        return "unknown"


def results_doc(summary: dict, command: str, upstream: str = None) -> dict:
    """The machine-level record of one run: counts, the failing ids, and what could not run here
    with its reason (skipped tests; files whose imports fail, :func:`import_reason`, read from
    the test files in ``upstream``)."""
    import datetime
    failures, not_runnable = [], {}
    for tid, t in sorted(summary["tests"].items()):
        if t["outcome"] == "skipped":
            not_runnable[tid] = t["reason"]
        elif t["outcome"] == "error" and "::" not in tid and any(e in t["reason"] for e in IMPORT_ERRORS):
            path = os.path.join(upstream or "", tid if tid.endswith(".py") else tid + ".py")
            try:
                with open(path) as f:
                    source = f.read()
            except OSError:
                source = ""
            not_runnable[tid] = import_reason(source, t["reason"], _installed_triton())
        elif t["outcome"] in ("failed", "error"):
            failures.append(tid)
    c = summary["counts"]
    return {"machine": machine(), "date": datetime.datetime.now().isoformat(timespec="seconds"),
            "command": command, "passed": c["passed"], "failed": c["failed"], "skipped": c["skipped"],
            "errors": c["error"] - sum(1 for k in not_runnable if "::" not in k), "failures": failures,
            "not_runnable": not_runnable}


def one_line(text: str, limit: int = 220) -> str:
    text = " ".join(text.strip().split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def best_reason(message: str, text: str) -> str:
    """The exception line of a pytest failure (``E   ...`` lines), else the message."""
    lines = [ln[1:].strip() for ln in text.splitlines() if ln.startswith("E ")]
    exc = [ln for ln in lines if ln and ln[0].isalpha() and ":" in ln.split(" ")[0]]
    pick = exc[0] if exc else (lines[0] if lines else message)
    return one_line(pick)


def print_summary(label: str, summary: dict, out=sys.stdout) -> None:
    c = summary["counts"]
    print(f"[{label}] passed={c['passed']} failed={c['failed']} skipped={c['skipped']} errors={c['error']}",
          file=out)
    bad = [(t, v) for t, v in summary["tests"].items() if v["outcome"] in ("failed", "error")]
    for tid, v in sorted(bad):
        print(f"  {v['outcome'].upper():6} {tid}: {v['reason']}", file=out)
    left = sorted(t for t, v in summary["tests"].items() if v.get("left_on"))
    if left:
        print(f"  left the profiler on (finalized by the harness after the test): {', '.join(left)}", file=out)


def _normalized(tests: dict) -> dict:
    """Per-test outcomes with run-specific paths (pytest's numbered tmp folders) made equal."""
    return {t: dict(v, reason=re.sub(r"pytest-\d+", "pytest-N", v["reason"])) for t, v in tests.items()}


def compare(real: dict, ours: dict, out=sys.stdout) -> None:
    """Tests that pass with the real profiler and do not with ours (and the reverse)."""
    rt, ot = _normalized(real["tests"]), _normalized(ours["tests"])
    passing = [t for t, v in rt.items() if v["outcome"] == "passed"]
    regress = [t for t in passing if ot.get(t, {"outcome": "missing"})["outcome"] != "passed"]
    better = [t for t, v in ot.items() if v["outcome"] == "passed" and rt.get(t, {}).get("outcome") != "passed"]
    print(f"real passes {len(passing)}; of those ours does not pass {len(regress)}", file=out)
    for t in sorted(regress):
        v = ot.get(t, {"outcome": "missing", "reason": "not run"})
        print(f"  {v['outcome'].upper():7} {t}: {v['reason']}", file=out)
    differ = [t for t, v in rt.items() if v["outcome"] in ("failed", "error")
              and ot.get(t, {}).get("outcome") in ("failed", "error") and ot[t]["reason"] != v["reason"]]
    if differ:
        print(f"both fail, with different first errors: {len(differ)}", file=out)
        for t in sorted(differ):
            print(f"  {t}\n      real: {rt[t]['reason']}\n      ours: {ot[t]['reason']}", file=out)
    if better:
        print(f"ours passes {len(better)} that real does not:", file=out)
        for t in sorted(better):
            print(f"  {t} (real: {rt.get(t, {}).get('outcome', 'missing')}: {rt.get(t, {}).get('reason', '')})",
                  file=out)


def load_summary(path: str) -> dict:
    if path.endswith(".json"):
        with open(path) as f:
            return json.load(f)
    return parse_junit(path)


def run(args, extra) -> int:
    upstream = os.path.abspath(args.upstream)
    if not os.path.isdir(upstream):
        sys.exit(f"no upstream test folder at {upstream} (extract third_party/proton/test there)")
    gpu = gpu_available() if args.device is None else args.device != "cpu"
    device = args.device or ("cuda" if gpu else "cpu")
    work = tempfile.mkdtemp(prefix=f"proton-upstream-{args.impl}-")
    bindir = os.path.join(work, "bin")
    os.mkdir(bindir)
    make_bin(bindir)
    junit = os.path.abspath(args.junit or os.path.join(work, "junit.xml"))
    env = dict(os.environ)
    env["PROTON_UPSTREAM_IMPL"] = args.impl
    env["PROTON_UPSTREAM_TEST_TIMEOUT"] = str(args.test_timeout)
    env["PROTON_UPSTREAM_ISOLATE"] = "0" if args.no_isolate else "1"
    env.pop("PROTON_UPSTREAM_ORACLE", None)
    if args.impl == "real" and not gpu:
        sys.path.insert(0, os.path.dirname(HERE))
        from oracle import real_proton  # noqa: E402  (the stubs are built once, here)
        env["PROTON_UPSTREAM_ORACLE"] = "1"
        env["PROTON_UPSTREAM_STUBS"] = real_proton.build_stubs()
    path = [SHIM, REPO]
    if args.deps and os.path.isdir(args.deps):
        path.append(os.path.abspath(args.deps))
    elif args.deps != DEFAULT_DEPS:
        sys.exit(f"--deps {args.deps}: no such folder")
    env["PYTHONPATH"] = os.pathsep.join(path + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "")
    cwd = os.path.join(work, "cwd")
    os.mkdir(cwd)
    files = [os.path.join(upstream, f) for f in args.files]
    cmd = [sys.executable, "-m", "pytest", "-c", os.path.join(HERE, "upstream.ini"), "--rootdir", upstream,
           "-p", "proton_upstream_plugin", "-p", "no:cacheprovider", "--continue-on-collection-errors",
           f"--junitxml={junit}",
           "-o", "junit_family=xunit1", "--device", device, *files, *extra]
    if os.path.exists(junit):
        os.unlink(junit)  # never report a previous run's results
    print("+", " ".join(cmd), flush=True)
    try:
        proc = subprocess.run(cmd, env=env, cwd=cwd, timeout=args.timeout or None)
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        print(f"pytest exceeded --timeout {args.timeout} s", file=sys.stderr)
        rc = 124
    if not os.path.exists(junit):
        print("no junit XML was written", file=sys.stderr)
        return rc or 1
    summary = parse_junit(junit)
    summary.update(impl=args.impl, device=device, oracle=env.get("PROTON_UPSTREAM_ORACLE") == "1",
                   files=args.files, pytest_rc=rc)
    print()
    print_summary(f"{args.impl}, device={device}", summary)
    if args.summary:
        with open(args.summary, "w") as f:
            json.dump(summary, f, indent=1, sort_keys=True)
    if args.results:
        with open(args.results, "w") as f:
            json.dump(results_doc(summary, "python tests/upstream/run.py " + " ".join(sys.argv[1:]), upstream), f,
                      indent=1)
    return rc


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--impl", choices=["ours", "real"], default="ours")
    p.add_argument("--files", nargs="+", default=DEFAULT_FILES, help="upstream test files (names in --upstream)")
    p.add_argument("--junit", help="write the junit XML here")
    p.add_argument("--summary", help="write counts and per-test outcomes (JSON) here")
    p.add_argument("--results", help="write the run's record here: counts, failing ids, what could not run "
                                     "and why (e.g. tests/upstream/results/h200.json)")
    p.add_argument("--upstream", default=DEFAULT_UPSTREAM, help="folder of the upstream test files")
    p.add_argument("--deps", default=DEFAULT_DEPS,
                   help="extra package folder put on PYTHONPATH (pandas/hatchet for the real viewer)")
    p.add_argument("--device", choices=["cpu", "cuda"], help="default: cuda when torch sees a GPU, else cpu")
    p.add_argument("--timeout", type=int, default=0, help="limit for the whole pytest run, s (0: none)")
    p.add_argument("--test-timeout", type=int, default=120, help="limit per test, s (0: none)")
    p.add_argument("--no-isolate", action="store_true",
                   help="do not finalize a profiler that a test left on (failures then cascade)")
    p.add_argument("--setup-deps", action="store_true", help="install the real viewer's deps into --deps and exit")
    p.add_argument("--wheels", help="with --setup-deps: install offline from this folder of wheels")
    p.add_argument("--download-wheels", metavar="DIR", help="download the viewer deps' wheels for --for-python and exit")
    p.add_argument("--for-python", default="3.12", help="Python version of --download-wheels (default 3.12)")
    p.add_argument("--compare", nargs=2, metavar=("REAL", "OURS"),
                   help="compare two junit XMLs (or --summary JSONs) and exit")
    args = p.parse_args(argv)
    if args.download_wheels:
        download_wheels(args.download_wheels, args.for_python)
        return 0
    if args.setup_deps:
        setup_deps(args.deps, args.wheels)
        return 0
    if args.compare:
        real, ours = (load_summary(x) for x in args.compare)
        print_summary("real", real)
        print_summary("ours", ours)
        compare(real, ours)
        return 0
    return run(args, extra)


if __name__ == "__main__":
    sys.exit(main())
