"""One interned call-path trie for the whole process.

Every call path (``ROOT/a/b/kernel``) is a node with a small integer id; node 0 is
``ROOT``.  A node is identified by its parent and its frame name only, exactly as
Proton keys its tree (a state and a scope of the same name under one parent are one
node).  Sessions never own nodes: they record which node ids they touched and which
metrics they hold per node, so the hot path resolves a scope to a node once for every
session at the same time.

The trie only grows.  ``kids[n]`` is the dict ``name -> child id`` of node ``n``; the
hot path reads it directly (one dict lookup per scope).
"""
import threading

ROOT = 0

#: parent id of each node (ROOT's parent is -1)
parent = [-1]
#: frame name of each node
name = ["ROOT"]
#: children of each node: name -> id, in first-insertion order
kids = [{}]
#: depth of each node (ROOT = 0)
depth = [0]

_lock = threading.Lock()

#: the state frame of launch-metadata evaluation and metric-kernel work
METADATA_FRAME = "__proton_launch_metadata"
#: a frame ``__proton_launch_metadata:<kernel>`` is two frames, ``__proton_launch_metadata``
#: then ``<kernel>``, as libproton files it
METADATA_PREFIX = METADATA_FRAME + ":"


def child(node: int, frame: str) -> int:
    """Return the id of ``frame`` under ``node``, creating it on first use (thread-safe).

    A ``__proton_launch_metadata:<kernel>`` frame resolves to the grandchild
    ``__proton_launch_metadata/<kernel>``; ``kids[node]`` keeps that name as an alias of
    the grandchild, so the next lookup is one dict access as for any other frame.
    """
    k = kids[node]
    c = k.get(frame)
    if c is None:
        if frame.startswith(METADATA_PREFIX):
            c = child(child(node, METADATA_FRAME), frame[len(METADATA_PREFIX):])
            k[frame] = c
            return c
        with _lock:
            c = k.get(frame)
            if c is None:
                c = len(parent)
                parent.append(node)
                name.append(frame)
                kids.append({})
                depth.append(depth[node] + 1)
                k[frame] = c
    return c


def path(node: int) -> list:
    """Frame names from ROOT (included) down to ``node``."""
    out = []
    while node >= 0:
        out.append(name[node])
        node = parent[node]
    out.reverse()
    return out


def walk(node: int, frames) -> int:
    """Descend from ``node`` through ``frames`` (names), creating nodes; return the last."""
    for f in frames:
        node = child(node, f)
    return node


#: frame Proton puts between a graph replay's launch path and the path captured in the graph
CAPTURED_AT = "<captured_at>"


def graft(base: int, sub: int) -> int:
    """The node for a kernel replayed from a graph: ``base/<captured_at>/<path of sub>``."""
    return walk(child(base, CAPTURED_AT), path(sub)[1:])


def size() -> int:
    """Number of nodes in the trie."""
    return len(parent)
