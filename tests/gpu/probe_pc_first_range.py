"""Probe (GPU): does the first PC-sampling range after a context is configured miss its kernel?

Proton's ``test_pcsampling`` asserts ``num_samples > 0`` on the node of two torch fills, the
first two kernels of its session.  A busy wait after each range's start changed nothing
(``probe_pc_start_delay.py``: the node got no sample in 3 to 4 of 8 sessions at every wait), and
the fills' totals were mostly even (2 or 4): as if one fill's range sampled and the other's did
not.  If the first range after ``cuptiPCSamplingSetConfigurationAttribute`` never samples, the
node is empty whenever the second fill misses by chance.  This puts the two fills under scopes of
their own (``fill1``, ``fill2``) and runs that body in fresh sessions, as shipped and with one empty
range (start, stop, data read and dropped) opened on each configured context before its first
range; it prints per session the samples of each fill.  The first fill sampled as often as the second,
as shipped, says the first range is not the cause; the first one empty as shipped and sampled with
the empty range says it is (and that range is the fix).
Measured on an H200 (8 sessions per variant): as shipped the first fill got 2 samples in 6 of 8
and the second none in 8 of 8; with the empty range, 2 in 4 of 8 and 1-2 in 2 of 8.  The first
range is not the cause, and no empty range is built in.
Run: ``python tests/gpu/probe_pc_first_range.py [REPS]`` (or through
``PROBE=probe_pc_first_range.py bash tests/gpu/run_on_device.sh probe``); prints one JSON document.
"""
import json
import os
import sys
import tempfile

import probe_common  # noqa: F401  (the import paths)
from probe_pc_tiny import profile_of_test_body, tiny_kernel

#: the scopes of the two fills, in launch order
FILL_SCOPES = ("fill1", "fill2")
VARIANTS = ("as shipped", "empty first range")


def _with_empty_first_range(sampler_cls):
    """Make ``sampler_cls.start`` open and close one range, its samples dropped, before the first
    range it opens on each configured context (configured there or by the context-created
    callback); returns the original method, to put back."""
    original = sampler_cls.start

    def start(self, ctx):
        with self._lock:
            if not self.started:
                cfg = self.initialize(ctx)
                if not getattr(cfg, "probe_warmed", False):
                    cfg.probe_warmed = True
                    self.sync()
                    self.lib.pc_sampling_start(self._context(ctx))
                    self.sync()
                    self.lib.pc_sampling_stop(self._context(ctx))
                    self.collect(cfg)
            original(self, ctx)

    sampler_cls.start = start
    return original


def run_body(proton, foo, path: str) -> dict:
    """Proton's ``test_pcsampling`` body with each fill under a scope of its own, in one fresh
    session written to ``path``; returns ``{scope: num_samples of its kernels}``."""
    return {child["frame"]["name"]: sum(c["metrics"].get("num_samples", 0) for c in child["children"])
            for child in profile_of_test_body(proton, foo, path, "pcsampling", FILL_SCOPES)
            if child["frame"]["name"] in FILL_SCOPES}


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
                PCSampler.start = original
    return out


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 8)))
