"""The ``hatchet_msgpack`` format: the same two-element array in MessagePack.

Node maps are ordered ``frame``, ``metrics``, ``children``; metric keys sorted; a node
with no metrics and no children is left out (a node whose children were all left out
is kept); NaN and infinities stay doubles (only JSON turns them into ``null``), as Proton 3.9
writes it.
"""
from __future__ import annotations

import msgpack

from ..tree import export


def _pack_node(node):
    kept = []
    for c in node["children"]:
        p = _pack_node(c)
        if p is not None:
            kept.append(p)
    if not node["metrics"] and not node["children"]:
        return None
    return {"frame": {"name": node["frame"]["name"], "type": node["frame"]["type"]},
            "metrics": {k: node["metrics"][k] for k in sorted(node["metrics"])},
            "children": kept}


def render(phase, device_type: str, device_block: dict) -> bytes:
    """The phase as a hatchet_msgpack file (the writer signature of :mod:`proton_ctypes.writers`)."""
    return dumps(export.build_tree(phase, device_type, finite_only=False), device_block)


def dumps(tree: dict, device_info: dict) -> bytes:
    """Serialise ``[tree, device_info]`` as MessagePack."""
    root = _pack_node(tree)
    if root is None:
        root = {"frame": dict(tree["frame"]), "metrics": {}, "children": []}
    return msgpack.packb([root, device_info], use_bin_type=True)
