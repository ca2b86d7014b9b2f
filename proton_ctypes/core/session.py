"""A profiling session: its settings, active windows, phases and trace thread numbers.

Sessions never own call-path nodes (the trie is process-wide, :mod:`proton_ctypes.tree.callpath`);
what each phase holds is a :class:`proton_ctypes.tree.phase.PhaseData`.
"""
from __future__ import annotations

import sys
import threading
import time

from ..backends.base import Backend
from ..backends.modes import Mode
from ..tree.codes import FAR_FUTURE
from ..tree.phase import PhaseData


def backend_losses(backend: Backend) -> dict:
    """``{what: count}`` of every record loss the backend has counted so far (``Backend.lost``)."""
    return {what: n for n, what in backend.lost() if n}


class Session:
    """One profiling session (what ``start`` returns the id of)."""

    def __init__(self, sid: int, name: str, context: str, data: str, backend: Backend, backend_name: str,
                 mode: Mode):
        self.id = sid
        self.name = name
        self.context = context
        self.data = data
        self.backend = backend
        #: the name the session was started with (a registered test double may stand in for it)
        self.backend_name = backend_name
        #: the parsed ``mode=`` (parsed once, when the session was created)
        self.mode = mode
        self.active = True
        self.finalized = False
        self.starter_tid = threading.get_native_id()
        now = time.time_ns()
        #: active windows [on, off); the open one ends at FAR_FUTURE
        self.win_on = [now]
        self.win_off = [FAR_FUTURE]
        #: phase k starts at phase_t[k]
        self.phase = 0
        self.phase_t = [now]
        #: the latest phase a kernel row went to (``periodic_flushing`` with a backend that
        #: knows no delivery watermark: :func:`.manager._phases_delivered`)
        self.latest_row_phase = 0
        self.phases = {0: PhaseData()}
        #: the current phase's data (kept in step with ``phase``)
        self.current = self.phases[0]
        #: data="trace": the threads' numbers in the trace (3.9: in order of each thread's
        #: first scope or launch in the session, kept across phases), by pthread id (a
        #: thread reusing a finished thread's id gets its number, as in libproton) and
        #: by native id (kernel records name the launching thread so)
        self.trace_threads = {}
        self.trace_native = {}
        #: native thread id -> the context code of its launches that no view of its own covers:
        #: the starter thread's at its first such launch in the session (resolved once, so the
        #: starter's log need not keep that instant: :mod:`proton_ctypes.core.retention`)
        self.first_context: dict = {}
        #: the backend's losses when the session started, ``{what: count}`` (see ``Backend.lost``)
        self.lost_at_start: dict = {}
        #: the losses already reported on stderr
        self.lost_reported: dict = {}
        self.lock = threading.RLock()

    # -- activity ---------------------------------------------------------------------
    def set_active(self, on: bool) -> None:
        """Open or close an active window at the current time."""
        if on == self.active:
            return
        now = time.time_ns()
        self.backend.context_in_use(now)
        if on:
            self.win_on.append(now)
            self.win_off.append(FAR_FUTURE)
        else:
            self.win_off[-1] = now
        self.active = on

    # -- phases -----------------------------------------------------------------------
    def advance_phase(self) -> int:
        """Close the current phase and open the next one; return its number."""
        self.phase += 1
        now = time.time_ns()
        self.backend.context_in_use(now)
        self.phase_t.append(now)
        self.current = self.phases[self.phase] = PhaseData()
        return self.phase

    def renew_current(self) -> None:
        """Give the current phase, dropped by ``data.clear``, fresh empty data (marked cleared)."""
        self.current = self.phases[self.phase] = PhaseData()
        self.current.cleared = True

    def trace_thread(self, ident: int, native: int) -> int:
        """The trace number of the calling thread (``threading.get_ident()``, native id)."""
        num = self.trace_threads.get(ident)
        if num is None:
            num = self.trace_threads[ident] = len(self.trace_threads)
        self.trace_native[native] = num
        return num

    def trace_launcher(self, native: int) -> int:
        """The trace number of a launching thread known by its native id; a thread not seen
        in a scope yet is numbered now."""
        num = self.trace_native.get(native)
        if num is None:
            num = self.trace_native[native] = self.trace_threads[("native", native)] = len(self.trace_threads)
        return num

    # -- losses -----------------------------------------------------------------------
    def losses(self) -> dict:
        """``{what: count}`` of the losses the backend counted since this session started."""
        out = {}
        for what, n in backend_losses(self.backend).items():
            n -= self.lost_at_start.get(what, 0)
            if n > 0:
                out[what] = n
        return out

    def report_losses(self) -> None:
        """One line on stderr when records were lost since the session started (how many and
        why), once per new loss; the same counts are in the files (``lost_records``)."""
        losses = self.losses()
        if not losses or all(self.lost_reported.get(what, 0) >= n for what, n in losses.items()):
            return
        self.lost_reported = losses
        parts = "; ".join(f"{n} {what}" for what, n in losses.items())
        try:
            sys.stderr.write(f"proton_ctypes: the profile {self.name!r} misses data: {parts}\n")
            sys.stderr.flush()
        except Exception:  # a diagnostic must never fail the finalize
            pass

    @property
    def uses_device(self) -> bool:
        """Whether the backend produces kernel records (so scopes must be logged)."""
        return bool(self.backend.device_type)
