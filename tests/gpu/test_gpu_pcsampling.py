"""``mode="pcsampling"``: real Proton (``triton.profiler``) and proton_ctypes on the same kernels.

Two torch kernels in a scope (fills: cubins without line info) and, many times, a Triton
matmul (512x512, fp16) and an attention-like kernel (softmax(QK^T)V over 512
rows, one program per 64-row block) run under ``backend="cupti", mode="pcsampling"``,
once per profiler, each in its own process (this file is also the child script:
``python test_gpu_pcsampling.py <module> <out dir>``).  Both hatchet files are compared:

* kernel nodes (nodes with a ``count``): the same names;
* frame nodes (``<dir>/<file>:<line>@<function>`` under a kernel): sampling is
  statistical, so a line that received few samples in one run may get none in the
  other.  Rule: every frame holding at least 2 % of its kernel's samples in one run
  must exist in the other run; rarer frames may differ;
* the metric names at frame nodes: the same set (Proton's 20 PCSamplingMetric values);
* total ``num_samples`` per kernel (kernel node plus its frames): within a factor
  covering sampling noise and run-to-run clock/occupancy variation: ``|ours - theirs|
  <= 0.5 * max(ours, theirs) + 64``.  Both runs sample every 2**10 cycles over the same
  launches, so the expected totals are equal; per launch the sample count varies with
  the kernel's duration (clock boosts, L2 warmth) and with which SM sub-partitions the
  sampler hits, so individual totals easily differ by tens of percent on small kernels.

Writes only under a temporary directory, plus one JSON line to
``$PROTON_CTYPES_GPU_REPORT`` when that is set.  Skipped without a CUDA GPU.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import time

FRAME = re.compile(r".+:\d+@.+")
FRAME_SHARE = 0.02
CHILD_TIMEOUT_S = 100
LAUNCHES = 20
#: the child's third argument: first a session tracing concurrent kernels (as Proton's suite runs
#: before its test_pcsampling), then fills of this many elements (a kernel far shorter than its
#: launch call)
AFTER_SESSION = "after_session"
TINY_FILL = 1024
#: the sampling mode of that variant: at Proton's default period (2**10 cycles) such a fill gets a
#: sample only by chance (probe_pc_tiny.py, H100: none in 6 of 12 sessions under proton_ctypes, 4 of
#: 12 under Proton 3.9); at 256 cycles it got samples in 12 of 12, so a fill without any there is
#: a range that missed its kernel, not bad luck
AFTER_SESSION_MODE = "pcsampling:interval=256"


# ====================================================================== the child: kernels under one profiler
def _child(module: str, out: str, variant: str = "") -> None:
    import importlib

    import torch
    import triton
    import triton.language as tl

    proton = importlib.import_module(module)

    @triton.jit
    def matmul_kernel(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        pm, pn = tl.program_id(0), tl.program_id(1)
        rm = pm * BM + tl.arange(0, BM)
        rn = pn * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, K, BK):
            x = tl.load(a + rm[:, None] * K + (k + rk)[None, :])
            y = tl.load(b + (k + rk)[:, None] * N + rn[None, :])
            acc += tl.dot(x, y)
        tl.store(c + rm[:, None] * N + rn[None, :], acc.to(tl.float16))

    @triton.jit
    def attention_kernel(q, k, v, o, L, D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
        pid = tl.program_id(0)
        rm = pid * BM + tl.arange(0, BM)
        rd = tl.arange(0, D)
        qb = tl.load(q + rm[:, None] * D + rd[None, :])
        m_i = tl.full((BM,), float("-inf"), tl.float32)
        l_i = tl.zeros((BM,), tl.float32)
        acc = tl.zeros((BM, D), tl.float32)
        for start in range(0, L, BN):
            rn = start + tl.arange(0, BN)
            kb = tl.load(k + rn[:, None] * D + rd[None, :])
            s = tl.dot(qb, tl.trans(kb)) * 0.125
            m_new = tl.maximum(m_i, tl.max(s, 1))
            p = tl.exp(s - m_new[:, None])
            alpha = tl.exp(m_i - m_new)
            l_i = l_i * alpha + tl.sum(p, 1)
            vb = tl.load(v + rn[:, None] * D + rd[None, :])
            acc = acc * alpha[:, None] + tl.dot(p.to(tl.float16), vb)
            m_i = m_new
        tl.store(o + rm[:, None] * D + rd[None, :], (acc / l_i[:, None]).to(tl.float16))

    n, d = 512, 64
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    c = torch.empty(n, n, device="cuda", dtype=torch.float16)
    q, k, v = (torch.randn(n, d, device="cuda", dtype=torch.float16) for _ in range(3))
    o = torch.empty(n, d, device="cuda", dtype=torch.float16)
    torch.cuda.synchronize()
    os.makedirs(out, exist_ok=True)
    fill = 1 << 20
    if variant == AFTER_SESSION:
        proton.start(os.path.join(out, "earlier"))
        torch.ones((fill,), device="cuda").add_(1)
        proton.finalize()
        fill = TINY_FILL
    mode = AFTER_SESSION_MODE if variant == AFTER_SESSION else "pcsampling"
    proton.start(os.path.join(out, "pcsampling"), backend="cupti", mode=mode)
    with proton.scope("init"):       # torch kernels: cubins without line info, samples on the kernel node
        x = torch.ones((fill,), device="cuda", dtype=torch.float32)
        torch.zeros_like(x)
    for _ in range(LAUNCHES):        # the first launch compiles and loads the modules while profiling
        matmul_kernel[(n // 64, n // 64)](a, b, c, n, n, n, BM=64, BN=64, BK=32)
        attention_kernel[(n // 64,)](q, k, v, o, n, D=d, BM=64, BN=64)
    torch.cuda.synchronize()
    proton.finalize()


# ====================================================================== the comparison
def _kernels(node, out=None):
    """``{kernel name: kernel node}`` of every node with a ``count`` metric."""
    out = {} if out is None else out
    for child in node.get("children", []):
        if "count" in child.get("metrics", {}):
            out[child["frame"]["name"]] = child
        _kernels(child, out)
    return out


def _frames(kernel):
    """``{frame name: metrics}`` of the source-line frames below a kernel node."""
    found = {}
    stack = list(kernel.get("children", []))
    while stack:
        node = stack.pop()
        if FRAME.match(node["frame"]["name"]):
            found[node["frame"]["name"]] = node["metrics"]
        stack.extend(node.get("children", []))
    return found


def _total(kernel):
    return kernel["metrics"].get("num_samples", 0) + sum(m.get("num_samples", 0) for m in _frames(kernel).values())


def _sample_nodes_without_kernel(node, under_kernel=False, path=""):
    """Names of the nodes holding ``num_samples`` with no ``count`` node on their path."""
    found = []
    for child in node.get("children", []):
        name, metrics = child["frame"]["name"], child.get("metrics", {})
        kernel = under_kernel or "count" in metrics
        if "num_samples" in metrics and not kernel:
            found.append(f"{path}/{name}")
        found.extend(_sample_nodes_without_kernel(child, kernel, f"{path}/{name}"))
    return found


def compare(ours, theirs) -> tuple:
    """``(problems, summary)`` for two hatchet trees (ROOT dicts)."""
    problems, summary = [], {}
    k_ours, k_theirs = _kernels(ours), _kernels(theirs)
    strays = sorted(set(_sample_nodes_without_kernel(ours)) - set(_sample_nodes_without_kernel(theirs)))
    if strays:
        problems.append(f"ours: PC samples on nodes that are not (below) a kernel node: {strays[:5]}")
    if set(k_ours) != set(k_theirs):
        problems.append(f"kernel nodes {sorted(k_ours)} != Proton's {sorted(k_theirs)}")
    for name in sorted(set(k_ours) & set(k_theirs)):
        f_ours, f_theirs = _frames(k_ours[name]), _frames(k_theirs[name])
        t_ours, t_theirs = _total(k_ours[name]), _total(k_theirs[name])
        for frames, other, who, total in ((f_ours, f_theirs, "ours", t_ours), (f_theirs, f_ours, "Proton's", t_theirs)):
            for frame, metrics in frames.items():
                if frame not in other and metrics.get("num_samples", 0) >= FRAME_SHARE * max(1, total):
                    problems.append(f"{name}: frame {frame} ({metrics.get('num_samples')} of {total} samples "
                                    f"in {who} run) missing in the other run")
        keys_ours = set().union(*(set(m) for m in f_ours.values())) if f_ours else set()
        keys_theirs = set().union(*(set(m) for m in f_theirs.values())) if f_theirs else set()
        if keys_ours != keys_theirs:
            problems.append(f"{name}: stall-reason metric names {sorted(keys_ours ^ keys_theirs)} differ")
        if not f_theirs and not f_ours and t_theirs == 0:
            problems.append(f"{name}: Proton recorded no PC samples at all (sampling not working here?)")
        if t_theirs > 0 and t_ours == 0:
            problems.append(f"{name}: no PC samples on or under our kernel node (Proton's: {t_theirs})")
        if abs(t_ours - t_theirs) > 0.5 * max(t_ours, t_theirs) + 64:
            problems.append(f"{name}: total samples {t_ours} vs Proton's {t_theirs}")
        summary[name] = {"frames_ours": len(f_ours), "frames_proton": len(f_theirs),
                         "common_frames": len(set(f_ours) & set(f_theirs)),
                         "samples_ours": t_ours, "samples_proton": t_theirs,
                         "metric_names": len(keys_ours)}
    return problems, summary


def _run_child(module: str, out: str, variant: str = "") -> dict:
    t0 = time.time()
    try:
        run = subprocess.run([sys.executable, os.path.abspath(__file__), module, out, variant],
                             capture_output=True, text=True, timeout=CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"{module} under pcsampling did not finish within {CHILD_TIMEOUT_S} s")
    assert run.returncode == 0, f"{module} under pcsampling failed (rc {run.returncode}):\n{run.stderr[-3000:]}"
    path = os.path.join(out, "pcsampling.hatchet")
    assert os.path.exists(path), f"{module} wrote no {path}; stderr:\n{run.stderr[-2000:]}"
    with open(path) as f:
        return {"tree": json.load(f)[0], "seconds": round(time.time() - t0, 1), "stderr": run.stderr[-1500:]}


def test_pcsampling_matches_real_proton():
    import pytest
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    pytest.importorskip("triton.profiler")
    with tempfile.TemporaryDirectory(prefix="pcsampling_") as tmp:
        theirs = _run_child("triton.profiler", os.path.join(tmp, "proton"))
        ours = _run_child("proton_ctypes", os.path.join(tmp, "ours"))
        problems, summary = compare(ours["tree"], theirs["tree"])
    summary = {"test": "pcsampling", "ok": not problems, "kernels": summary, "problems": problems[:20],
               "seconds": {"proton": theirs["seconds"], "proton_ctypes": ours["seconds"]}}
    print(json.dumps(summary, indent=1))
    report = os.environ.get("PROTON_CTYPES_GPU_REPORT")
    if report:
        with open(report, "a") as f:
            f.write(json.dumps(summary) + "\n")
    assert not problems, "\n".join(problems[:30]) + f"\nProton stderr tail:\n{theirs['stderr']}" \
                                                   f"\nproton_ctypes stderr tail:\n{ours['stderr']}"


def test_a_tiny_kernel_after_an_earlier_session_gets_its_samples():
    """Proton's test_pcsampling in its suite: a 1024-element torch fill, launched in a pcsampling
    session after sessions that traced concurrent kernels, must get samples on its own node (on the
    H100 it got none while each range stopped at its launch's return).  Sampled every 256 cycles
    (:data:`AFTER_SESSION_MODE`): at Proton's default period a sample there is chance."""
    import pytest
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    with tempfile.TemporaryDirectory(prefix="pcsampling_") as tmp:
        ours = _run_child("proton_ctypes", os.path.join(tmp, "ours"), AFTER_SESSION)
    init = next(c for c in ours["tree"]["children"] if c["frame"]["name"] == "init")
    fills = {k["frame"]["name"]: _total(k) for k in _kernels(init).values()}
    assert fills and all(n > 0 for n in fills.values()), f"samples per fill kernel: {fills}"


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    _child(*sys.argv[1:4])
