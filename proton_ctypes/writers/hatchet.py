"""The ``hatchet`` format: pretty JSON ``[tree, device_info]`` with sorted keys.

The text is what ``json.dumps(..., indent=4, sort_keys=True)`` writes, built without recursion:
a call tree may be thousands of frames deep, and Python's JSON encoder recurses (about three
frames per tree level) into its recursion limit.  Only the flat parts (a node's ``frame`` and
``metrics``, the device block) go through ``json.dumps``.
"""
from __future__ import annotations

import json

from ..tree import export

#: one level of indentation
STEP = " " * 4


def render(phase, device_type: str, device_block: dict) -> str:
    """The phase as a hatchet file (the writer signature of :mod:`proton_ctypes.writers`)."""
    return dumps(export.build_tree(phase, device_type), device_block)


#: Proton 3.9 frames the JSON with a newline before and after it
FRAME = "\n"


def _flat(value, pad: str) -> str:
    """``value`` (a dict or list a few levels deep at most) as it stands at indentation ``pad``."""
    return json.dumps(value, indent=4, sort_keys=True, allow_nan=False).replace("\n", "\n" + pad)


def dumps(tree: dict, device_info: dict) -> str:
    """Serialise as Proton does: 4-space indent, keys sorted, NaN/inf already ``null``, framed by newlines."""
    out = [FRAME, "[\n", STEP]
    todo = [",\n" + STEP + _flat(device_info, STEP) + "\n]" + FRAME, (tree, STEP)]
    while todo:
        item = todo.pop()
        if type(item) is str:
            out.append(item)
            continue
        node, pad = item            # a node dict ("children", "frame", "metrics") at indentation pad
        inner = pad + STEP
        tail = (",\n" + inner + '"frame": ' + _flat(node["frame"], inner) + ",\n" + inner + '"metrics": '
                + _flat(node["metrics"], inner) + "\n" + pad + "}")
        kids = node["children"]
        if not kids:
            out.append("{\n" + inner + '"children": []' + tail)
            continue
        kid_pad = inner + STEP
        out.append("{\n" + inner + '"children": [\n' + kid_pad)
        todo.append("\n" + inner + "]" + tail)
        for i in range(len(kids) - 1, -1, -1):
            todo.append((kids[i], kid_pad))
            if i:
                todo.append(",\n" + kid_pad)
    return "".join(out)
