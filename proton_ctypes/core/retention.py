"""Bounded scope logs: what the kernel join may still need of each thread's views, and
dropping the rest while the run goes on.

The kernel join (:mod:`.attribution`) looks up, per kernel, the log entry in force at its
launch on its launching thread; so a view's log must keep every entry a kernel not yet
delivered can name.  The backend says what that is (:meth:`Backend.delivered
<proton_ctypes.backends.base.Backend.delivered>`): per launching thread, a watermark
before which every kernel has reached the sink.  :func:`trim` keeps, of each view's log:

* the entry in force at its thread's watermark and every later one (the minimum over the
  backends of the view's sessions; a backend that knows no watermark keeps everything);
* the entry in force at each capture point the backends still list
  (:meth:`Backend.captures <proton_ctypes.backends.base.Backend.captures>`): graph replays
  graft the capture-time path, named by ``(cap_tid, cap_ns)``, long after the capture;
* on the thread that started a session, the entries in force since the oldest watermark of
  a thread that may still launch outside every view of its own (its kernels take the
  starter's context at its first such launch, :func:`.attribution.context_codes`).

A *retired* view (``t1`` set, its nodes already merged into its phases) whose ``t1`` is at
or before that bound and that holds no capture point is dropped from ``G.views_by_tid``:
no kernel to come falls in it.  The closed active windows of a session that end before
every thread's watermark go as well, and so do the starter contexts taken by launching threads
that ended once their kernels are in (:func:`_forget_ended_launchers`); threads that ended and
hold nothing more are forgotten (:func:`.threads.forget_ended`).

:func:`trim` runs in the sink, on the backend's collector thread, at most every
:data:`TRIM_EVERY_BATCHES` batches or :data:`TRIM_INTERVAL_S` seconds (:class:`Pacer`), and
after every engine flush; the owner threads keep appending meanwhile (``View.drop_before`` is
safe against that).
"""
from __future__ import annotations

import time

import numpy as np

from .._tasks import can_tell, ended
from .registry import G
from .threads import forget_ended
from ..tree.codes import FAR_FUTURE

#: how often :func:`trim` looks for the launching threads that ended among those of
#: ``Session.first_context`` (:func:`proton_ctypes._tasks.ended`: a syscall per thread)
LOOK_INTERVAL_S = 1.0


class _EndedLaunchers:
    """The threads of ``Session.first_context`` seen ended (native id -> ``time_ns`` first seen
    so) and when :func:`_forget_ended_launchers` looks next (``time.monotonic``)."""

    def __init__(self):
        self.seen_at: dict = {}
        self.next_look = 0.0


_ended = _EndedLaunchers()

#: the sink trims after this many batches since its last trim ...
TRIM_EVERY_BATCHES = 8
#: ... or at its first batch this many seconds after it
TRIM_INTERVAL_S = 0.5


class Pacer:
    """When one backend's sink trims (:data:`TRIM_EVERY_BATCHES`, :data:`TRIM_INTERVAL_S`)."""

    __slots__ = ("batches", "last")

    def __init__(self):
        self.batches = 0
        self.last = time.monotonic()

    def due(self) -> bool:
        """Count one batch; True when a trim is due now (the count starts again)."""
        self.batches += 1
        now = time.monotonic()
        if self.batches < TRIM_EVERY_BATCHES and now - self.last < TRIM_INTERVAL_S:
            return False
        self.batches = 0
        self.last = now
        return True


class Marks:
    """One backend's watermark and capture points, read once per trim."""

    __slots__ = ("default", "per_thread", "pins")

    def __init__(self, backend):
        self.default, self.per_thread = backend.delivered()
        #: native tid -> sorted int64 capture times (read after the watermark: the contract)
        self.pins = {}
        if self.default or self.per_thread:
            for tid, times in backend.captures().items():
                if len(times):
                    self.pins[tid] = np.unique(np.asarray(times, dtype=np.int64))

    def of(self, tid: int) -> int:
        """The watermark of thread ``tid``."""
        return self.per_thread.get(tid, self.default)

    def floor(self) -> int:
        """The watermark of every thread: no kernel launched before it is still to come."""
        return min(self.default, min(self.per_thread.values(), default=self.default))


def _starter_bound(s, m: Marks) -> int:
    """How far the views of ``s``'s starter thread may be trimmed for the other threads: the
    oldest watermark of a thread that may still launch, inside ``s``, outside every view of its
    own and has not had its first such launch resolved (threads never seen: the default)."""
    bound = m.default
    for tid in set(m.per_thread) | set(G.threads):
        if tid == s.starter_tid or tid in s.first_context:
            continue
        w = m.of(tid)
        if w >= bound:
            continue
        # a live view of ``s`` begun before the watermark covers every launch still to come
        if not any(v.t1 is None and v.t0 <= w and s in v.sessions for v in G.views_by_tid.get(tid, ())):
            bound = w
    return bound


def _view_bound(v, tid: int, marks: dict, starters: dict):
    """``(keep_after, pins)`` of view ``v`` on thread ``tid``: the trim point (FAR_FUTURE when no
    session of it awaits kernels) and the capture times whose entries stay (or None)."""
    keep_after = FAR_FUTURE
    pins = []
    for s in v.sessions:
        m = marks.get(id(s.backend))
        if m is None or s.finalized:
            continue
        keep_after = min(keep_after, m.of(tid))
        if tid == s.starter_tid:
            keep_after = min(keep_after, starters[s])
        p = m.pins.get(tid)
        if p is not None:
            pins.append(p)
    if not pins:
        return keep_after, None
    return keep_after, pins[0] if len(pins) == 1 else np.unique(np.concatenate(pins))


def trim() -> None:
    """Trim every thread's view logs and drop the retired views and windows no kernel still
    to come needs (module docstring); a no-op for backends that know no watermark."""
    with G.lock:
        sessions = [s for s in G.sessions.values() if s.uses_device and not s.finalized]
        marks = {}
        for s in sessions:
            if id(s.backend) not in marks:
                marks[id(s.backend)] = Marks(s.backend)
        starters = {s: _starter_bound(s, marks[id(s.backend)]) for s in sessions}
        for tid, views in list(G.views_by_tid.items()):
            kept = []
            for v in views:
                keep_after, pins = _view_bound(v, tid, marks, starters)
                if v.t1 is not None and v.t1 <= keep_after and (
                        pins is None or not ((pins >= v.t0) & (pins < v.t1)).any()):
                    v.merge_created()  # nothing new, unless written after it retired
                    continue
                if keep_after:
                    v.drop_before(keep_after, pins)
                kept.append(v)
            if len(kept) != len(views):
                G.views_by_tid[tid] = kept
        for s in sessions:
            _trim_windows(s, marks[id(s.backend)].floor())
        _forget_ended_launchers(sessions, marks)
        forget_ended()


def _forget_ended_launchers(sessions, marks: dict) -> None:
    """Drop the ``first_context`` entries (:func:`.attribution.context_codes`) of the threads that
    ended, once all their kernels are in: a program making a thread per request would keep one
    per thread, and a thread given the same native id later would inherit it rather than copy
    the starter's stack at its own first launch.  Such threads run no code of ours, so they are
    looked up (:mod:`proton_ctypes._tasks`) at most every :data:`LOOK_INTERVAL_S`; unknown
    threads (id -1) keep theirs."""
    seen_at = _ended.seen_at
    known = set()
    for s in sessions:
        known.update(tid for tid in s.first_context if tid >= 0)
    for tid in [t for t in seen_at if t not in known]:
        del seen_at[tid]
    now = time.monotonic()
    if known and now >= _ended.next_look and can_tell():
        _ended.next_look = now + LOOK_INTERVAL_S
        seen = time.time_ns()
        for tid in known - set(seen_at):
            if ended(tid):
                seen_at[tid] = seen
    for tid, seen in list(seen_at.items()):
        if all(marks[id(s.backend)].of(tid) >= seen for s in sessions if tid in s.first_context):
            for s in sessions:
                s.first_context.pop(tid, None)
            del seen_at[tid]


def _trim_windows(s, floor: int) -> None:
    """Forget the closed active windows of ``s`` that end at or before ``floor`` (the last
    window always stays)."""
    off = s.win_off
    k = 0
    while k < len(off) - 1 and off[k] <= floor:
        k += 1
    if k:
        del s.win_on[:k]
        del s.win_off[:k]


def retained_entries() -> int:
    """Log entries held by every view now (the figure the log bound is about)."""
    with G.lock:
        return sum(len(v.log) // 2 + sum(len(c) for c in v.chunks)
                   for views in G.views_by_tid.values() for v in views)
