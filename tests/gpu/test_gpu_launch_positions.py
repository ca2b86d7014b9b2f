"""Launch positions on a real GPU (the default launch source): with the latency timestamps off,
kernels are placed among their thread's scope edges by where CUPTI wrote their records, exactly,
with a busy GPU queue (every kernel still queued when its scope closes) and another thread
launching all along, in a scope of its own. Each program runs in a process of its own, once per
launch source, and both must give the same counts. On the H100 an earlier version, whose other
thread had no scope, gave a/b/c exactly 200/120/40 under both sources (that thread's kernels
followed the main thread's scopes, as in Proton). Skipped without a CUDA GPU."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROUNDS = 40

PROGRAM = textwrap.dedent("""
    import sys, threading
    import torch
    import proton_ctypes as proton
    from proton_ctypes.backends import select
    x = torch.zeros(1 << 16, device="cuda")
    y = torch.zeros(16, device="cuda")
    x.add_(1); y.add_(1); torch.cuda.synchronize()
    sid = proton.start(sys.argv[1])
    stop = threading.Event()
    def background():                 # launches all along, in a scope of its own (a thread without
        with proton.scope("bg"):      # one starts from the main thread's scopes, as in Proton)
            while not stop.is_set():
                y.mul_(1)
    t = threading.Thread(target=background)
    t.start()
    torch.cuda._sleep(200_000_000)     # a busy queue: the kernels below run long after their scopes
    for i in range(int(sys.argv[2])):
        with proton.scope("a"):
            for _ in range(5):
                x.add_(1)
        with proton.scope("b"):
            for _ in range(3):
                x.sub_(1)
            with proton.scope("c"):
                x.div_(1)
        if i % 10 == 0:
            proton.data.get(sid)       # a flush mid-run: half-full buffers handed back
    stop.set(); t.join()
    print(select.get("cupti").launch_source)
    proton.finalize()
""")


def _scope_counts(path):
    with open(path) as f:
        root = json.load(f)[0]
    out = {}

    def walk(node, prefix):
        for c in node["children"]:
            name = c["frame"]["name"]
            if "count" in c["metrics"] and not c["children"]:
                out[prefix or "ROOT"] = out.get(prefix or "ROOT", 0) + int(c["metrics"]["count"])
            else:
                walk(c, f"{prefix}/{name}" if prefix else name)
    walk(root, "")
    return out


@pytest.mark.parametrize("source", ["position", "kernel"])
def test_kernels_split_exactly_between_scopes_with_a_busy_queue_and_another_thread_launching(tmp_path, source):
    out = tmp_path / source
    env = dict(os.environ, PYTHONPATH=ROOT, PROTON_CTYPES_LAUNCH_SOURCE=source)
    r = subprocess.run([sys.executable, "-c", PROGRAM, str(out), str(ROUNDS)], env=env, capture_output=True,
                       text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split()[-1] == source
    counts = _scope_counts(str(out) + ".hatchet")
    assert counts["a"] == 5 * ROUNDS and counts["b"] == 3 * ROUNDS and counts["b/c"] == ROUNDS, counts
    assert counts["bg"] > 0, counts              # the background thread's kernels
    assert "launch positions" not in r.stderr, r.stderr[-2000:]
