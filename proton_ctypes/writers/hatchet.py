"""The ``hatchet`` format: pretty JSON ``[tree, device_info]`` with sorted keys."""
from __future__ import annotations

import json

from ..tree import export


def render(phase, device_type: str, device_block: dict) -> str:
    """The phase as a hatchet file (the writer signature of :mod:`proton_ctypes.writers`)."""
    return dumps(export.build_tree(phase, device_type), device_block)


#: Proton 3.9 frames the JSON with a newline before and after it
FRAME = "\n"


def dumps(tree: dict, device_info: dict) -> str:
    """Serialise as Proton does: 4-space indent, keys sorted, NaN/inf already ``null``, framed by newlines."""
    return FRAME + json.dumps([tree, device_info], indent=4, sort_keys=True, allow_nan=False) + FRAME
