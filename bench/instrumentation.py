"""Instrumentation backend: kernel slowdown and decode cost, proton_ctypes vs real Proton.

GPU (the H200, triton 3.6)::

    python bench/instrumentation.py --gpu --json bench/results/instrumentation-h200.json

* ``slowdown``: a 64x64x64-tiled fp16 matmul (1024^3, scopes ``load``/``dot`` in the K loop
  and ``store``), launched ``--launches`` times with a synchronisation after each:
  - ``kernel_us``: GPU time of one launch by do_bench -- the plain kernel (compiled with
    profiling off, so without probes), and the instrumented kernel compiled by each
    profiler, run with the launch hooks off and one fixed profile buffer (so the figure
    excludes the host-side copy and decode); ``span_us``: the instrumented launches' own
    ``globaltimer`` span (first CTA start to last CTA end), from the profile buffer;
  - ``wall_us``: launch + exit hook (copy + decode + attribution) + synchronisation;
  - ``slowdown`` = instrumented kernel_us / plain kernel_us (same passes, so Proton's and
    ours should match); ``host_overhead_us`` = wall_us - plain wall_us.
* ``decode_gpu``: one launch of the same matmul on a large grid (``--big`` x ``--big``
  output, K = 512: about 130 MiB of profile buffer at the default 8192): host time spent
  in the exit hook per MiB (wall of the instrumented launch minus the plain launch, over
  the buffer size) -- copy to the host, decode and attribution.

CPU (anywhere; no GPU)::

    python bench/instrumentation.py --cpu --json bench/results/instrumentation-cpu.json

* ``decode_cpu``: a synthetic buffer of ``--mib`` MiB (132 x ... CTAs, 8 warps, nested scopes
  in a loop) decoded and attributed by proton_ctypes, and by the real libproton (3.9
  installed here, driven host-only with the stub CUDA driver of the tests: copies are
  memcpy), seconds per MiB, median of ``--reps``.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests", "data", "instrumentation"))


# ----------------------------------------------------------------------------------- CPU decode
def synthetic_buffer(mib: float, num_warps: int = 8, buf_size: int = 16384):
    """A buffer of about ``mib`` MiB: CTAs with 3 nested scopes in a loop filling each segment."""
    import numpy as np
    from proton_ctypes.backends.instrumentation.layout import build_block, build_buffer, scratch_size
    scratch = scratch_size(num_warps, buf_size)
    nblocks = max(1, int(mib * 2 ** 20) // scratch)
    cap = buf_size // num_warps // 8
    iters = cap // 6
    warps = {}
    for w in range(num_warps):
        ents, c = [], 1_000_000 + 17 * w
        for _ in range(iters):
            ents += [(0, 0, c), (0, 1, c + 5), (1, 1, c + 40 + w), (0, 2, c + 50), (1, 2, c + 90), (1, 0, c + 99)]
            c += 120
        warps[w] = ents
    one = build_block(0, 0, num_warps, buf_size, warps, scratch=scratch)
    raw = bytearray(one * nblocks)
    arr = np.frombuffer(raw, dtype=np.uint8).copy()
    v = arr.reshape(nblocks, scratch).view("<u4")
    v[:, 1] = np.arange(nblocks, dtype=np.uint32)
    v[:, 2] = np.arange(nblocks, dtype=np.uint32) % 132
    _ = build_buffer
    names = [[0, "outer"], [1, "a"], [2, "b"]]
    parents = [[1, 0], [2, 0]]
    return arr, scratch, num_warps, names, parents


def bench_ours_cpu(arr, scratch, num_warps, names, parents, reps):
    """Seconds to decode + attribute ``arr`` into a tree session (median of ``reps``)."""
    import warnings
    warnings.simplefilter("ignore")
    import triton
    import instr_scenarios as scenarios
    triton.runtime.driver.set_active(scenarios.fake_driver())
    import proton_ctypes as proton
    from proton_ctypes.core.threads import thread_ctx
    from proton_ctypes.core.instrumentation import record_launch
    from proton_ctypes.backends.instrumentation.decode import decode
    from proton_ctypes.backends.instrumentation.metadata import make_info
    from proton_ctypes.backends.instrumentation.modes import interpret_mode
    info = make_info("kern", num_warps, scratch, names, parents)
    mode = interpret_mode(None)
    dec_t, full_t = [], []
    d = tempfile.mkdtemp()
    for _ in range(reps):
        t0 = time.perf_counter()
        decode(arr, scratch, num_warps)
        dec_t.append(time.perf_counter() - t0)
        proton.start(os.path.join(d, "b"), backend="instrumentation")
        t0 = time.perf_counter()
        record_launch(thread_ctx(), info, arr, 0, "CUDA", mode)
        full_t.append(time.perf_counter() - t0)
        proton.finalize()
    return statistics.median(dec_t), statistics.median(full_t)


_LIBPROTON_TIMER = r'''
import ctypes, json, os, statistics, sys, time
import numpy as np
stub, buf_path, meta_path, reps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
os.environ["TRITON_CUPTI_LIB_PATH"] = stub
ctypes.CDLL(os.path.join(stub, "libcuda.so.1"), mode=ctypes.RTLD_GLOBAL)
import triton
from triton.backends.compiler import GPUTarget
class D:
    def get_current_target(self): return GPUTarget("cuda", 90, 32)
    def get_current_device(self): return 0
    def get_current_stream(self, device=None): return 0
triton.runtime.driver.set_active(D())
from triton._C.libproton import proton as lp
meta = json.load(open(meta_path))
buf = np.fromfile(buf_path, dtype=np.uint8)
times = []
for i in range(reps):
    sid = lp.start(os.path.join(os.path.dirname(buf_path), f"lp{i}"), "shadow", "tree", "instrumentation", "cuda:" + meta["mode"])
    if i == 0:
        lp.init_function_metadata(77, "kern", [tuple(x) for x in meta["names"]], [tuple(x) for x in meta["parents"]], meta_path)
    lp.enter_instrumented_op(0, 77, buf.ctypes.data, buf.nbytes)
    t0 = time.perf_counter()
    lp.exit_instrumented_op(0, 77, buf.ctypes.data, buf.nbytes)
    times.append(time.perf_counter() - t0)
    lp.finalize(sid, "hatchet")
print(json.dumps({"median_s": statistics.median(times)}))
'''


def bench_libproton_cpu(arr, scratch, num_warps, names, parents, reps, python=None):
    """Seconds of libproton's ``exit_instrumented_op`` on ``arr`` (copy = memcpy; parse; attribute)."""
    import instr_scenarios as scenarios
    from proton_ctypes.backends.instrumentation.modes import interpret_mode
    stub = scenarios.build_stubs()
    d = tempfile.mkdtemp()
    buf_path = os.path.join(d, "buf.bin")
    arr.tofile(buf_path)
    meta = os.path.join(d, "meta.json")
    with open(meta, "w") as f:
        json.dump({"num_warps": num_warps, "profile_scratch_size": scratch, "names": names, "parents": parents,
                   "mode": str(interpret_mode(None))}, f)
    script = os.path.join(d, "timer.py")
    with open(script, "w") as f:
        f.write(_LIBPROTON_TIMER)
    r = subprocess.run([python or sys.executable, script, stub, buf_path, meta, str(reps)], capture_output=True,
                       text=True, timeout=600)
    if r.returncode != 0:
        raise RuntimeError(r.stderr[-2000:])
    return json.loads(r.stdout.strip().splitlines()[-1])["median_s"]


def run_cpu(args):
    import triton
    arr, scratch, nw, names, parents = synthetic_buffer(args.mib)
    mib = arr.nbytes / 2 ** 20
    dec, full = bench_ours_cpu(arr, scratch, nw, names, parents, args.reps)
    lp = bench_libproton_cpu(arr, scratch, nw, names, parents, args.reps)
    out = {"buffer_mib": round(mib, 2), "blocks": arr.nbytes // scratch, "warps": nw,
           "events": None, "triton": triton.__version__,
           "ours_decode_s_per_mib": dec / mib, "ours_decode_attribute_s_per_mib": full / mib,
           "libproton_exit_s_per_mib": lp / mib, "ratio_ours_to_libproton": (full / mib) / (lp / mib)}
    if args.python36:
        try:
            out["libproton36_exit_s_per_mib"] = bench_libproton_cpu(arr, scratch, nw, names, parents, args.reps,
                                                                    python=args.python36) / mib
        except Exception as e:  # pragma: no cover - optional
            out["libproton36_error"] = str(e)[-300:]
    from proton_ctypes.backends.instrumentation.decode import decode
    out["events"] = decode(arr, scratch, nw).num_events
    return {"decode_cpu": out}


# ----------------------------------------------------------------------------------- GPU
def _span_us(buf_tensor, scratch):
    """GPU time of a launch from its buffer: last CTA's post-final minus first CTA's init (us)."""
    a = buf_tensor.cpu().numpy()
    nb = len(a) // scratch
    v = a[:nb * scratch].reshape(nb, scratch)
    init = v[:, 16:24].copy().view("<u8").ravel()
    post = v[:, 32:40].copy().view("<u8").ravel()
    ok = v[:, 0:4].copy().view("<u4").ravel() == 0xDEADBEEF
    return float(post[ok].max() - init[ok].min()) / 1000.0


def run_gpu(args):
    import torch
    import triton
    import instr_gpu as G
    from triton.testing import do_bench
    work = tempfile.mkdtemp(prefix="instr_bench_")
    real = G.load_kernels("triton.profiler.language", work)
    ours = G.load_kernels("proton_ctypes.language", work)

    def inputs(n, k=None):
        k = n if k is None else k
        a = torch.randn(n, k, device="cuda", dtype=torch.float16)
        b = torch.randn(k, n, device="cuda", dtype=torch.float16)
        c = torch.empty(n, n, device="cuda", dtype=torch.float16)
        return a, b, c

    def go(mod, n, abc):
        a, b, c = abc
        k = a.shape[1]
        return mod.matmul_kernel[(n // 64, n // 64)](a, b, c, n, n, k, BM=64, BN=64, BK=64, num_warps=4)

    n = args.n
    abc = inputs(n)
    res = {"triton": triton.__version__, "torch": torch.__version__, "device": torch.cuda.get_device_name(0),
           "matmul_n": n, "launches": args.launches}

    def walls(mod, count):
        ws = []
        for _ in range(count):
            t0 = time.perf_counter()
            go(mod, n, abc)
            torch.cuda.synchronize()
            ws.append((time.perf_counter() - t0) * 1e6)
        return ws

    def hookless_kernel_us(mod, scratch):
        """do_bench of the compiled kernel with the launch hooks off and one fixed profile buffer."""
        from triton import knobs
        from triton.runtime import _allocation
        fixed = torch.zeros((n // 64) ** 2 * max(scratch, 1) + 128, dtype=torch.uint8, device="cuda")
        chains = (knobs.runtime.launch_enter_hook, knobs.runtime.launch_exit_hook)
        saved = [list(c.calls) for c in chains]
        prev = _allocation._profile_allocator.get()
        for c in chains:
            c.calls.clear()
        _allocation.set_profile_allocator(lambda size, align, stream: fixed)
        try:
            return do_bench(lambda: go(mod, n, abc), warmup=25, rep=200) * 1000.0
        finally:
            for c, calls in zip(chains, saved):
                c.calls[:] = calls
            _allocation.set_profile_allocator(prev)

    # plain kernel (no profiler: the pl calls emit nothing)
    go(ours, n, abc)
    torch.cuda.synchronize()
    plain_kernel = do_bench(lambda: go(ours, n, abc), warmup=25, rep=200) * 1000.0
    plain_wall = statistics.median(walls(ours, args.launches))
    res["plain"] = {"kernel_us": plain_kernel, "wall_us": plain_wall}

    import triton.profiler as tp
    from triton.profiler.hooks.instrumentation import InstrumentationHook as RealHook
    import proton_ctypes as proton
    from proton_ctypes.hooks.hook import HookManager
    from proton_ctypes.hooks.instrumentation import InstrumentationHook as OurHook

    def measure(which):
        if which == "proton":
            tp.start(os.path.join(work, "p"), backend="instrumentation")
            mod = real
        else:
            proton.start(os.path.join(work, "o"), backend="instrumentation")
            mod = ours
        try:
            ck = go(mod, n, abc)  # compile + warm
            torch.cuda.synchronize()
            scratch = ck.metadata.profile_scratch_size
            kernel_bench = hookless_kernel_us(mod, scratch)
            ws, spans = [], []
            for _ in range(args.launches):
                t0 = time.perf_counter()
                go(mod, n, abc)
                torch.cuda.synchronize()
                ws.append((time.perf_counter() - t0) * 1e6)
                if which == "proton":
                    hook = next(h for h in tp.hooks.HookManager.active_hooks if isinstance(h, RealHook))
                    spans.append(_span_us(hook.buffer, scratch))
                else:
                    hook = next(h for h in HookManager.active_hooks if isinstance(h, OurHook))
                    spans.append(_span_us(hook.buffer, scratch))
            # the big launch: host time of the exit hook per MiB
            big = args.big
            big_abc = inputs(big, 512)
            go(mod, big, big_abc)
            torch.cuda.synchronize()
            bw = []
            for _ in range(3):
                t0 = time.perf_counter()
                go(mod, big, big_abc)
                torch.cuda.synchronize()
                bw.append(time.perf_counter() - t0)
            nbytes = (big // 64) ** 2 * scratch
        finally:
            if which == "proton":
                tp.finalize()
            else:
                proton.finalize()
        return {"kernel_us": kernel_bench, "span_us": statistics.median(spans), "wall_us": statistics.median(ws),
                "big_wall_s": statistics.median(bw), "big_buffer_mib": nbytes / 2 ** 20}

    out = {}
    for which in ("proton", "ours"):
        out[which] = measure(which)
    # plain wall of the big launch
    big_abc = inputs(args.big, 512)
    go(ours, args.big, big_abc)
    torch.cuda.synchronize()
    pb = []
    for _ in range(3):
        t0 = time.perf_counter()
        go(ours, args.big, big_abc)
        torch.cuda.synchronize()
        pb.append(time.perf_counter() - t0)
    plain_big = statistics.median(pb)
    for which, m in out.items():
        m["slowdown"] = m["kernel_us"] / plain_kernel
        m["host_overhead_us"] = m["wall_us"] - plain_wall
        m["exit_s_per_mib"] = (m["big_wall_s"] - plain_big) / m["big_buffer_mib"]
    res.update(out)
    res["plain_big_wall_s"] = plain_big
    res["ours_vs_proton"] = {"slowdown_ratio": out["ours"]["slowdown"] / out["proton"]["slowdown"],
                             "exit_per_mib_ratio": out["ours"]["exit_s_per_mib"] / out["proton"]["exit_s_per_mib"],
                             "wall_ratio": out["ours"]["wall_us"] / out["proton"]["wall_us"]}
    return {"gpu": res}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpu", action="store_true")
    ap.add_argument("--cpu", action="store_true")
    ap.add_argument("--json", default=None)
    ap.add_argument("--mib", type=float, default=32.0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--big", type=int, default=8192)
    ap.add_argument("--launches", type=int, default=20)
    ap.add_argument("--python36", default=None, help="an interpreter with triton 3.6 for its libproton (CPU)")
    args = ap.parse_args()
    out = {}
    if args.cpu:
        out.update(run_cpu(args))
    if args.gpu:
        out.update(run_gpu(args))
    text = json.dumps(out, indent=1)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
