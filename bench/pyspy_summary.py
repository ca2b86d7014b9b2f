"""Where a launching thread's time goes, from a ``py-spy record --native --threads -f raw`` file.

py-spy's raw format is one collapsed stack per line (``thread (tid): name;frame;...;frame count``).
This script keeps the samples of one thread (``--thread``, default ``MainThread``) whose stack
passes through ``--within`` (a frame's text, e.g. ``longrun.py:241``, the profiled loop), and
sorts them into :data:`GROUPS` by the first rule a stack matches: CUPTI, the profiler (ours or
Proton's), the driver, Triton.  It prints each group's share, the profiler's heaviest frames, and
the samples of every other thread.  Two files side by side (ours and Proton's) say whether the
launching thread pays more under one profiler than under the other, and where.

    python bench/pyspy_summary.py pyspy-proton_ctypes.txt pyspy-proton.txt --within longrun.py:241
"""
from __future__ import annotations

import argparse
import collections

#: (group, substrings of a stack that put it there), the first match wins
GROUPS = (
    ("libcupti", ("libcupti",)),
    ("proton_ctypes (Python)", ("proton_ctypes/", "(scopes.py:", "(positions.py:", "(views.py:")),
    ("libproton", ("libproton",)),
    # py-spy cuts a path at the sys.path entry it is under: Proton 3.9 through bench/proton_overlay.py
    # shows as ``profiler/scope.py``
    ("Proton (Python)", ("triton/profiler/", "(profiler/")),
    ("libcuda", ("libcuda",)),
    ("Triton's launcher (.so)", ("__triton_launcher",)),
    ("Triton (Python)", ("triton/",)),
)
#: the groups that are a profiler's own code
PROFILER_GROUPS = ("proton_ctypes (Python)", "libproton", "Proton (Python)")
#: frames listed per profiler
TOP_FRAMES = 12


def group_of(stack: str) -> str:
    """The group of one collapsed stack (``other`` when no rule matches)."""
    for name, keys in GROUPS:
        if any(k in stack for k in keys):
            return name
    return "other"


def summarize(path: str, thread: str = "MainThread", within: str = "") -> dict:
    """``{"samples", "groups": {group: samples}, "profiler_frames": {frame: samples},
    "other_threads": {thread: samples}}`` of one raw py-spy file."""
    groups, frames, others = collections.Counter(), collections.Counter(), collections.Counter()
    total = 0
    with open(path) as f:
        for line in f:
            stack, _, count = line.rstrip("\n").rpartition(" ")
            if not stack or not count.isdigit():
                continue
            n = int(count)
            head, _, rest = stack.partition(";")
            if thread not in head:
                others[head] += n
                continue
            if within and within not in rest:
                continue
            total += n
            g = group_of(rest)
            groups[g] += n
            if g in PROFILER_GROUPS:
                # the outermost frame of the profiler: the call the launching thread made into it
                keys = dict(GROUPS)[g]
                frames[next(fr for fr in rest.split(";") if any(k in fr for k in keys))] += n
    return {"samples": total, "groups": dict(groups), "profiler_frames": dict(frames), "other_threads": dict(others)}


def report(path: str, s: dict) -> str:
    """The printed summary of one file."""
    total = max(s["samples"], 1)
    lines = [f"== {path}: {s['samples']} samples of the thread"]
    for g, n in sorted(s["groups"].items(), key=lambda kv: -kv[1]):
        lines.append(f"  {100 * n / total:6.2f}% {n:6d}  {g}")
    lines.append("  the profiler's frames (outermost):")
    for fr, n in sorted(s["profiler_frames"].items(), key=lambda kv: -kv[1])[:TOP_FRAMES]:
        lines.append(f"    {100 * n / total:6.2f}% {fr[:140]}")
    lines.append("  other threads' samples: " + ", ".join(f"{t} {n}" for t, n in
                                                          sorted(s["other_threads"].items(), key=lambda kv: -kv[1])))
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--thread", default="MainThread", help="text of the thread's header (tid or name)")
    ap.add_argument("--within", default="", help="keep only stacks through a frame with this text")
    a = ap.parse_args()
    for path in a.files:
        print(report(path, summarize(path, a.thread, a.within)))


if __name__ == "__main__":
    main()
