"""Lazy latency timestamps on a real GPU (``PROTON_CTYPES_LAZY_TIMESTAMPS=1``): kernels launched
before the first scope land at ROOT, every kernel launched after the switch is stamped and lands
under its scope, on the switching thread and on another one, with a busy GPU queue (kernels still
queued when the first scope is entered). Each program runs in a process of its own (the switch is
read at start). Skipped without a CUDA GPU."""
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

PROGRAM = textwrap.dedent("""
    import sys, threading
    import torch
    import proton_ctypes as proton
    x = torch.zeros(1 << 20, device="cuda")
    big = torch.randn(2048, 2048, device="cuda")
    x.add_(1); big @ big; torch.cuda.synchronize()
    proton.start(sys.argv[1])
    for _ in range(50):
        big @ big                  # a busy queue: these still run when the scopes below are entered
    for _ in range(200):
        x.add_(1)
    with proton.scope("first"):
        for _ in range(100):
            x.mul_(1)
    def other():
        with proton.scope("other"):
            for _ in range(100):
                x.sub_(1)
    t = threading.Thread(target=other)
    t.start(); t.join()
    for _ in range(30):
        x.div_(1)
    proton.finalize()
""")


@pytest.mark.parametrize("lazy", ["1", "0"])
def test_kernels_before_the_first_scope_land_at_root_and_every_later_one_under_its_scope(tmp_path, lazy):
    out = tmp_path / "lazy"
    env = dict(os.environ, PROTON_CTYPES_LAZY_TIMESTAMPS=lazy, PYTHONPATH=ROOT)
    r = subprocess.run([sys.executable, "-c", PROGRAM, str(out)], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    with open(str(out) + ".hatchet") as f:
        root = json.load(f)[0]
    by_scope = {}
    for c in root["children"]:
        if "count" in c["metrics"]:
            by_scope["ROOT"] = by_scope.get("ROOT", 0) + int(c["metrics"]["count"])
        else:
            by_scope[c["frame"]["name"]] = sum(int(k["metrics"].get("count", 0)) for k in c["children"])
    # ROOT: 50 GEMMs (one kernel or more each), 200 adds and 30 divs; the scopes: 100 kernels each
    assert by_scope["first"] == 100 and by_scope["other"] == 100, by_scope
    assert by_scope["ROOT"] >= 50 + 200 + 30, by_scope
    assert "no launch times" not in r.stderr and "without launch times" not in r.stderr, r.stderr[-2000:]
