"""Probe (GPU): does the first PC-sampling range after a context is configured miss its kernel?

Proton's ``test_pcsampling`` asserts ``num_samples > 0`` on the node of two torch fills, the
first two kernels of its session.  A busy wait after each range's start changed nothing
(``probe_pc_start_delay.py``: the node got no sample in 3 to 4 of 8 sessions at every wait), and
the fills' totals were mostly even (2 or 4): as if one fill's range sampled and the other's did
not.  If the first range after ``cuptiPCSamplingSetConfigurationAttribute`` never samples, the
node is empty whenever the second fill misses by chance.  This puts the two fills under scopes of
their own (``fill1``, ``fill2``) and runs that body in fresh sessions, as shipped and with one empty
range (start, stop, data read and dropped) opened on each context right after it is configured;
it prints per session the samples of each fill.  The first fill sampled as often as the second,
as shipped, says the first range is not the cause; the first one empty as shipped and sampled with
the empty range says it is (and that range is the fix).
Run: ``python tests/gpu/probe_pc_first_range.py [REPS]`` (or through
``PROBE=probe_pc_first_range.py bash tests/gpu/run_on_device.sh probe``); prints one JSON document.
"""
import json
import os
import sys
import tempfile

import probe_common  # noqa: F401  (the import paths)
from probe_pc_tiny import tiny_kernel

#: the scopes of the two fills, in launch order
FILL_SCOPES = ("fill1", "fill2")
VARIANTS = ("as shipped", "empty first range")


def _with_empty_first_range(sampler_cls):
    """Make ``sampler_cls.initialize`` open and close one range on a context it has just
    configured, its samples dropped; returns the original method, to put back."""
    original = sampler_cls.initialize

    def initialize(self, ctx):
        fresh = ctx not in self.contexts
        cfg = original(self, ctx)
        if fresh:
            self.lib.pc_sampling_start(self._context(ctx))
            self.sync()
            self.lib.pc_sampling_stop(self._context(ctx))
            self.collect(cfg)
        return cfg

    sampler_cls.initialize = initialize
    return original


def run_body(proton, foo, path: str) -> dict:
    """Proton's ``test_pcsampling`` body with each fill under a scope of its own, in one fresh
    session written to ``path``; returns ``{scope: num_samples of its kernels}``."""
    import torch

    proton.start(path, hook="triton", backend="cupti", mode="pcsampling")
    with proton.scope(FILL_SCOPES[0]):
        x = torch.ones((1024,), device="cuda", dtype=torch.float32)
    with proton.scope(FILL_SCOPES[1]):
        y = torch.zeros_like(x)
    with proton.scope("test"):
        foo[(1,)](x, y, x.size()[0], num_warps=4)
    proton.finalize()
    with open(path + ".hatchet") as f:
        data = json.load(f)
    out = {}
    for child in data[0]["children"]:
        name = child["frame"]["name"]
        if name in FILL_SCOPES:
            out[name] = sum(c["metrics"].get("num_samples", 0) for c in child["children"])
    return out


def main(reps: int) -> dict:
    import proton_ctypes as proton
    from proton_ctypes.backends.nvidia.pcsampling import PCSampler

    foo = tiny_kernel()
    out = {}
    folder = tempfile.mkdtemp()
    for variant in VARIANTS:
        original = _with_empty_first_range(PCSampler) if variant != VARIANTS[0] else None
        try:
            out[variant] = [run_body(proton, foo, os.path.join(folder, f"v{len(out)}-{i}")) for i in range(reps)]
        finally:
            if original is not None:
                PCSampler.initialize = original
    return out


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 8)))
