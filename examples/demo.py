"""The bundled example: profile a small workload and print the call-path tree.

With a CUDA GPU (triton + torch present) it launches Triton kernels inside scopes and
states under the CUPTI backend and prints ``proton-viewer -m time/us,count``; without
one it runs the same structure on the host-only backend (scopes, states, metrics,
``cpu_timed_scope``) and prints the tree with every metric.

Run: ``python examples/demo.py [output-name]``
"""
import json
import os
import sys
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import proton_ctypes as proton  # noqa: E402


def gpu_workload():
    """A tiny Triton kernel, or None when no GPU can run it."""
    try:
        import torch
        import triton
        import triton.language as tl
        if not torch.cuda.is_available():
            return None
    except Exception:
        return None

    @triton.jit
    def add_one(x_ptr, n, BLOCK: tl.constexpr):
        off = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        m = off < n
        tl.store(x_ptr + off, tl.load(x_ptr + off, mask=m) + 1, mask=m)

    x = torch.zeros(4096, device="cuda")

    def launch():
        add_one[(4,)](x, 4096, BLOCK=1024)
    launch()
    torch.cuda.synchronize()
    return launch


def workload(launch):
    """Scopes, a state, metrics and a cpu-timed scope around the kernels."""
    for step in range(3):
        with proton.scope("step", {"tokens (inc)": 128}):
            with proton.cpu_timed_scope("preprocess"):
                time.sleep(0.001)
            with proton.scope("forward", {"flops": 2.0e6, "bytes": 32768}):
                if launch:
                    launch()
            with proton.state("optimizer"):
                with proton.scope("update"):
                    if launch:
                        launch()


def print_tree(node, indent=""):
    """Print a hatchet tree with every metric of every node."""
    metrics = ", ".join(f"{k}={v}" for k, v in sorted(node["metrics"].items()))
    print(f"{indent}{node['frame']['name']}" + (f"  [{metrics}]" if metrics else ""))
    for c in node["children"]:
        print_tree(c, indent + "  ")


def main():
    name = sys.argv[1] if len(sys.argv) > 1 else "demo"
    launch = gpu_workload()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        proton.start(name, backend=None if launch else "host")
    workload(launch)
    if launch:
        import torch
        torch.cuda.synchronize()
    proton.finalize()
    print(f"wrote {name}.hatchet ({'CUPTI, GPU kernels' if launch else 'host-only backend, no GPU'})")
    if launch:
        from proton_ctypes.viewer import main as viewer
        sys.argv = ["proton-viewer", "-m", "time/us,count", f"{name}.hatchet"]
        viewer()
    else:
        tree, _devices = json.load(open(f"{name}.hatchet"))
        print_tree(tree)


if __name__ == "__main__":
    main()
