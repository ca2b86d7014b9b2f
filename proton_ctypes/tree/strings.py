"""Process-wide interning of frame names (scope, state and kernel names) to small ints.

Backends intern each kernel name once (by the vendor's name pointer) and put the id in
the ``name_id`` column of a kernel batch; the tree keys its nodes by these ids.
"""
import threading

_ids: dict = {}
_names: list = []
_lock = threading.Lock()


def intern(name: str) -> int:
    """Return the id of ``name``, assigning the next free id on first sight (thread-safe)."""
    i = _ids.get(name)
    if i is None:
        with _lock:
            i = _ids.get(name)
            if i is None:
                i = len(_names)
                _names.append(name)
                _ids[name] = i
    return i


def name_of(i: int) -> str:
    """Return the string interned as ``i``."""
    return _names[i]
