"""Probe (GPU): how many PC samples a tiny torch fill gets in its own sampling range, session after session.

Proton's ``test_pcsampling`` asserts that the node of two 1024-element torch fills (a sub-µs
kernel) has ``num_samples > 0``. On the H100 the suite's run passed once (the second fill got 2
samples, the first none) and failed twice (no sample in either range), with CUPTI detached
between sessions or not. This repeats that test's body in fresh sessions and prints, per
session, the samples of the fill node -- at Proton's default interval, and at a shorter one
for comparison. Run: ``python tests/gpu/probe_pc_tiny.py [REPS]``; prints one JSON document.
"""
import itertools
import json
import os
import sys
import tempfile

import probe_common  # noqa: F401  (the import paths)


def tiny_kernel():
    """The Triton kernel of Proton's ``test_pcsampling`` (a short loop of loads and stores)."""
    import triton
    import triton.language as tl

    @triton.jit
    def foo(x, y, size: tl.constexpr):
        offs = tl.arange(0, size)
        for _ in range(100):
            tl.store(y + offs, tl.load(x + offs))

    return foo


def profile_of_test_body(proton, foo, path: str, mode: str, fill_scopes=("init", "init")) -> list:
    """The body of Proton's ``test_pcsampling`` in one fresh session written to ``path``: one torch
    fill per name in ``fill_scopes`` (a ``torch.ones``, then ``torch.zeros_like``), consecutive
    fills of one name under one scope (the test's: two fills under ``init``), then the Triton
    kernel under ``test``; returns the children of the profile's root."""
    import torch

    proton.start(path, hook="triton", backend="cupti", mode=mode)
    x = None
    for name, fills in itertools.groupby(range(len(fill_scopes)), key=fill_scopes.__getitem__):
        with proton.scope(name):
            for _ in fills:
                if x is None:
                    x = torch.ones((1024,), device="cuda", dtype=torch.float32)
                else:
                    y = torch.zeros_like(x)
    with proton.scope("test"):
        foo[(1,)](x, y, x.size()[0], num_warps=4)
    proton.finalize()
    with open(path + ".hatchet") as f:
        return json.load(f)[0]["children"]


def run_test_body(proton, foo, path: str, mode: str) -> list:
    """:func:`profile_of_test_body` as the test runs it; returns the metrics of each child of the
    ``init`` scope (the torch fills' node)."""
    init = next(c for c in profile_of_test_body(proton, foo, path, mode) if c["frame"]["name"] == "init")
    return [c["metrics"] for c in init["children"]]


def main(reps: int, impl: str) -> dict:
    if impl == "proton":
        from proton_overlay import real_proton
        proton = real_proton()
    else:
        import proton_ctypes as proton

    foo = tiny_kernel()
    out = {}
    folder = tempfile.mkdtemp()
    for mode in ("pcsampling", "pcsampling:interval=256"):
        got = []
        for i in range(reps):
            metrics = run_test_body(proton, foo, os.path.join(folder, f"pc{i}"), mode)
            got.append([m.get("num_samples", 0) for m in metrics])
        out[mode] = got
    return out


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 10, sys.argv[2] if len(sys.argv) > 2 else "ours")))
