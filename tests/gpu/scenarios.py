"""GPU scenarios run under one profiler module, writing one output file per scenario.

    python tests/gpu/scenarios.py triton.profiler OUTDIR
    python tests/gpu/scenarios.py proton_ctypes OUTDIR

The same script runs under real Proton (``triton.profiler``) and under proton_ctypes so
that ``test_gpu_vs_proton.py`` can compare the files node by node.  The first scenarios
are those of ``../shared/reference/proton-3.6.0-h200/scenarios.py`` (nested, metrics,
states, hook, pyctx, trace); the rest add threads, streams and a CUDA graph.
Each scenario runs in a fresh session; errors are written to ``OUTDIR/errors.json``.
"""
import importlib
import json
import os
import sys
import threading
import traceback

import torch
import triton
import triton.language as tl

MODULE, OUT = sys.argv[1], sys.argv[2]
if MODULE == "proton_ctypes":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
proton = importlib.import_module(MODULE)
os.makedirs(OUT, exist_ok=True)


def P(name):
    return os.path.join(OUT, name)


@triton.jit
def add_one(x_ptr, n, BLOCK: tl.constexpr):
    off = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = off < n
    tl.store(x_ptr + off, tl.load(x_ptr + off, mask=m) + 1, mask=m)


def meta(grid, metadata, args):
    return {"name": f"add_one_n{args['n']}", "bytes": args["n"] * 8, "flops32": float(args["n"])}


add_one_meta = triton.jit(launch_metadata=meta)(add_one.fn)
x = torch.zeros(4096, device="cuda")


def k(n=4096, fn=add_one):
    fn[(triton.cdiv(n, 1024),)](x, n, BLOCK=1024)


k(), k(fn=add_one_meta), x.add_(1)
torch.cuda.synchronize()
errors = {}
stats = {}


def scenario(name, fn):
    try:
        fn()
    except Exception as e:
        errors[name] = f"{type(e).__name__}: {e}"
        traceback.print_exc()
    finally:
        try:
            proton.finalize()
        except Exception as e:
            errors[name + "_finalize"] = f"{type(e).__name__}: {e}"
    if MODULE == "proton_ctypes":
        from proton_ctypes.backends import select
        backend = select._instances.get("cupti")
        if backend is not None:
            stats[name] = {key: value for key, value in backend.stats.items() if not isinstance(value, (list, dict))}


def nested():
    proton.start(P("nested"), context="shadow")
    for _ in range(3):
        with proton.scope("test0"):
            with proton.scope("test1"):
                k()
            with proton.scope("test2"):
                k()
                k()
    k()
    torch.cuda.synchronize()


def metrics():
    proton.start(P("metrics"))
    for _ in range(2):
        with proton.scope("outer", {"tokens (inc)": 128}):
            with proton.scope("inner", {"cpu_wait (ns)(exc)": 90, "flops": 1.5e9, "bytes": 1000}):
                k()
        proton.enter_scope("config", metrics={"tile_size (pty)": 128})
        k()
        proton.exit_scope()
    torch.cuda.synchronize()


def states():
    proton.start(P("states"))
    with proton.scope("iteration"):
        with proton.state("optimizer"):
            k()
            with proton.scope("sub"):
                k()
        proton.enter_state("manual")
        k()
        proton.exit_state()
        k()
    torch.cuda.synchronize()


def hook():
    proton.start(P("hook"), hook="triton")
    with proton.scope("with_meta"):
        k(fn=add_one_meta)
        k(n=2048, fn=add_one_meta)
        k()
    torch.cuda.synchronize()


def pyctx():
    proton.start(P("pyctx"), context="python")

    def inner():
        x.add_(1)
        k()
    for _ in range(2):
        inner()
    torch.cuda.synchronize()


def trace():
    proton.start(P("trace"), data="trace")
    with proton.scope("a"):
        k()
        with proton.scope("b"):
            k()
    k()
    torch.cuda.synchronize()


def threads():
    proton.start(P("threads"))

    def worker(name, count):
        with proton.scope(name):
            for _ in range(count):
                k()
                x.add_(1)
        torch.cuda.synchronize()
    workers = [threading.Thread(target=worker, args=(f"worker{i}", 5 + i)) for i in range(3)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    with proton.scope("main"):
        k()
    torch.cuda.synchronize()


def streams():
    proton.start(P("streams"))
    side = torch.cuda.Stream()
    with proton.scope("default_stream"):
        for _ in range(4):
            k()
    with proton.scope("side_stream"):
        with torch.cuda.stream(side):
            for _ in range(6):
                k()
    torch.cuda.synchronize()


def graph():
    proton.start(P("graph"))
    y = torch.zeros(4096, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        add_one[(4,)](y, 4096, BLOCK=1024)
        y.add_(1)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        with proton.scope("captured_a"):
            add_one[(4,)](y, 4096, BLOCK=1024)
        with proton.scope("captured_b"):
            y.add_(1)
    with proton.scope("replays"):
        for _ in range(5):
            g.replay()
    torch.cuda.synchronize()


for name, fn in [("nested", nested), ("metrics", metrics), ("states", states), ("hook", hook),
                 ("pyctx", pyctx), ("trace", trace), ("threads", threads), ("streams", streams),
                 ("graph", graph)]:
    scenario(name, fn)

json.dump(errors, open(P("errors.json"), "w"), indent=1)
json.dump(stats, open(P("backend_stats.json"), "w"), indent=1, default=str)
print(MODULE, "errors:", json.dumps(errors))
