"""Random Proton-like tree profiles for the viewer tests (deterministic for a given seed).

A generated profile looks like what Proton writes: ROOT (with the zero metrics of 3.6 files, or ``{}`` as
3.9 writes without kernels), scopes with flexible metrics (``tile_size``, ``tokens (inc)``,
``cpu_time (ns)``...), state nodes, kernels with ``count``/``time (ns)``/``device_id``/``device_type`` and
launch metadata (``bytes``, ``flops<w>``), launch-metadata frames (removed by the viewer), empty frames,
python-context frame names (``/path/file.py:12@func``), ``null`` values, negative bytes, zero times, wide
nodes (≥ 8 children, so float sums take numpy's pairwise path) and repeated kernel names (sort ties).
"""

import json
import random

METADATA = "__proton_launch_metadata"
KERNELS = ["add_one", "matmul_kernel", "softmax", "_ZN2at6native29vectorized_elementwise_kernelILi4E",
           "attention_fwd", "layernorm", "gemm_" + "x" * 110]
SCOPES = ["forward", "backward", "layer0", "layer1", "optimizer", "step", "attn", "mlp", "test0", "test1"]
STATES = ["inner_state", "warmup", "steady"]
PY_FRAMES = ["/home/u/model.py:{}@forward", "/usr/lib/python3/site.py:{}@<module>", "train.py:{}@step",
             "/opt/triton/jit.py:{}@run"]
DEVICE = {"CUDA": {"arch": "90", "bus_width": 6016, "clock_rate": 1980000, "memory_clock_rate": 3201000,
                   "num_sms": 132}}
ARCHS = {"CUDA": ["80", "89", "90", "100"], "HIP": ["gfx90a", "gfx942", "gfx950"]}


def node(name, metrics=None, children=None):
    """One node dict in Proton's layout."""
    return {"children": children or [], "frame": {"name": name, "type": "function"}, "metrics": metrics or {}}


class _Gen:
    def __init__(self, seed, style):
        self.r = random.Random(seed)
        self.style = style  # "v36", "v39" (ROOT {}), "kernels" (kernel-only tree)
        self.devices = ["0"] if self.r.random() < 0.6 else ["0", "1"]
        self.device_type = "CUDA" if self.r.random() < 0.85 else "HIP"
        self.widths = self.r.sample([8, 16, 32, 64], self.r.randint(0, 2))
        self.with_bytes = self.r.random() < 0.6
        self.with_flops = self.r.random() < 0.3
        self.float_flops = self.r.random() < 0.7
        self.nulls = self.r.random() < 0.15
        self.py_names = self.r.random() < 0.3
        self.tied = self.r.random() < 0.25  # few distinct values: many ties in --print-sorted

    def value(self, low, high, integer=True):
        if self.nulls and self.r.random() < 0.05:
            return None
        if self.tied and low >= 0:
            return self.r.choice([low, high, (low + high) // 2]) if integer else float(high)
        v = self.r.randint(low, high)
        return v if integer else v * self.r.choice([1.0, 0.5, 1.37, 1e-3, 1e6 / 3])

    def kernel(self, name):
        r = self.r
        m = {"count": r.randint(1, 20), "time (ns)": self.value(0 if r.random() < 0.03 else 500, 100000),
             "device_id": r.choice(self.devices), "device_type": self.device_type}
        if self.with_bytes and r.random() < 0.7:
            m["bytes"] = self.value(-10**6, -1) if r.random() < 0.05 else self.value(0, 10**7)
        for w in self.widths:
            if r.random() < 0.7:
                m[f"flops{w}"] = self.value(0, 10**9, integer=not self.float_flops)
        if self.with_flops and r.random() < 0.5:
            m["flops"] = float(r.randint(0, 10**9))
        return node(name, dict(sorted(m.items())))

    def scope_name(self, depth):
        if self.py_names and self.r.random() < 0.6:
            return self.r.choice(PY_FRAMES).format(self.r.randint(1, 400))
        return self.r.choice(SCOPES) + (str(depth) if self.r.random() < 0.3 else "")

    def scope_metrics(self):
        r, m = self.r, {}
        if r.random() < 0.2:
            m["tile_size"] = r.choice([64, 128, 256])
        if r.random() < 0.15:
            m["tokens (inc)"] = self.value(1, 4096)
        if r.random() < 0.2:
            m["cpu_time (ns)"] = self.value(1000, 10**8)
        if r.random() < 0.1:
            m["cpu_wait (ns)"] = self.value(10, 1000)
        if r.random() < 0.05:
            m["ratio"] = r.random()
        if r.random() < 0.02:
            m["vec"] = [r.randint(0, 9), r.randint(0, 9)]
        return dict(sorted(m.items()))

    def subtree(self, depth, max_depth):
        r = self.r
        width = r.choice([1, 2, 3, 4]) if r.random() < 0.85 else r.randint(8, 12)
        names, kids = set(), []
        for _ in range(width):
            kind = r.random()
            if depth >= max_depth or kind < 0.45:
                name = r.choice(KERNELS)
                if name in names:
                    continue
                kid = self.kernel(name)
                if r.random() < 0.15:  # launch metadata frame under the kernel's scope
                    meta = METADATA if r.random() < 0.5 else f"{METADATA}:{name}"
                    if meta not in names:
                        names.add(meta)
                        kids.append(node(meta, {"flops": 1.0e6, "bytes": 10}))
            elif kind < 0.55:
                name = r.choice(STATES)
                if name in names:
                    continue
                kid = node(name, {}, [self.kernel(r.choice(KERNELS))])
            elif kind < 0.6:
                name = "empty_" + str(r.randint(0, 99))
                if name in names:
                    continue
                kid = node(name, {}, [])  # dropped by the viewer
                if r.random() < 0.5:
                    kid["children"] = [node(f"{METADATA}:k", {"flops": 5.0})]  # dropped with its parent
            else:
                name = self.scope_name(depth)
                if name in names:
                    continue
                kid = node(name, self.scope_metrics(), self.subtree(depth + 1, max_depth))
            names.add(name)
            kids.append(kid)
        return kids

    def root_metrics(self, children):
        keys = set()
        stack = list(children)
        while stack:
            n = stack.pop()
            if not n["frame"]["name"].startswith(METADATA):
                keys.update(k for k in n["metrics"] if k not in ("device_id", "device_type", "cpu_wait (ns)",
                                                                  "cpu_time (ns)", "ratio", "vec"))
            stack.extend(n["children"])
        if self.style == "v39":
            return {}
        return {k: 0 for k in sorted(keys)}

    def document(self):
        r = self.r
        if self.style == "kernels":
            children = [self.kernel(k) for k in r.sample(KERNELS, r.randint(1, 5))]
        else:
            children = self.subtree(1, r.randint(1, 5))
            if not children:
                children = [self.kernel("add_one")]
        root = node("ROOT", self.root_metrics(children), children)
        info = {}
        for dev in self.devices:
            d = dict(DEVICE["CUDA"])
            d["arch"] = r.choice(ARCHS[self.device_type]) if r.random() < 0.5 else (
                "90" if self.device_type == "CUDA" else "gfx942")
            info.setdefault(self.device_type, {})[dev] = d
        if r.random() < 0.1:
            return [root]
        return [root, info if r.random() < 0.9 else {}]


def generate(seed):
    """Return a random profile document ``[root, device_info]`` for ``seed``."""
    styles = ["v36"] * 6 + ["v39", "kernels"]
    return _Gen(seed, random.Random(seed * 7919 + 1).choice(styles)).document()


def wide_float_profile():
    """Nodes with 8-20 children whose float values lose bits when summed (1e16 next to 1.0 and 0.1).

    numpy sums 8 or more terms pairwise, fewer sequentially; printed with %.3f the two orders differ,
    so this profile pins the exact summation of the inclusive roll-up.
    """
    def leaf(i, value):
        return node(f"k{i:02d}", {"count": 1, "device_id": "0", "device_type": "CUDA", "flops32": value,
                                  "time (ns)": 1000 + i})
    values = [1e16, 1.0, 0.1, 3.0, 1e16, 0.7, 1.5, 2.5, 1e15, 0.3, 0.9, 1.1, 1e16, 7.0, 0.5, 0.25, 9.0, 1e14,
              0.125, 3.3]
    groups = [node(f"g{n}", {"flops32": 0.1 * n}, [leaf(i, v * (n + 1)) for i, v in enumerate(values[:n])])
              for n in (3, 7, 8, 9, 12, 16, 20)]
    root = node("ROOT", {"count": 0, "flops32": 0, "time (ns)": 0}, groups)
    return [root, {"CUDA": {"0": dict(DEVICE["CUDA"])}}]


def big_profile(n_nodes, seed=0, fanout=6):
    """A Proton-like profile with about ``n_nodes`` nodes (scopes of ``fanout`` children, kernels below)."""
    r = random.Random(seed)
    count = [0]

    def build(depth):
        kids = []
        for i in range(fanout):
            if count[0] >= n_nodes:
                break
            count[0] += 1
            if depth >= 6 or r.random() < 0.3:
                kids.append(node(f"kernel_{i}_{r.randint(0, 9)}", {
                    "count": r.randint(1, 9), "device_id": "0", "device_type": "CUDA",
                    "time (ns)": r.randint(100, 10**6), "bytes": r.randint(0, 10**8),
                    "flops16": float(r.randint(0, 10**10))}))
            else:
                kids.append(node(f"scope_{depth}_{i}", {}, build(depth + 1)))
        return kids

    children = []
    while count[0] < n_nodes:
        children.append(node(f"region_{len(children)}", {}, build(1)))
        count[0] += 1
    root = node("ROOT", {"bytes": 0, "count": 0, "flops16": 0, "time (ns)": 0}, children)
    return [root, {"CUDA": {"0": dict(DEVICE["CUDA"])}}]


def to_msgpack_layout(doc):
    """The same document with Proton's msgpack key order (frame, metrics, children)."""
    def conv(n):
        return {"frame": n["frame"], "metrics": n["metrics"], "children": [conv(c) for c in n["children"]]}
    return [conv(doc[0])] + doc[1:]


def write_json(doc, path):
    """Write ``doc`` as a ``.hatchet`` file (Proton's layout: 4-space indent)."""
    with open(path, "w") as f:
        json.dump(doc, f, indent=4)


def write_msgpack(doc, path):
    """Write ``doc`` as a ``.hatchet_msgpack`` file."""
    import msgpack
    with open(path, "wb") as f:
        f.write(msgpack.packb(to_msgpack_layout(doc)))
