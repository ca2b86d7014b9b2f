"""Introspection of the shadow context."""
from __future__ import annotations

from typing import Optional

from .core import manager, signatures, threads
from .core.registry import G
from .flags import flags


def depth(session: Optional[int] = 0) -> Optional[int]:
    """Number of scopes open on the calling thread in ``session`` (None if profiling is off).

    Raises:
        IndexError: unknown session id.
    """
    if not flags.profiling_on:
        return None
    signatures.check("depth", ("session", session, int))
    s = manager.get(session)
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
