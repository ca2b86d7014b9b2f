"""The one way every benchmark writes its ``bench/results/<bench>-<machine>.json``.

``{"machine", "date", "command", "rows": [...], ...}``: :func:`write` fills the first three
(the command with the ``PROTON_BENCH_OVERLAY`` prefix where Proton 3.9 stood in for the installed
Proton) and writes the file whole or not at all, so a benchmark cut short by its time limit
leaves the results of its last complete save, never half a file.

Imported by ``bench/*.py`` run as scripts (their folder is on ``sys.path``).
"""
from __future__ import annotations

import datetime
import functools
import json
import os
import platform
import subprocess
import sys

from proton_overlay import command_prefix

#: Seconds ``nvidia-smi`` may take to name the GPU.
NVIDIA_SMI_TIMEOUT_S = 30
#: Modules whose versions the machine line names, where installed.
VERSIONED = ("torch", "triton", "numpy")


@functools.lru_cache(maxsize=None)
def machine() -> str:
    """``host | GPU, driver | Python x.y.z | torch ..., triton ..., numpy ...`` (the GPU part is
    ``no GPU`` where ``nvidia-smi`` is missing or fails; modules not installed are left out)."""
    gpu = "no GPU"
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT_S)
        if out.returncode == 0 and out.stdout.strip():
            gpu = out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    versions = []
    for name in VERSIONED:
        mod = sys.modules.get(name)
        if mod is None:
            try:
                mod = __import__(name)
            except Exception:      # an optional module that fails to import is just not named
                continue
        versions.append(f"{name} {getattr(mod, '__version__', '?')}")
    return " | ".join([platform.node() or "?", gpu, f"Python {platform.python_version()}", ", ".join(versions)])


def write(path: str, rows: list, **extra) -> None:
    """Write ``rows`` (and the ``extra`` top-level keys) to ``path`` as a results file, atomically."""
    doc = {"machine": machine(), "date": datetime.datetime.now().isoformat(timespec="seconds"),
           "command": command_prefix() + "python " + " ".join(sys.argv), "rows": rows}
    doc.update(extra)
    path = os.path.abspath(path)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w") as f:
            json.dump(doc, f, indent=1)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
