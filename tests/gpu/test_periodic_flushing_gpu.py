"""``mode="periodic_flushing"`` on a real GPU with small activity buffers: every kernel lands in the
part file of its phase.

Proton's own ``test_periodic_flushing`` sets 256 KiB buffers through
``triton.knobs.proton.profile_buffer_size``, a knob triton 3.6 does not have; this sets the same
size through ``TRITON_PROFILE_BUFFER_SIZE``, which every triton reads. At that size a phase's
kernels fill several buffers, and the last ones of a phase are still in a buffer CUPTI holds when
the phase is closed: a phase is written only once each launching thread's delivered kernels have
passed its end. A busy queue (a long sleep kernel first) keeps every kernel running long after its
phase closed. Skipped without a CUDA GPU."""
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import read_tree

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: Proton's small size in its own test
BUFFER_BYTES = 256 * 1024
PHASES = 4
LAUNCHES_PER_PHASE = 2500

PROGRAM = textwrap.dedent("""
    import sys
    import torch
    import proton_ctypes as proton
    from proton_ctypes.backends import select
    path, fmt, phases, launches = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    x = torch.zeros(64, device="cuda")
    x.add_(1); torch.cuda.synchronize()
    torch.cuda._sleep(200_000_000)     # a busy queue: the kernels below run long after their phase closed
    sid = proton.start(path, mode=f"periodic_flushing:format={fmt}")
    for phase in range(phases):
        if phase:
            proton.data.advance_phase(session=sid)
        for _ in range(launches):
            with proton.scope(f"phase{phase}"):
                x.add_(1)
    pool = select.get("cupti").pool
    print(pool.buffer_bytes, pool.requests)
    proton.finalize(output_format=fmt)
""")


@pytest.mark.parametrize("fmt", ["hatchet", "hatchet_msgpack"])
def test_periodic_flushing_with_small_buffers_puts_every_kernel_in_its_phase_file(tmp_path, fmt):
    out = tmp_path / "pf"
    env = dict(os.environ, PYTHONPATH=ROOT, TRITON_PROFILE_BUFFER_SIZE=str(BUFFER_BYTES))
    r = subprocess.run([sys.executable, "-c", PROGRAM, str(out), fmt, str(PHASES), str(LAUNCHES_PER_PHASE)],
                       env=env, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    buffer_bytes, requests = map(int, r.stdout.split()[-2:])
    assert buffer_bytes == BUFFER_BYTES and requests > PHASES, r.stdout     # several buffers per phase
    for phase in range(PHASES):
        root, _ = read_tree(tmp_path / f"pf.part_{phase}.{fmt}")
        scopes = {c["frame"]["name"]: c for c in root["children"]}
        assert list(scopes) == [f"phase{phase}"], list(scopes)
        kernels = scopes[f"phase{phase}"]["children"]
        assert sum(int(k["metrics"]["count"]) for k in kernels) == LAUNCHES_PER_PHASE
        assert all(k["metrics"]["time (ns)"] > 0 for k in kernels)
