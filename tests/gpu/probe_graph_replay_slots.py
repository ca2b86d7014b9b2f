"""Probe (GPU): does CUPTI write the records of a replayed graph's kernels into the replaying
thread's activity buffer during ``cuGraphLaunch``, as it does for a kernel launch?

With launch positions, a scope edge rewrites its view's last log entry when no record was
written since (``proton_ctypes/core/views.py``, "Rewriting the last entry"); a graph launch
resets the thread's edge cursor through the CUPTI callback all the same
(``LaunchPositions.touch``).  If the replayed records land in the thread's buffer at the launch,
that reset is a second guard; if not, it is the only one.

What this prints (one JSON document), for a graph of ``NODES`` kernels replayed inside a scope
under ``backend="cupti"`` with launch positions, the GPU kept busy so the kernels wait:

* ``slots_before`` / ``slots_after``: the thread's written record slots in its current buffer
  before and right after ``graph.replay()`` (no edge in between);
* ``cursor_reset``: whether the replay's callback reset the edge cursor;
* ``counts``: the profile's kernel counts per path (the replayed kernels must sit under
  ``replay/<captured_at>/capture``).

Run: ``python tests/gpu/probe_graph_replay_slots.py`` on a GPU machine.
Not a test: CUPTI's behaviour is what it finds, whatever it is.
"""
import json
import os
import sys
import tempfile

NODES = 4
BUSY_ELEMENTS = 1 << 24


def _written(cursor, step: int) -> int:
    """Written record slots from the cursor's index on (the scan the edge clock does), -1 when
    the scan ran off the buffer."""
    words, _base = cursor.buf
    i, n = cursor.i, 0
    try:
        while words[i]:
            i += step
            n += 1
    except IndexError:
        return -1
    return n


def main() -> dict:
    import torch

    os.environ.setdefault("PROTON_CTYPES_LAUNCH_SOURCE", "position")
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
    import proton_ctypes as proton
    from proton_ctypes.backends import select
    from proton_ctypes.core.threads import tls

    x = torch.zeros(1024, device="cuda")
    big = torch.zeros(BUSY_ELEMENTS, device="cuda")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(NODES):
            x.add_(1)
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    out = os.path.join(tempfile.mkdtemp(), "probe")
    proton.start(out, backend="cupti")
    graph = torch.cuda.CUDAGraph()
    with proton.scope("capture"):
        with torch.cuda.graph(graph):
            for _ in range(NODES):
                x.add_(1)
    with proton.scope("warm"):
        x.add_(1)                          # the thread's buffer exists
    for _ in range(20):
        big.mul_(1.0)                      # a busy queue
    view = tls.ctx.view
    cursor = view.cursor
    step = select.get("cupti").collector.positions.step
    with proton.scope("replay"):
        before = _written(cursor, step)
        last_before = cursor.last is view.log
        graph.replay()
        after = _written(cursor, step)
        reset = cursor.last is None
    torch.cuda.synchronize()
    proton.finalize()
    with open(out + ".hatchet") as f:
        tree = json.load(f)
    counts = {}

    def walk(node, path):
        name = node.get("frame", {}).get("name", "")
        p = path + [name] if name and name != "ROOT" else path
        c = node.get("metrics", {}).get("count")
        if c:
            counts["/".join(p)] = c
        for ch in node.get("children", []):
            walk(ch, p)
    walk(tree[0], [])
    return {"cursor": cursor is not None, "slots_before": before, "slots_after": after,
            "cursor_was_this_log": last_before, "cursor_reset": reset, "counts": counts}


if __name__ == "__main__":
    print(json.dumps(main(), indent=1))
