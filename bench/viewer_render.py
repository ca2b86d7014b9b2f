"""Benchmark: time proton-viewer on a generated 100 000-node profile (not a test; prints timings).

Usage: ``python bench/viewer_render.py [--nodes N] [--repeat R] [--keep DIR]``.  Generates a Proton-like
profile (scopes and kernels with count, time, bytes, flops16; tests/viewer/profiles.py:big_profile),
writes it as .hatchet and .hatchet_msgpack, then times complete viewer runs (read, roll-up, derive,
render to an in-memory stdout) for a few command lines.  Target: under 2 s for 100k nodes.
"""

import argparse
import contextlib
import gc
import io
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from proton_ctypes.viewer import main  # noqa: E402
from tests.viewer.profiles import big_profile, write_json, write_msgpack  # noqa: E402

COMMANDS = [
    ["-m", "time/ns"],
    ["-m", "time/ms,tflop16/s", "--print-sorted"],
    ["-m", "avg_time/us,util", "-i", "region_1.*"],
    ["-m", "time/%", "-t", "0.01"],
]


def timed(argv):
    """Run the viewer once with stdout captured; return (seconds, exit code, output size)."""
    out = io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(out):
        code = main(argv)
    return time.perf_counter() - start, code, len(out.getvalue())


def run(nodes, repeat, directory):
    """Generate the profile in ``directory`` and print the best time of each command."""
    doc = big_profile(nodes)
    json_path = os.path.join(directory, "big.hatchet")
    msgpack_path = os.path.join(directory, "big.hatchet_msgpack")
    write_json(doc, json_path)
    write_msgpack(doc, msgpack_path)
    del doc
    gc.collect()
    print(f"profile: {nodes} nodes, {os.path.getsize(json_path) / 1e6:.1f} MB JSON, "
          f"{os.path.getsize(msgpack_path) / 1e6:.1f} MB msgpack")
    for path in (json_path, msgpack_path):
        for argv in COMMANDS:
            best = min(timed(argv + [path]) for _ in range(repeat))
            print(f"{best[0]:7.3f} s  exit {best[1]}  {best[2] / 1e6:5.1f} MB out  "
                  f"proton-viewer {' '.join(argv)} {os.path.basename(path)}")


def cli():
    """Parse the benchmark's options and run it."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, default=100_000)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--keep", default=None, help="write the profiles here instead of a temporary directory")
    args = p.parse_args()
    if args.keep:
        os.makedirs(args.keep, exist_ok=True)
        run(args.nodes, args.repeat, args.keep)
    else:
        with tempfile.TemporaryDirectory() as d:
            run(args.nodes, args.repeat, d)


if __name__ == "__main__":
    cli()
