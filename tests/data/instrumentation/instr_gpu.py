"""GPU comparison of the instrumentation backend with real Proton: kernels, runs, comparisons.

Shared by ``tests/gpu/test_instrumentation_gpu.py`` (pytest / device script),
``tests/test_instrumentation_h200.py`` (CPU replay of the captured data) and
``bench/instrumentation.py``.  What follows is the GPU test's description.

The instrumentation backend on a GPU, compared with real Proton (triton 3.6 on the H200).

Kernels (written once, compiled twice: with ``triton.profiler.language`` for Proton and
with ``proton_ctypes.language`` for us): a tiled matmul and an attention-like loop in the
Triton DSL (scopes inside the K / KV loops, ``enable_semantic("triton")``) and a Gluon
kernel with nested scopes.  Modes: default, ``buffer_type=global`` + ``clock32``, and
selective sampling / ``time_shift`` with ``data="trace"`` (each configuration compiles
anew: Proton's hook loses a kernel's metadata path when a later session launches a kernel
loaded under an earlier one, which breaks its ``enable_host_buffer``).

Two comparisons per configuration:

* **exact**: every launch's raw profile buffer is captured under Proton
  (``InstrumentationHook.enable_host_buffer``) and decoded by proton_ctypes; the result must
  equal Proton's own output for those launches exactly (tree: names, cycles,
  normalized_cycles, device; trace: every event) -- up to what differs by design between
  3.6 and 3.9 (ROOT's zero metrics and child order in 3.6 files, the 3.9-only trace args
  ``Init Time (ns)`` / ``Post Final Time (ns)``);
* **live**: the same kernels run under proton_ctypes (their buffers captured through our
  hook's ``enable_host_buffer``); node names must be equal, and per scope the median over
  the launches of the per-launch cycles within ``LIVE_TOLERANCE`` (25 %) of Proton's
  median.  Medians, because a configuration's first launch runs cold: on the H200 the
  first launch under Proton took 3.3x the cycles of the next two in the memory-bound
  ``store`` scope of the Gluon kernel (48.8k vs 14.9k / 14.7k) and 1.9x in the matmul's
  ``load`` scope, which made sums over three launches differ by up to 0.57x between the
  profilers although the warm launches agree within 1 %.  Two runs of a kernel never
  take the same cycles (scheduling, clocks, cache state); 25 % bounds the run-to-run
  spread seen on these small kernels while still catching a wrong unit, a wrong
  normalisation or a lost warp (each at least a factor 2).

As a pytest module it needs a CUDA GPU and ``triton.profiler`` (skipped otherwise).  As a
script (``python tests/gpu/test_instrumentation_gpu.py --device-run OUT``) it runs every
configuration, writes a summary and ``instr_h200.tar.gz`` (outputs, captured buffers,
kernel layouts: the CPU tests' data) into OUT.
"""
from __future__ import annotations

import importlib.util
import json
import os
import sys
import tarfile
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

LIVE_TOLERANCE = 0.25
LAUNCHES = 3

KERNEL_SOURCE = '''
import triton
import triton.language as tl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
import {LANG} as pl

pl.enable_semantic("triton")


@triton.jit
def matmul_kernel(A, B, C, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        pl.enter_scope("load")
        a = tl.load(A + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(B + (k + rk)[:, None] * N + rn[None, :])
        pl.exit_scope("load")
        pl.enter_scope("dot")
        acc += tl.dot(a, b)
        pl.exit_scope("dot")
    with pl.scope("store"):
        tl.store(C + rm[:, None] * N + rn[None, :], acc.to(tl.float16))


@triton.jit
def attention_kernel(Q, K, V, O, N_CTX, D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    pid = tl.program_id(0)
    offs_m = pid * BM + tl.arange(0, BM)
    offs_d = tl.arange(0, D)
    q = tl.load(Q + offs_m[:, None] * D + offs_d[None, :])
    m_i = tl.full([BM], float("-inf"), tl.float32)
    l_i = tl.zeros([BM], tl.float32)
    acc = tl.zeros([BM, D], tl.float32)
    pl.enter_scope("attention")
    for start in range(0, N_CTX, BN):
        offs_n = start + tl.arange(0, BN)
        pl.enter_scope("qk")
        k = tl.load(K + offs_n[:, None] * D + offs_d[None, :])
        s = tl.dot(q, tl.trans(k))
        pl.exit_scope("qk")
        pl.enter_scope("softmax")
        m_new = tl.maximum(m_i, tl.max(s, 1))
        p = tl.exp(s - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        m_i = m_new
        pl.exit_scope("softmax")
        pl.enter_scope("pv")
        v = tl.load(V + offs_n[:, None] * D + offs_d[None, :])
        acc += tl.dot(p.to(tl.float16), v)
        pl.exit_scope("pv")
    pl.exit_scope("attention")
    tl.store(O + offs_m[:, None] * D + offs_d[None, :], (acc / l_i[:, None]).to(tl.float16))


@gluon.jit
def gluon_nested_kernel(X, N: gl.constexpr, WARPS: gl.constexpr):
    pid = gl.program_id(0)
    pl.enter_scope("outer")
    layout: gl.constexpr = gl.BlockedLayout([1], [32], [WARPS], [0])
    offs = pid * N + gl.arange(0, N, layout)
    x = gl.load(X + offs)
    pl.enter_scope("inner")
    x = x * 1.0001 + 1.0
    x = x * x + 0.5
    pl.exit_scope("inner")
    with pl.scope("store"):
        gl.store(X + offs, x)
    pl.exit_scope("outer")
'''

#: (name, kernel, mode, data)
CONFIGS = [
    ("matmul_default", "matmul", None, "tree"),
    ("attention_default", "attention", None, "tree"),
    ("gluon_default", "gluon", None, "tree"),
    ("matmul_global_clock32", "matmul", "default:buffer_type=global:optimizations=clock32", "tree"),
    ("attention_selective_trace", "attention",
     "default:sampling_strategy=selective:sampling_options=0,2:optimizations=time_shift", "trace"),
    ("gluon_trace_time_shift", "gluon", "default:optimizations=time_shift", "trace"),
]


def load_kernels(lang: str, folder: str):
    """Import the kernels written against ``lang`` (a module name) from a file in ``folder``."""
    name = "instr_kernels_" + lang.replace(".", "_")
    path = os.path.join(folder, name + ".py")
    with open(path, "w") as f:
        f.write(KERNEL_SOURCE.replace("{LANG}", lang))
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def make_inputs():
    """Device tensors of every kernel (fixed seed)."""
    import torch
    torch.manual_seed(0)
    M = N = K = 512
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = torch.empty(M, N, device="cuda", dtype=torch.float16)
    n_ctx, d = 512, 64
    q = torch.randn(n_ctx, d, device="cuda", dtype=torch.float16)
    k = torch.randn(n_ctx, d, device="cuda", dtype=torch.float16)
    v = torch.randn(n_ctx, d, device="cuda", dtype=torch.float16)
    o = torch.empty(n_ctx, d, device="cuda", dtype=torch.float16)
    x = torch.randn(16 * 512, device="cuda", dtype=torch.float32)
    return dict(a=a, b=b, c=c, M=M, N=N, K=K, q=q, k=k, v=v, o=o, n_ctx=n_ctx, d=d, x=x)


def launch(mod, kernel: str, t):
    """One launch of ``kernel``; returns the compiled kernel."""
    if kernel == "matmul":
        grid = (t["M"] // 64, t["N"] // 64)
        return mod.matmul_kernel[grid](t["a"], t["b"], t["c"], t["M"], t["N"], t["K"], BM=64, BN=64, BK=64,
                                       num_warps=4)
    if kernel == "attention":
        return mod.attention_kernel[(t["n_ctx"] // 64,)](t["q"], t["k"], t["v"], t["o"], t["n_ctx"], D=t["d"],
                                                         BM=64, BN=64, num_warps=4)
    return mod.gluon_nested_kernel[(16,)](t["x"], N=512, WARPS=4, num_warps=4)


def kernel_layout(ck) -> dict:
    """num_warps, scratch size and scope names/parents of a compiled kernel (TTGIR via libtriton)."""
    from proton_ctypes.backends.instrumentation.metadata import read_ttgir_scopes
    with tempfile.NamedTemporaryFile("w", suffix=".ttgir", delete=False) as f:
        f.write(ck.asm["ttgir"])
    names, parents = read_ttgir_scopes(f.name, "nvidia")
    return {"name": ck.name, "num_warps": ck.metadata.num_warps, "scratch": ck.metadata.profile_scratch_size,
            "names": [list(x) for x in names], "parents": [list(x) for x in parents]}


def split_host_buffer(raw: bytes):
    """3.6/3.9 ``host_buffer``: (header dict, payload bytes)."""
    import struct
    vals = struct.unpack_from("<10I", raw, 0)
    keys = ("version", "header_offset", "header_size", "payload_offset", "payload_size", "device_type",
            "block_num", "total_unit", "scratch", "uid_num")
    hdr = dict(zip(keys, vals))
    hdr["uids"] = list(struct.unpack_from(f"<{hdr['uid_num']}I", raw, 40))
    return hdr, raw[hdr["payload_offset"]:hdr["payload_offset"] + hdr["payload_size"]]


def run_proton(cfg, mod, t, folder, tag="proton"):
    """The configuration under real Proton; returns (output path, [payload bytes], layout)."""
    import torch
    import triton.profiler as tp
    from triton.profiler.hooks.instrumentation import InstrumentationHook as RealHook
    name, kernel, mode, data = cfg
    RealHook.enable_host_buffer = True
    base = os.path.join(folder, tag)
    tp.start(base, backend="instrumentation", mode=mode, data=data)
    payloads = []
    layout = None
    try:
        for _ in range(LAUNCHES):
            ck = launch(mod, kernel, t)
            torch.cuda.synchronize()
            raw = bytes(RealHook.host_buffer.numpy().tobytes())
            hdr, payload = split_host_buffer(raw)
            payloads.append(payload)
            if layout is None:
                layout = kernel_layout(ck)
                layout["host_header"] = hdr
    finally:
        tp.finalize()
        RealHook.enable_host_buffer = False
    return base + (".hatchet" if data == "tree" else ".chrome_trace"), payloads, layout


def run_ours(cfg, mod, t, folder, tag="ours"):
    """The configuration under proton_ctypes; returns (output path, per-launch seconds, [payloads])."""
    import torch
    import proton_ctypes as proton
    from proton_ctypes.hooks.instrumentation import InstrumentationHook as OurHook
    name, kernel, mode, data = cfg
    base = os.path.join(folder, tag)
    OurHook.enable_host_buffer = True
    proton.start(base, backend="instrumentation", mode=mode, data=data)
    times, payloads = [], []
    try:
        for _ in range(LAUNCHES):
            t0 = time.perf_counter()
            launch(mod, kernel, t)
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
            payloads.append(split_host_buffer(bytes(OurHook.host_buffer.numpy().tobytes()))[1])
    finally:
        proton.finalize()
        OurHook.enable_host_buffer = False
    return base + (".hatchet" if data == "tree" else ".chrome_trace"), times, payloads


def replay(folder: str, layout: dict, mode, data: str) -> str:
    """Decode captured payloads with proton_ctypes (fresh process); return the output path."""
    import instr_scenarios as scenarios
    from proton_ctypes.backends.instrumentation.modes import interpret_mode
    sc = {"mode": mode or "default", "libproton_mode": "cuda:" + str(interpret_mode(mode)), "data": data,
          "kernels": {"1": {k: layout[k] for k in ("name", "num_warps", "scratch", "names", "parents")}},
          "launches": [{"fid": 1, "buffer": f"launch{i}.bin", "cpu_scopes": []} for i in range(LAUNCHES)]}
    path = os.path.join(folder, "scenario.json")
    with open(path, "w") as f:
        json.dump(sc, f)
    out, err, _stderr = scenarios.run_ours_subprocess(path)
    if err:
        raise RuntimeError(err)
    return os.path.join(folder, "ours_out" + (".hatchet" if data == "tree" else ".chrome_trace"))


# ----------------------------------------------------------------------------------- comparisons
def _sorted_tree(node):
    return {"name": node["frame"]["name"], "metrics": node["metrics"],
            "children": sorted((_sorted_tree(c) for c in node["children"]), key=lambda c: c["name"])}


def compare_exact(proton_out: str, ours_out: str, data: str):
    """Problems (list of str) between Proton's output and ours decoded from the same buffers."""
    with open(proton_out) as f:
        a = json.load(f)
    with open(ours_out) as f:
        b = json.load(f)
    if data == "tree":
        a[0]["metrics"] = {}
        b[0]["metrics"] = {}
        ta, tb = _sorted_tree(a[0]), _sorted_tree(b[0])
        return [] if ta == tb else [f"tree differs: proton={json.dumps(ta)[:600]} ours={json.dumps(tb)[:600]}"]
    for e in b["traceEvents"]:
        e.get("args", {}).pop("Init Time (ns)", None)
        e.get("args", {}).pop("Post Final Time (ns)", None)
    if a == b:
        return []
    for i, (x, y) in enumerate(zip(a["traceEvents"], b["traceEvents"])):
        if x != y:
            return [f"trace event {i}: proton={json.dumps(x)} ours={json.dumps(y)}"]
    return [f"trace lengths {len(a['traceEvents'])} vs {len(b['traceEvents'])}"]


def _nodes(node, path=(), out=None):
    out = {} if out is None else out
    p = path + (node["frame"]["name"],)
    out[p] = node["metrics"]
    for c in node["children"]:
        _nodes(c, p, out)
    return out


def per_launch_cycles(payloads, layout, uids=None):
    """``{scope path: [cycles of launch 0, 1, ...]}`` decoded from captured buffers."""
    import numpy as np
    from proton_ctypes.backends.instrumentation.decode import decode
    from proton_ctypes.backends.instrumentation.metadata import make_info
    info = make_info(layout["name"], layout["num_warps"], layout["scratch"], layout["names"], layout["parents"])
    out = {}
    for i, raw in enumerate(payloads):
        dec = decode(np.frombuffer(raw, dtype=np.uint8), info.scratch, info.num_warps, uids, warn=lambda m: None)
        scope, start, end, _b = dec.attribution_order()
        dur = (end - start).astype(np.int64)
        for sc in np.unique(scope).tolist():
            key = "/".join(info.paths.get(sc, ()))
            out.setdefault(key, [0] * len(payloads))[i] = int(dur[scope == sc].sum())
    return out


def compare_live(proton_out: str, ours_out: str, data: str, proton_payloads, our_payloads, layout,
                 tol: float = LIVE_TOLERANCE):
    """``(problems, {scope: ratio of medians})`` between the Proton and proton_ctypes runs."""
    import statistics
    with open(proton_out) as f:
        a = json.load(f)
    with open(ours_out) as f:
        b = json.load(f)
    probs = []
    if data == "trace":
        # Events per (name, category) must match; the lanes (pid/tid) name the SM and CTA a
        # warp ran on, which the hardware scheduler picks anew in every run.
        from collections import Counter
        ka = Counter((e.get("name"), e.get("cat")) for e in a["traceEvents"])
        kb = Counter((e.get("name"), e.get("cat")) for e in b["traceEvents"])
        if ka != kb:
            diff = {k: (ka.get(k, 0), kb.get(k, 0)) for k in set(ka) | set(kb) if ka.get(k) != kb.get(k)}
            probs.append(f"trace events per (name, cat) differ (proton, ours): {sorted(diff.items(), key=str)[:6]}")
    else:
        na, nb = _nodes(a[0]), _nodes(b[0])
        if set(na) != set(nb):
            probs.append(f"node paths differ: only proton {sorted(set(na) - set(nb))}, "
                         f"only ours {sorted(set(nb) - set(na))}")
        for p in sorted(set(na) & set(nb)):
            for key in ("device_id", "device_type"):
                if na[p].get(key) != nb[p].get(key):
                    probs.append(f"{'/'.join(p)}: {key} {nb[p].get(key)} != {na[p].get(key)}")
    hdr = layout.get("host_header", {})
    uids = hdr.get("uids") if hdr.get("uid_num") != layout["num_warps"] else None
    pa = per_launch_cycles(proton_payloads, layout, uids)
    pb = per_launch_cycles(our_payloads, layout, uids)
    ratios = {}
    if set(pa) != set(pb):
        probs.append(f"scopes differ: {sorted(pa)} vs {sorted(pb)}")
    for key in sorted(set(pa) & set(pb)):
        ma, mb = statistics.median(pa[key]), statistics.median(pb[key])
        r = mb / ma if ma else float("inf")
        ratios[key] = {"ratio": round(r, 4), "proton": pa[key], "ours": pb[key]}
        if not abs(r - 1) <= tol:
            probs.append(f"{key}: median cycles {mb} vs Proton {ma} (ratio {r:.3f})")
    return probs, ratios


# ----------------------------------------------------------------------------------- device run
def device_run(out_dir: str) -> dict:
    """Every configuration on this GPU; writes the summary and the tarball into ``out_dir``."""
    import torch
    import triton
    work = tempfile.mkdtemp(prefix="instr_gpu_")
    real = load_kernels("triton.profiler.language", work)
    ours = load_kernels("proton_ctypes.language", work)
    t = make_inputs()
    summary = {"triton": triton.__version__, "torch": torch.__version__,
               "device": torch.cuda.get_device_name(0), "configs": {}}
    for cfg in CONFIGS:
        name, kernel, mode, data = cfg
        folder = os.path.join(work, name)
        os.makedirs(folder)
        res = summary["configs"][name] = {"kernel": kernel, "mode": mode, "data": data}
        try:
            t0 = time.perf_counter()
            p_out, payloads, layout = run_proton(cfg, real, t, folder)
            res["proton_s"] = round(time.perf_counter() - t0, 3)
            for i, pl in enumerate(payloads):
                with open(os.path.join(folder, f"launch{i}.bin"), "wb") as f:
                    f.write(pl)
            res["layout"] = layout
            res["buffer_bytes"] = len(payloads[0])
            r_out = replay(folder, layout, mode, data)
            res["exact_problems"] = compare_exact(p_out, r_out, data)
            t0 = time.perf_counter()
            o_out, times, our_payloads = run_ours(cfg, ours, t, folder)
            res["ours_s"] = round(time.perf_counter() - t0, 3)
            res["ours_launch_s"] = [round(x, 6) for x in times]
            probs, ratios = compare_live(p_out, o_out, data, payloads, our_payloads, layout)
            res["live_problems"] = probs
            res["live_ratios"] = ratios
        except Exception:
            res["error"] = traceback.format_exc()[-3000:]
        print(name, json.dumps({k: v for k, v in res.items() if k != "layout"})[:1500], flush=True)
    # Proton's mode-string granularity check (a Proton bug we do not copy)
    summary["proton_string_granularity_warp"] = _proton_string_granularity(real, t, work)
    with open(os.path.join(out_dir, "instr_summary.json"), "w") as f:
        json.dump(summary, f, indent=1, default=str)
    with tarfile.open(os.path.join(out_dir, "instr_h200.tar.gz"), "w:gz") as tar:
        for name, *_ in CONFIGS:
            folder = os.path.join(work, name)
            if os.path.isdir(folder):
                for fn in sorted(os.listdir(folder)):
                    if fn.endswith((".bin", ".hatchet", ".chrome_trace", ".json")):
                        tar.add(os.path.join(folder, fn), arcname=f"{name}/{fn}")
    return summary


def _proton_string_granularity(mod, t, work):
    import torch
    import triton.profiler as tp
    try:
        tp.start(os.path.join(work, "gran"), backend="instrumentation", mode="default:granularity=warp")
        try:
            launch(mod, "gluon", t)
            torch.cuda.synchronize()
        finally:
            tp.finalize()
        return "no error"
    except Exception as e:
        return f"{type(e).__name__}: {e}"


