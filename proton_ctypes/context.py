"""Introspection of the shadow context."""
from __future__ import annotations

import sys
from typing import Optional

from .core import manager, signatures, threads
from .core.registry import G
from .flags import flags


def depth(session: Optional[int] = 0) -> Optional[int]:
    """Number of scopes open on the calling thread in ``session`` (None if profiling is off).

    For a ``context="python"`` session it is the depth of the Python call stack, this
    function's own frame included, as in Proton.

    Raises:
        IndexError: unknown session id.
    """
    if not flags.profiling_on:
        return None
    signatures.check("depth", ("session", session, int))
    s = manager.get(session)
    if s.context == "python":
        frame, n = sys._getframe(), 0
        while frame is not None:
            n += 1
            frame = frame.f_back
        return n
    ctx = threads.thread_ctx()
    threads.ensure(ctx)
    for v in ctx.views:
        if s in v.sessions:
            return len(v.ids)
    st = ctx.frozen.get(s.id)
    if st is not None:
        return len(st[0])
    starter = G.threads.get(s.starter_tid)
    if starter is not None and starter is not ctx:
        got = threads.stack_of(starter, s)
        if got is not None:
            return len(got[0])
    return 0
