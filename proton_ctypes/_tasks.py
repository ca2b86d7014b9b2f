"""Whether a thread of this process has ended, by its native id (``threading.get_native_id``).

For threads that run no code of ours when they end (a launching thread without scopes, a
vendor's thread): Linux lists this process's live threads in :data:`TASKS`.  Where that folder
does not exist, no thread is ever said to have ended.

This module imports nothing of the package: the engine and the backends both use it.
"""
from __future__ import annotations

import os

#: where Linux lists the threads of this process by native id
TASKS = "/proc/self/task"


def can_tell() -> bool:
    """Whether :func:`ended` can tell anything here (the folder exists)."""
    return os.path.isdir(TASKS)


def ended(tid: int) -> bool:
    """Whether the thread ``tid`` has ended (a syscall; False where :func:`can_tell` is False)."""
    return can_tell() and not os.path.exists(f"{TASKS}/{tid}")
