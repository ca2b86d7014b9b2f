"""Two small profiles for the -diff / --fail-if / -f json / --html tests: BASE and NEW (NEW is FILE)."""

from .profiles import node, write_json


def kernel(name, t, count=1):
    """A kernel node with Proton's metrics."""
    return node(name, {"count": count, "device_id": "0", "device_type": "CUDA", "time (ns)": t})


ROOT_METRICS = {"count": 0, "time (ns)": 0}
BASE = [node("ROOT", ROOT_METRICS, [
    node("train", {}, [node("fwd", {}, [kernel("gemm", 500), kernel("relu", 20)]),
                       node("bwd", {}, [kernel("gemm", 900)])]),
    node("eval", {}, [node("fwd", {}, [kernel("gemm", 300)])])]), {}]
NEW = [node("ROOT", ROOT_METRICS, [
    node("train", {}, [node("fwd", {}, [kernel("gemm", 550), kernel("relu", 20)]),
                       node("bwd", {}, [kernel("gemm", 891)]),
                       node("opt", {}, [kernel("adam", 100)])])]), {}]


def write_pair(directory):
    """Write base.hatchet and new.hatchet into ``directory``; return it."""
    write_json(BASE, directory / "base.hatchet")
    write_json(NEW, directory / "new.hatchet")
    return directory
