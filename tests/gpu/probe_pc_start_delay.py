"""Probe (GPU): does CUPTI's PC sampler take samples only some time after ``cuptiPCSamplingStart``?

In Proton's ``test_pcsampling`` the node of two 1024-element torch fills must have
``num_samples > 0``.  In the H100 suite runs where that failed, the node held two kernels of
about 2.6 µs each (some five periods of 2^10 cycles) and no sample, while the Triton kernel
of the same test (67 µs) got 219: more than chance would give.  If the sampler starts
sampling only a while after the start call, a kernel launched right after it runs before
any sample is taken.  This repeats the test's body in fresh sessions with the sampler's
range start (``PCSampler.start``) followed by a busy wait of W µs before the launch goes on,
for each W, and prints per session the samples of the fill node.  A wait that makes every
session sample the fills says the start delay is the cause (and how long it is); none that
does says it is not.  Run: ``python tests/gpu/probe_pc_start_delay.py [REPS]`` (or through
``PROBE=probe_pc_start_delay.py bash tests/gpu/run_on_device.sh probe``); prints one JSON
document.

Measured on an H100 (8 sessions per wait): no wait made every session sample the fills (none in
3, 4, 3 and 4 of 8 at 0, 5, 20 and 100 µs): the start delay is not the cause
(``docs/collection.md``, "What is switched on").
"""
import json
import os
import sys
import tempfile
import time

import probe_common  # noqa: F401  (the import paths)
from probe_pc_tiny import run_test_body, tiny_kernel

#: the busy waits after the range start, in µs (0: as shipped)
WAITS_US = (0, 5, 20, 100)


def _wait_after_start(sampler_cls, wait_us: float):
    """Make ``sampler_cls.start`` busy-wait ``wait_us`` after opening a range; returns the
    original method, to put back."""
    original = sampler_cls.start

    def start(self, ctx):
        opened = not self.started
        original(self, ctx)
        if opened and self.started and wait_us:
            until = time.perf_counter() + wait_us / 1e6
            while time.perf_counter() < until:
                pass

    sampler_cls.start = start
    return original


def main(reps: int) -> dict:
    import proton_ctypes as proton
    from proton_ctypes.backends.nvidia.pcsampling import PCSampler

    foo = tiny_kernel()
    out = {"waits_us": list(WAITS_US), "fill_samples": {}, "fill_ns": {}}
    folder = tempfile.mkdtemp()
    for wait in WAITS_US:
        original = _wait_after_start(PCSampler, wait)
        samples, times = [], []
        try:
            for i in range(reps):
                metrics = run_test_body(proton, foo, os.path.join(folder, f"w{wait}-{i}"), "pcsampling")
                samples.append([m.get("num_samples", 0) for m in metrics])
                times.append([m.get("time (ns)", 0) for m in metrics])
        finally:
            PCSampler.start = original
        out["fill_samples"][str(wait)] = samples
        out["fill_ns"][str(wait)] = times
    return out


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 8)))
