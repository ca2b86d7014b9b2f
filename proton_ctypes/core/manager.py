"""Session bookkeeping behind the API: create, (de)activate, flush, write, destroy.

This is the libproton of proton_ctypes: :mod:`proton_ctypes.profile`, :mod:`proton_ctypes.data`
and :mod:`proton_ctypes.context` call it; it talks to the backends through
:mod:`proton_ctypes.backends.select` and to the tree through :mod:`proton_ctypes.tree`.
"""
from __future__ import annotations

import itertools
import sys
import threading

from . import (attribution, clock, flush_timing, general_path, graph_metric_kernel, graph_metrics, knobs,
               lifecycle, naming, nvtx, pc_samples, registry, retention, signatures, tensor_metrics, threads,
               trace_scopes)
from ..backends import select
from .registry import G
from .flags import flags
from .session import Session, backend_losses
from .. import writers
from ..writers import DEFAULT_FORMAT, FORMATS

CONTEXTS = ("shadow", "python")
DATA = ("tree", "trace")

_ids = itertools.count(0)
#: sessions by name (a start with a live name returns that session)
_by_name: dict = {}
#: backend name -> number of live sessions using it
_users: dict = {}


def _sink_for(backend):
    pace = retention.Pacer()

    def sink(batch):
        with G.lock:
            for s in list(G.sessions.values()):
                if s.backend is backend:
                    with s.lock:
                        attribution.ingest(s, G.views_by_tid, batch)
                        if s.mode.periodic_flushing:
                            periodic_flush(s)
            if pace.due():
                retention.trim()
    return sink


def periodic_flush(s: Session, delivered_all: bool = False) -> list:
    """``periodic_flushing`` mode: write every closed phase whose kernels have all arrived
    (:func:`_phases_delivered`; ``delivered_all``: the backend was just flushed) to its part file,
    and drop it."""
    paths = []
    fmt = s.mode.format
    if FORMATS[fmt].data != s.data:
        raise ValueError("[PROTON] Output format not supported")
    _merge_views(s)
    due = _phases_delivered(s, delivered_all)
    if not due:
        return paths
    if G.capturing and graph_metrics.needs_sync():
        # a device sync while any thread captures a graph would invalidate that capture: the
        # closed phases are written at the first flush once no capture is in progress
        return paths
    timing = flush_timing.timing_for(fmt)
    t0 = timing.clock() if timing is not None else 0.0
    graph_metrics.drain(tensor_metrics.synchronize)  # the closed phases' graph replays
    if timing is not None and s.backend.graph_metric_pool:
        timing.report_peek(due[0], due[-1], timing.clock() - t0)
    for p in due:
        path = f"{naming.expand(s.name)}.part_{p}.{fmt}"
        _write_phase(s, p, fmt, path, timing)
        t0 = timing.clock() if timing is not None else 0.0
        del s.phases[p]
        if timing is not None:
            timing.add("clear", timing.clock() - t0)
        paths.append(path)
    if timing is not None:
        timing.report(naming.expand(s.name), due[0], due[-1])
    return paths


def _phases_delivered(s: Session, delivered_all: bool) -> list:
    """The closed phases of ``s`` whose kernels have all reached the sink, oldest first.

    Phase ``p`` ends at ``phase_t[p + 1]``; a kernel launched before that may still be in a
    buffer the backend has not handed back (CUPTI keeps one per launching thread), and a part
    file written and dropped before it came would lose it.  So a phase is due once every
    thread's delivery watermark (:meth:`Backend.delivered`) has passed its end; with a backend
    that keeps none (``Backend.watermarks``), once a kernel of a later phase has come (Proton's
    rule, for kernels delivered in launch order); every closed phase after a flush of the
    backend, or when the backend delivers no kernels."""
    closed = [p for p in sorted(s.phases) if p < s.phase]
    if not closed or delivered_all or not s.backend.device_type:
        return closed
    if not s.backend.watermarks:
        return [p for p in closed if p < s.latest_row_phase]
    default, per_thread = s.backend.delivered()         # (0, {}): nothing delivered yet
    floor = min(default, min(per_thread.values(), default=default))
    return [p for p in closed if s.phase_t[p + 1] <= floor]


def _python_context():
    """The function a backend calls per launch for the python context: the launching
    thread's Python call path as a trie node (frames of our backends left out)."""
    return general_path.python_node


def live_named(name: str):
    """The live session named ``name`` (a ``start`` of that name returns it), or None."""
    existing = _by_name.get(name)
    return existing if existing is not None and not existing.finalized else None


def validate(name: str, context: str, data: str, backend_name: str, mode_text: str):
    """Raise Proton's error for the first bad argument of a ``start`` that would create a
    session (in Proton's order: backend, mode, context, data, a mode clash); nothing is created.

    Returns the parsed :class:`~proton_ctypes.backends.modes.Mode`, or None when a live session
    of that name would be returned (its other arguments are then ignored, as in Proton)."""
    if live_named(name) is not None:
        return None
    mode = select.parse_mode(backend_name, mode_text)
    if context not in CONTEXTS:
        raise ValueError(f"[PROTON] Unknown context source: {context}")
    if data not in DATA:
        raise ValueError(f"[PROTON] Unknown data: {data}")
    for s in G.sessions.values():
        if s.backend_name == backend_name and s.mode != mode:
            raise ValueError("[PROTON] Cannot add a session with the same profiler but a different mode "
                             "than existing sessions")
    return mode


def create(name: str, context: str, data: str, backend_name: str, mode_text: str) -> int:
    """Create (or find, by name) a session and return its id; raises Proton's errors.

    ``mode_text`` is parsed here, once, into the session's :class:`~proton_ctypes.backends.modes.Mode`."""
    existing = live_named(name)
    if existing is not None:
        if not existing.active:
            existing.set_active(True)
            registry.bump_epoch()
        return existing.id
    mode = validate(name, context, data, backend_name, mode_text)
    backend = select.get(backend_name)
    lifecycle.install(snapshot_all, _finalize_at_exit, _after_fork_in_child)
    if _users.get(backend_name, 0) == 0:
        graph_metrics.connected = graph_metrics.enabled()
        backend.connect(pc_attribution=(pc_samples.sessions_active, pc_samples.attribute_samples),
                        nvtx_scopes=(nvtx.enter, nvtx.exit),
                        graph_hooks=(graph_metric_kernel.capture_edge, graph_metrics.replayed,
                                     graph_metrics.instantiated)
                        if graph_metrics.connected else None,
                        activity_buffer_bytes=knobs.activity_buffer_bytes())
        backend.start(_sink_for(backend), mode,
                      _python_context() if context == "python" else None)
        edge_clock = backend.edge_clock()
        if edge_clock is not None:
            clock.use(edge_clock, backend.thread_edge_clock)
    _users[backend_name] = _users.get(backend_name, 0) + 1
    s = Session(next(_ids), name, context, data, backend, backend_name, mode)
    if _users[backend_name] > 1:           # the backend's other sessions were there before it
        backend.context_in_use(s.win_on[0])
    s.lost_at_start = backend_losses(backend)
    with G.lock:
        G.sessions[s.id] = s
        _by_name[name] = s
    registry.bump_epoch()
    return s.id


def snapshot_all() -> None:
    """Write every live session as it stands now, keeping it alive; never raises."""
    for s in list(G.sessions.values()):
        if s.finalized:         # finalized meanwhile (a signal's writing runs beside the program)
            continue
        try:
            write(s, resolve_format(s, ""))
        except BaseException as e:  # the profiled program must not die of the profiler
            try:
                sys.stderr.write(f"proton_ctypes: could not write {s.name}: {e}\n")
            except Exception:  # stderr closed: nothing else to do
                pass


def _finalize_at_exit() -> None:
    if G.sessions:
        flags.profiling_on = False
        finalize_all("")


def _after_fork_in_child() -> None:
    """The child of a fork starts with no session, no thread state and profiling off."""
    # another thread may have held the lock at fork time: it never releases it here
    G.lock = threading.RLock()
    flags.profiling_on = False
    clock.use(None)
    G.sessions.clear()
    G.threads.clear()
    G.views_by_tid.clear()
    G.active = ()
    G.py_active = ()
    G.epoch += 1
    threads.tls.__dict__.clear()
    trace_scopes.forget_all()
    _by_name.clear()
    _users.clear()


def get(session: int) -> Session:
    """The live session ``session`` or Proton's ``IndexError``."""
    s = G.sessions.get(session)
    if s is None:
        raise IndexError(f"[PROTON] Session has not been initialized: {session}")
    return s


def set_active(session, on: bool, flushing: bool = False) -> None:
    """Activate/deactivate one session (or all with None)."""
    targets = list(G.sessions.values()) if session is None else [get(session)]
    for s in targets:
        if not on and flushing:
            flush(s)
        s.set_active(on)
    registry.bump_epoch()


def _merge_views(s: Session) -> None:
    trace_scopes.settle_all()
    for views in G.views_by_tid.values():
        for v in views:
            if s in v.sessions:
                v.merge_created()


def flush(s: Session) -> None:
    """Bring every record of ``s`` into its phases (backend buffers, tensors, views)."""
    s.backend.flush()
    retention.trim()
    tensor_metrics.drain(s)
    _merge_views(s)
    for p, pd in s.phases.items():
        if p < s.phase:
            pd.complete = True
    if s.mode.periodic_flushing:
        periodic_flush(s, delivered_all=True)


def device_block(s: Session, pd, fmt: str) -> dict:
    """The device-info element of a ``fmt`` file for the devices this phase used."""
    if not pd.devices or not FORMATS[fmt].has_devices:
        return {}
    return s.backend.device_info(sorted(pd.devices))


def render(s: Session, phase: int, fmt: str):
    """The bytes/str of one phase in format ``fmt``."""
    pd = s.phases[phase]
    return writers.render(fmt, pd, s.backend.device_type, device_block(s, pd, fmt))


def _write_phase(s: Session, phase: int, fmt: str, path: str, timing=None) -> None:
    pd = s.phases[phase]
    pd.lost = s.losses()
    writers.write(fmt, pd, s.backend.device_type, device_block(s, pd, fmt), path, timing)


def resolve_format(s: Session, output_format) -> str:
    """Validate ``output_format`` for ``s`` (Proton's errors) and return the lower-case name."""
    if not isinstance(output_format, str):
        raise signatures.wrong_type("finalize", "output_format", output_format, str)
    fmt = output_format.lower() if output_format else DEFAULT_FORMAT[s.data]
    if fmt not in FORMATS:
        raise ValueError(f"[PROTON] Unknown output format: {output_format}")
    if FORMATS[fmt].data != s.data:
        raise ValueError("[PROTON] Output format not supported")
    return fmt


def write(s: Session, fmt: str) -> list:
    """Write every phase still holding data to ``<name>[.part_<k>].<fmt>``; return the paths."""
    flush(s)
    paths = []
    phases = sorted(s.phases)
    multi = s.phase > 0
    for p in phases:
        if s.phases[p].cleared and not s.phases[p].has_data():
            continue
        base = naming.expand(s.name)
        path = f"{base}.part_{p}.{fmt}" if multi else f"{base}.{fmt}"
        _write_phase(s, p, fmt, path)
        paths.append(path)
    return paths


def destroy(s: Session) -> None:
    """Forget ``s``; stop its backend when no other session uses it.

    The backend stops after ``G.lock`` is released: its collector thread may be delivering a
    batch, holding its own lock while the sink waits for ``G.lock``, and stopping waits for it."""
    with G.lock:
        s.finalized = True
        s.set_active(False)
        G.sessions.pop(s.id, None)
        graph_metrics.forget_session(s.id)
        if _by_name.get(s.name) is s:
            del _by_name[s.name]
        _users[s.backend_name] -= 1
        last = _users[s.backend_name] == 0
        _prune_views()
    if last:
        if clock.current() is s.backend.edge_clock():
            clock.use(None)
        s.backend.stop()
    registry.bump_epoch()


def _prune_views() -> None:
    live = set(G.sessions.values())
    for tid, views in list(G.views_by_tid.items()):
        G.views_by_tid[tid] = [v for v in views if v.t1 is None or any(s in live for s in v.sessions)]
    threads.forget_ended()


def _not_written(s: Session, e: OSError) -> OSError:
    """``e`` (same type and errno) saying that ``s`` was not written and is still alive."""
    what = (f"the profile {s.name!r} was not written and session {s.id} is still alive; "
            "fix the cause and call finalize again")
    if e.errno is None:
        return type(e)(f"{e}: {what}")
    where = f": {e.filename!r}" if e.filename else ""
    return type(e)(e.errno, f"{e.strerror}{where}: {what}")


def _write_or_keep(s: Session, fmt: str) -> None:
    """Write ``s``; a file-system error leaves it alive and says so (missing folders are
    created by the writer, so this is permissions, a full disk, ...)."""
    try:
        write(s, fmt)
    except OSError as e:
        raise _not_written(s, e) from e


def _keep_deactivated(s: Session) -> None:
    """A session whose finalize failed stays alive but deactivated, as Proton leaves it (it
    stops the session before it writes)."""
    s.set_active(False)
    registry.bump_epoch()


def _clear_this_threads_state() -> None:
    """Proton clears the state of the thread that finalized a session."""
    ctx = threads.thread_ctx()
    if ctx.state is not None:
        general_path.set_state(ctx, None)


def finalize(session, output_format: str) -> None:
    """Write and destroy one session (silently nothing for unknown ids); a session whose
    format is refused or whose write fails stays alive (deactivated)."""
    s = G.sessions.get(session)
    if s is None:
        return
    try:
        _write_or_keep(s, resolve_format(s, output_format))
    except Exception:
        _keep_deactivated(s)
        raise
    s.report_losses()
    destroy(s)
    _clear_this_threads_state()


def finalize_all(output_format: str) -> None:
    """Write and destroy every live session, in the order they were started.

    A format a session's data cannot be written in stops there, as in Proton: that session
    stays alive (deactivated) and the later ones are left as they are.  A session whose write
    fails stays alive (deactivated) and the others are still written; the first such error is
    raised at the end."""
    first = None
    for s in list(G.sessions.values()):
        try:
            fmt = resolve_format(s, output_format)
        except Exception:
            _keep_deactivated(s)
            raise
        try:
            _write_or_keep(s, fmt)
        except Exception as e:  # nothing of it is lost: it stays alive
            _keep_deactivated(s)
            first = first or e
            continue
        try:
            s.report_losses()
        except Exception as e:
            first = first or e
        destroy(s)
        _clear_this_threads_state()
    if first is not None:
        raise first


def discard(session: int) -> None:
    """Destroy ``session`` without writing it (a ``start`` that failed after creating it)."""
    s = G.sessions.get(session)
    if s is not None:
        destroy(s)


def discard_all() -> None:
    """Destroy every live session without writing it (the ``proton`` command after a
    failed write, so that the exit handler does not try again)."""
    for s in list(G.sessions.values()):
        destroy(s)
