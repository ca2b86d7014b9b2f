"""Shared helpers of the viewer tests: run our ``main`` in-process, locate the reference data."""

import contextlib
import io
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from proton_ctypes.viewer import main

DATA = Path(__file__).parent / "data"
REFERENCE_OUTPUTS = DATA / "viewer-3.9.0"
REFERENCE_PROFILES = ("cpu_timed", "decorated", "hook", "metrics", "nested", "pyctx", "states")


@dataclass
class Result:
    """Exit code and captured output of one viewer run."""

    code: int
    out: str
    err: str


def run_viewer(argv, cwd=None):
    """Run ``proton-viewer argv`` in this process (optionally in ``cwd``) and capture its output."""
    out, err = io.StringIO(), io.StringIO()
    old = os.getcwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main([str(a) for a in argv])
    finally:
        os.chdir(old)
    return Result(code, out.getvalue(), err.getvalue())


def install_reference_profiles(directory):
    """Copy the H200 reference profiles into ``directory`` under their original ``.hatchet`` names.

    They are stored as ``<name>.hatchet.json`` because the repository's .gitignore ignores ``*.hatchet``.
    """
    directory = Path(directory)
    for name in REFERENCE_PROFILES:
        shutil.copyfile(DATA / f"{name}.hatchet.json", directory / f"{name}.hatchet")
    return directory
