"""JSON decoding of call trees of any depth, shared by the profiler (``data.get``) and the viewer.

Python's JSON decoder recurses once per nesting level, two per level of a call tree, against the
interpreter's recursion limit; a python-context tree may be a thousand frames deep.  (Python
3.12's C decoder has a fixed limit of its own, near 1500 levels, which no setting raises.)
"""
from __future__ import annotations

import json
import sys

#: the recursion limit while a document is decoded
NESTING_LIMIT = 20000


def loads_deep(text):
    """``json.loads(text)`` with the recursion limit raised to :data:`NESTING_LIMIT` meanwhile."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, NESTING_LIMIT))
    try:
        return json.loads(text)
    finally:
        sys.setrecursionlimit(limit)
