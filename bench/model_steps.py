"""The models of ``bench/models.py`` (and of ``bench/attribution.py`` and ``bench/api_cost.py``): each
builder returns ``(step, model)``, one training or inference step with the profiler's scopes
(``proton``: Proton's module or ours; None: the bare step), seeded so every process runs the same.

* :func:`transformer_step`: a ``torch.nn.TransformerEncoder`` training step (cuBLAS GEMMs, AdamW's
  multi-tensor kernels, autograd's own launching thread), scopes per phase and, eager, per layer;
* :func:`dynamic_step`: a polynomial fit whose degree is drawn per step, as in Proton's
  ``dynamic-net`` tutorial (our own code);
* :func:`matmul_step`: an autotuned Triton matmul with ``launch_metadata``.
"""
from __future__ import annotations

import random

TRANSFORMER = dict(layers=6, d_model=512, heads=8, ff=2048, batch=32, tokens=128)
DYNAMIC_POINTS = 2000
MATMUL_SIZE = 1024


def transformer_step(torch, proton=None, compiled=False):
    """``(step, model)``: one training step of the transformer (scopes through ``proton`` when given)."""
    torch.manual_seed(0)
    cfg = TRANSFORMER
    layer = torch.nn.TransformerEncoderLayer(cfg["d_model"], cfg["heads"], cfg["ff"], batch_first=True)
    model = torch.nn.TransformerEncoder(layer, cfg["layers"], enable_nested_tensor=False).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(cfg["batch"], cfg["tokens"], cfg["d_model"], device="cuda")
    target = torch.randn_like(x)
    run = torch.compile(model) if compiled else model
    if proton is not None and not compiled:
        for i, mod in enumerate(model.layers):
            # hooks must return None (a value would replace the layer's input / output)
            mod.register_forward_pre_hook(lambda m, a, name=f"layer{i}": None if proton.enter_scope(name) else None)
            mod.register_forward_hook(lambda m, a, out, name=f"layer{i}": None if proton.exit_scope(name) else None)

    def plain():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(run(x), target)
        loss.backward()
        opt.step()

    if proton is None:
        return plain, model
    scope = proton.scope

    def scoped():
        opt.zero_grad(set_to_none=True)
        with scope("forward"):
            out = run(x)
        with scope("loss"):
            loss = torch.nn.functional.mse_loss(out, target)
        with scope("backward"):
            loss.backward()
        with scope("optimizer"):
            opt.step()
    return scoped, model


def dynamic_step(torch, proton=None, compiled=False):
    """One step of a polynomial fit whose degree is drawn per step (seeded)."""
    torch.manual_seed(0)
    rng = random.Random(0)

    class Poly(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.coef = torch.nn.Parameter(torch.randn(6))

        def forward(self, x, degree: int):
            y = self.coef[0] + self.coef[1] * x
            for k in range(2, degree + 1):
                y = y + self.coef[k] * x ** k
            return y

    model = Poly().cuda()
    run = torch.compile(model) if compiled else model
    opt = torch.optim.SGD(model.parameters(), lr=1e-6)
    x = torch.linspace(-1.0, 1.0, DYNAMIC_POINTS, device="cuda")
    y = torch.sin(3 * x)
    scope = proton.scope if proton is not None else None

    def step():
        degree = rng.randint(3, 5)
        opt.zero_grad(set_to_none=True)
        if scope is None:
            loss = (run(x, degree) - y).pow(2).sum()
            loss.backward()
            opt.step()
            return
        with scope(f"degree{degree}"):
            with scope("forward"):
                loss = (run(x, degree) - y).pow(2).sum()
            with scope("backward"):
                loss.backward()
            with scope("optimizer"):
                opt.step()
    return step, model


def matmul_step(torch, proton=None, compiled=False):
    """A matmul of a fresh autotuned Triton kernel (autotuning happens in the first steps)."""
    import triton
    import triton.language as tl

    def metadata(grid, kernel, args):
        m, n, k = args["M"], args["N"], args["K"]
        return {"name": f"matmul_{m}x{n}x{k}", "flops16": 2.0 * m * n * k, "bytes": 2 * (m * k + k * n + m * n)}

    configs = [triton.Config({"BM": bm, "BN": bn, "BK": 64}, num_warps=w)
               for bm, bn, w in ((64, 64, 4), (128, 64, 4), (128, 128, 8))]

    @triton.autotune(configs=configs, key=["M", "N", "K"])
    @triton.jit(launch_metadata=metadata)
    def matmul(a, b, c, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        pid_m, pid_n = tl.program_id(0), tl.program_id(1)
        rm = pid_m * BM + tl.arange(0, BM)
        rn = pid_n * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k0 in range(0, K, BK):
            x = tl.load(a + rm[:, None] * K + (k0 + rk)[None, :])
            w = tl.load(b + (k0 + rk)[:, None] * N + rn[None, :])
            acc += tl.dot(x, w)
        tl.store(c + rm[:, None] * N + rn[None, :], acc.to(tl.float16))

    torch.manual_seed(0)
    n = MATMUL_SIZE
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    c = torch.empty(n, n, device="cuda", dtype=torch.float16)

    def grid(meta):
        return (n // meta["BM"], n // meta["BN"])
    scope = proton.scope if proton is not None else None

    def step():
        if scope is None:
            matmul[grid](a, b, c, n, n, n)
            return
        with scope("matmul"):
            matmul[grid](a, b, c, n, n, n)
    return step, None


MODELS = {
    "transformer": lambda torch, proton: transformer_step(torch, proton),
    "transformer_compiled": lambda torch, proton: transformer_step(torch, proton, compiled=True),
    "dynamic": lambda torch, proton: dynamic_step(torch, proton),
    "dynamic_compiled": lambda torch, proton: dynamic_step(torch, proton, compiled=True),
    "matmul": lambda torch, proton: matmul_step(torch, proton),
}
