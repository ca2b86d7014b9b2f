"""Probe (GPU): CUPTI's own counters of each PC-sampling range around test_pcsampling's tiny fills.

``probe_pc_first_range.py`` on an H200: as shipped, the first of the two fills got 2 samples in 6
of 8 fresh sessions and the second none in all 8 (on an H100 earlier it was the other way round),
and an empty range opened first changed nothing systematic.  So a fill's range either samples it
by chance or something loses its samples.  This runs three fills, each in a scope of its own
(``fill1`` .. ``fill3``), then the test's Triton kernel, in fresh sessions, and prints per session:

* per fill scope, the samples and the kernel time (ns) the profile holds -- under proton_ctypes,
  or under Proton 3.9 (``PROTON_BENCH_OVERLAY``) with ``proton`` as the second argument, so a
  fill that runs longer (the first one of a session, say) shows, and whether Proton's fills are
  sampled as often;
* for proton_ctypes, CUPTI's counters of every range read at its collection
  (``CUpti_PCSamplingData``: ``totalSamples``, ``droppedSamples``, ``nonUsrKernelsTotalSamples``,
  ``hardwareBufferFull``, ``totalNumPcs``), in launch order (the fills, then the Triton kernel).  A fill range with
  ``totalSamples`` 0 took no sample at all; one with samples dropped or counted as non-user
  kernels' lost them.

Run: ``python tests/gpu/probe_pc_counters.py [REPS] [ours|proton]`` (or through
``PROBE=probe_pc_counters.py bash tests/gpu/run_on_device.sh probe``); prints one JSON document.
Each profiler needs a process of its own: CUPTI takes one subscriber per process, and Proton's
start fails (``cuptiSubscribe`` error 39) after a session of ours.

Measured on an H100 (CUPTI 13, 12 sessions each, ``tests/gpu/results/probe_pc_counters-h100.json``):
CUPTI took 0 or 1 sample in a fill's range (``totalSamples``; none dropped, none counted as
non-user kernels', the hardware buffer never full), 12 or 13 in the Triton kernel's; a fill's range
held a sample in 11 and in 9 of 36 ranges in two runs under proton_ctypes (12 of 36 without the
sync before a range's stop, 6 of 36 without the one before its start) and in 18 of 36 under
Proton, and the test's node (the first two fills) got one in 7 of 12 sessions under each.  So no sample is lost
between CUPTI and the profile: whether there is one to keep is CUPTI's chance.
"""
import json
import os
import sys
import tempfile

import probe_common  # noqa: F401  (the import paths)
from probe_pc_tiny import profile_of_test_body, tiny_kernel

#: the scopes of the fills, in launch order
FILL_SCOPES = ("fill1", "fill2", "fill3")
#: CUpti_PCSamplingData's counters read at each range's collection
COUNTERS = ("totalSamples", "droppedSamples", "nonUsrKernelsTotalSamples", "hardwareBufferFull", "totalNumPcs")


def run_body(proton, foo, path: str) -> dict:
    """The fills and the Triton kernel in one fresh session written to ``path``; returns
    ``{scope: [num_samples, kernel time (ns)]}`` of the fill scopes."""
    return {child["frame"]["name"]: [sum(k["metrics"].get(m, 0) for k in child["children"])
                                     for m in ("num_samples", "time (ns)")]
            for child in profile_of_test_body(proton, foo, path, "pcsampling", FILL_SCOPES)
            if child["frame"]["name"] in FILL_SCOPES}


def _recording_collect(sampler_cls, ranges: list):
    """Make ``sampler_cls.collect`` append CUPTI's counters of each range (as read before its
    first buffer is parsed) to ``ranges``; returns the original method, to put back."""
    original = sampler_cls.collect

    def collect(self, cfg):
        data = cfg.data
        ranges.append({k: int(getattr(data, k)) for k in COUNTERS})
        return original(self, cfg)

    sampler_cls.collect = collect
    return original


def main(reps: int, impl: str) -> dict:
    foo = tiny_kernel()
    folder = tempfile.mkdtemp()
    if impl == "proton":
        from proton_overlay import real_proton
        real = real_proton()
        return {"proton": [run_body(real, foo, os.path.join(folder, f"real{i}")) for i in range(reps)]}
    import proton_ctypes as proton
    from proton_ctypes.backends.nvidia.pcsampling import PCSampler

    out = {"proton_ctypes": [], "proton_ctypes ranges": []}
    for i in range(reps):
        ranges = []
        original = _recording_collect(PCSampler, ranges)
        try:
            out["proton_ctypes"].append(run_body(proton, foo, os.path.join(folder, f"ours{i}")))
        finally:
            PCSampler.collect = original
        out["proton_ctypes ranges"].append(ranges)
    return out


if __name__ == "__main__":
    print(json.dumps(main(int(sys.argv[1]) if len(sys.argv) > 1 else 8, sys.argv[2] if len(sys.argv) > 2 else "ours")))
