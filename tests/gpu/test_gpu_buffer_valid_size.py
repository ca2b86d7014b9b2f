"""CUPTI writes nothing into a buffer it hands back past its valid size and the one page more
(``ZERO_MARGIN_BYTES``) that the pool zeroes with it: the pool zeroes a recycled buffer only that
far, and launch positions need every buffer CUPTI gets to be all zeros. Checked at every release
of a buffer, with two launching threads, a busy GPU queue (records written in place at launch,
completed later), flushes mid-run (half-full buffers handed back) and small buffers (many
recycles); the buffers written past their valid size at all go to ``$PROTON_CTYPES_GPU_REPORT``.
Skipped without a CUDA GPU."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from proton_ctypes.backends.nvidia.buffers import ZERO_MARGIN_BYTES

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
#: small buffers: each is filled and recycled many times
BUFFER_BYTES = 256 * 1024
ROUNDS = 300

PROGRAM = textwrap.dedent("""
    import sys, threading
    import torch
    import proton_ctypes as proton
    from proton_ctypes.backends.nvidia import buffers
    checked, dirty = [0], []
    original = buffers.BufferPool.release

    def release(self, address, used=None):
        view = self._out.get(address)
        if view is not None and used is not None:
            checked[0] += 1
            past = view[used:]
            if past.any():
                written = past.nonzero()[0]
                dirty.append((used, int(written[0]), int(written[-1])))
        return original(self, address, used)
    buffers.BufferPool.release = release
    x = torch.zeros(1 << 16, device="cuda")
    y = torch.zeros(16, device="cuda")
    x.add_(1); y.add_(1); torch.cuda.synchronize()
    sid = proton.start(sys.argv[1])
    stop = threading.Event()
    def background():
        with proton.scope("bg"):
            while not stop.is_set():
                y.mul_(1)
    t = threading.Thread(target=background)
    t.start()
    torch.cuda._sleep(200_000_000)     # a busy queue: records stay incomplete in their buffers
    for i in range(int(sys.argv[2])):
        with proton.scope("a"):
            for _ in range(20):
                x.add_(1)
        if i % 25 == 0:
            proton.data.get(sid)       # a flush mid-run: half-full buffers handed back
    stop.set(); t.join()
    proton.finalize()
    print(checked[0], max((last for _u, _f, last in dirty), default=-1), len(dirty), dirty[:5])
""")


def test_cupti_writes_nothing_past_what_the_pool_zeroes_of_a_buffer_it_hands_back(tmp_path):
    env = dict(os.environ, PYTHONPATH=ROOT, TRITON_PROFILE_BUFFER_SIZE=str(BUFFER_BYTES))
    r = subprocess.run([sys.executable, "-c", PROGRAM, str(tmp_path / "valid"), str(ROUNDS)],
                       env=env, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    checked, furthest, dirty, first = r.stdout.split(maxsplit=3)
    report = os.environ.get("PROTON_CTYPES_GPU_REPORT")
    if report:
        with open(report, "a") as f:
            f.write(json.dumps({"test": "buffer_valid_size", "buffers_checked": int(checked),
                                "written_past_valid": int(dirty), "furthest_past_valid": int(furthest),
                                "first": first.strip()}) + "\n")
    assert int(checked) > 10, r.stdout          # many buffers came back
    # (valid size, first and last nonzero byte past it) of the buffers with any write past it
    assert int(furthest) < ZERO_MARGIN_BYTES, r.stdout
