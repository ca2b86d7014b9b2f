"""The ``hatchet_msgpack`` format: the same two-element array in MessagePack.

Node maps are ordered ``frame``, ``metrics``, ``children``; metric keys sorted; a node
with no metrics and no children is left out (a node whose children were all left out
is kept); NaN and infinities stay doubles (only JSON turns them into ``null``), as Proton 3.9
writes it.  The bytes are those ``msgpack.packb`` writes for the nested document, built
without recursion (msgpack nests 512 levels at most, a call tree may be thousands deep): only a
node's ``frame`` and ``metrics`` and the device block go through ``msgpack.packb``.
"""
from __future__ import annotations

import msgpack

from ..tree import export

#: MessagePack headers (the smallest form, as msgpack.packb chooses): fixarray up to 15 items
#: (0x90 | n), array 16 (0xdc) and array 32 (0xdd) beyond; the fixmap of a node's three entries
FIXARRAY, ARRAY16, ARRAY32, NODE_MAP = 0x90, 0xDC, 0xDD, 0x83
FIX_MAX, U16_MAX = 15, 0xFFFF


def render(phase, device_type: str, device_block: dict) -> bytes:
    """The phase as a hatchet_msgpack file (the writer signature of :mod:`proton_ctypes.writers`)."""
    return dumps(export.build_tree(phase, device_type, finite_only=False), device_block)


def _array_header(n: int) -> bytes:
    if n <= FIX_MAX:
        return bytes((FIXARRAY | n,))
    if n <= U16_MAX:
        return bytes((ARRAY16,)) + n.to_bytes(2, "big")
    return bytes((ARRAY32,)) + n.to_bytes(4, "big")


def _kept_children(tree: dict) -> dict:
    """``id(node) -> [kept children]`` for every node kept (metrics, or a kept child), post-order."""
    kept = {}
    todo = [(tree, False)]
    while todo:
        node, seen = todo.pop()
        if not seen:
            todo.append((node, True))
            todo.extend((c, False) for c in node["children"])
            continue
        kids = [c for c in node["children"] if id(c) in kept]
        if node["metrics"] or node["children"]:
            kept[id(node)] = kids
    return kept


def dumps(tree: dict, device_info: dict) -> bytes:
    """Serialise ``[tree, device_info]`` as MessagePack."""
    kept = _kept_children(tree)
    kept.setdefault(id(tree), [])       # ROOT is written even with nothing in it
    pack = msgpack.Packer(use_bin_type=True).pack
    keys = [pack("frame"), pack("metrics"), pack("children")]
    out = [_array_header(2)]
    todo = [tree]
    while todo:
        node = todo.pop()
        kids = kept[id(node)]
        frame, metrics = node["frame"], node["metrics"]
        out += [bytes((NODE_MAP,)), keys[0], pack({"name": frame["name"], "type": frame["type"]}),
                keys[1], pack({k: metrics[k] for k in sorted(metrics)}), keys[2], _array_header(len(kids))]
        todo.extend(reversed(kids))
    out.append(pack(device_info))
    return b"".join(out)
