"""Device-tensor metrics and launch metadata on a GPU (issue 7).

Triton 3.6's Proton (the GPU machine) has no tensor metrics, so values are checked
against the tensors themselves: the metric kernel must capture each value at the moment
the scope is entered, on the current stream, without a host synchronisation, including
inside CUDA graphs (each replay adds its values).
"""
import json
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA GPU", allow_module_level=True)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = r"""
import json, sys, torch, triton, triton.language as tl
import proton_ctypes as proton

@triton.jit
def add_one(x_ptr, n, BLOCK: tl.constexpr):
    off = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = off < n
    tl.store(x_ptr + off, tl.load(x_ptr + off, mask=m) + 1, mask=m)

def meta(grid, metadata, args):
    return {"name": "add_meta", "bytes": torch.tensor(4096, device="cuda"),
            "tokens": torch.tensor([1, 2], device="cuda"), "loss": torch.tensor(0.25, device="cuda")}

add_meta = triton.jit(launch_metadata=meta)(add_one.fn)
x = torch.zeros(4096, device="cuda")
add_one[(4,)](x, 4096, BLOCK=1024); add_meta[(4,)](x, 4096, BLOCK=1024); torch.cuda.synchronize()

proton.start("tm", hook="triton")
loss = torch.zeros((), device="cuda")
vec = torch.zeros(3, device="cuda", dtype=torch.int64)
for i in range(4):
    loss.fill_(0.5 * (i + 1))          # written on the stream before the metric kernel reads it
    vec += 1
    with proton.scope("step", {"loss": loss, "vec": vec, "host": 1}):
        add_one[(4,)](x, 4096, BLOCK=1024)
with proton.scope("meta"):
    add_meta[(4,)](x, 4096, BLOCK=1024)

# CUDA graph: the metric kernel is captured with the scope; each replay adds its value
g = torch.cuda.CUDAGraph()
val = torch.zeros((), device="cuda")
s = torch.cuda.Stream()
s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    with proton.scope("captured", {"g": val}):
        add_one[(4,)](x, 4096, BLOCK=1024)
    torch.cuda.synchronize()
    with torch.cuda.graph(g):
        with proton.scope("captured", {"g": val}):
            add_one[(4,)](x, 4096, BLOCK=1024)
torch.cuda.current_stream().wait_stream(s)
for r in range(3):
    val.fill_(10.0 * (r + 1))
    with proton.scope("replay"):
        g.replay()
torch.cuda.synchronize()
proton.finalize()
print(open("tm.hatchet").read())
"""


def _find(node, *names):
    for n in names:
        node = next(c for c in node["children"] if c["frame"]["name"] == n)
    return node


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    d = tmp_path_factory.mktemp("tm")
    env = dict(os.environ, PYTHONPATH=REPO, PROTON_CTYPES_GRAPH_METRICS="1")
    script = d / "tensor_metrics_scenario.py"  # @triton.jit needs a source file
    script.write_text(textwrap.dedent(SCRIPT))
    r = subprocess.run([sys.executable, str(script)], cwd=d, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-4000:]
    return json.loads(r.stdout[r.stdout.index("[\n"):])[0]


def test_scalar_and_vector_tensor_metrics_sum_their_values(tree):
    step = _find(tree, "step")
    assert step["metrics"]["loss"] == pytest.approx(0.5 + 1.0 + 1.5 + 2.0)
    assert step["metrics"]["vec"] == [10, 10, 10]
    assert step["metrics"]["host"] == 4
    assert _find(step, "add_one")["metrics"]["count"] == 4


def test_launch_metadata_tensors_become_metrics_of_the_named_kernel(tree):
    node = _find(tree, "meta", "add_meta")
    assert node["metrics"]["count"] == 1
    assert node["metrics"]["bytes"] == 4096
    assert node["metrics"]["tokens"] == [1, 2]
    assert node["metrics"]["loss"] == pytest.approx(0.25)


def test_each_graph_replay_adds_the_value_captured_metric_kernels_read(tree):
    # the eager run before capture added 0.0 at the capture-time node; as in Proton the
    # replays (10, 20 and 30) add theirs under <captured_at> of the replay (docs/graph-metrics.md)
    assert _find(tree, "captured")["metrics"]["g"] == pytest.approx(0.0)
    assert _find(tree, "replay", "<captured_at>", "captured")["metrics"]["g"] == pytest.approx(60.0)
