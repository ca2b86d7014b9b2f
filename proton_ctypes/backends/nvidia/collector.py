"""The CUPTI backend's collector: completed buffers -> parsed columns -> joined batch -> sink.

One daemon thread waits on the buffer pool's wake event.  It parses once
``parse_batch_buffers`` buffers are waiting or the pool runs low (:meth:`Collector.parse_due`;
parsing holds the GIL, so fewer, larger rounds disturb the launching threads less), and in
``periodic_flushing`` mode it also makes CUPTI hand back partial buffers on a timer.
:meth:`Collector.drain` -- from the thread, a flush or the stop -- parses every completed
buffer (:mod:`.parse`), recycles it, joins the kernels to their launches (:mod:`.join`) and
delivers one :data:`~proton_ctypes.backends.base.KERNEL_DTYPE` batch.

The first buffer holding a kernel record also gives the kernel record size, by CUPTI's own
record walk (:func:`.activity.measure_kernel_stride`).  Spare buffers (CUPTI < 27, see
:mod:`.buffers`) are parsed only to count their records as dropped.
"""
from __future__ import annotations

import threading
import time
from typing import Callable, Optional

import numpy as np

from ..._heap import raise_thresholds
from . import layout as L
from .activity import LAUNCH_FROM_API, LAUNCH_FROM_POSITION, holds_kernel, measure_kernel_stride
from .buffers import LIMIT_ENV, MIB, BufferPool
from .callbacks import CallbackHub
from .join import Joiner
from .cbids import GRAPH_LAUNCH_CBIDS
from .lib import CuptiLib
from .parse import BufferParser, concat_columns, record_count
from .positions import WORD_BYTES, LaunchPositions

#: Parse at once when no more than this many pool buffers are left to hand out.
LOW_FREE_BUFFERS = 2
#: Reclaim (``cuptiActivityFlushAll(0)``) when more buffers than Python threads plus this are
#: out: CUPTI keeps a buffer per launching thread, and may keep that of a thread that stopped
#: launching or ended until a flush returns it (not yet seen on a GPU; the fake does so).
RECLAIM_SLACK_BUFFERS = 8
#: ... at most once per this many seconds.
RECLAIM_INTERVAL_S = 1.0
#: ... or, once a thread that ended holds a buffer (``BufferPool.gone_holding``), at most once per
#: this many seconds: threads made and ended all the time would hold a buffer each till then.
#: Once per ended thread: a buffer a flush did not give back waits for the reclaim above.
RECLAIM_GONE_INTERVAL_S = 0.05
#: The thread's wait between checks when nothing wakes it (no periodic flushing).
IDLE_WAIT_S = 0.5
#: With nothing to parse, the delivery watermark is still moved on (and the sink called with
#: an empty batch, so the engine trims scope logs while no kernel completes) this often.
TICK_INTERVAL_S = 1.0
#: Seconds :meth:`Collector.stop_thread` waits for the thread.
JOIN_TIMEOUT_S = 10
#: Timestamps a record may carry, around the start time (the parser's plausibility window).
TIMESTAMP_WINDOW_BEFORE_NS = 3600 * 10**9            # one hour
TIMESTAMP_WINDOW_AFTER_NS = 365 * 86400 * 10**9      # one year
#: Slack taken off a delivery watermark (:meth:`Collector.watermark`): a launch in progress when
#: it is taken may be stamped (``queued``) just before its thread asks CUPTI for a buffer.
DELIVERY_MARGIN_NS = 100_000_000      # 0.1 s
#: Kernels seen with no launch-API record at all before the "no API records" warning.
MIN_KERNELS_FOR_API_CHECK = 16
_API_KINDS = (L.KIND_DRIVER, L.KIND_RUNTIME)


class Collector:
    """Parses, joins and delivers what CUPTI completes (see the module docstring)."""

    def __init__(self, lib: CuptiLib, pool: BufferPool, parse_batch_buffers: int,
                 warn_once: Callable[[str, str], None]):
        self.lib = lib
        self.pool = pool
        self.parse_batch_buffers = parse_batch_buffers
        self.warn_once = warn_once
        #: the kernel record size: the version table's until CUPTI's walk measured it
        self.kernel_stride = L.expected_kernel_stride(lib.version)
        self.stride_source = "version table"
        #: records CUPTI dropped (``cuptiActivityGetNumDroppedRecords``), and records (kernel
        #: records among them) of spare buffers handed out at the pool's ceiling
        self.cupti_dropped = 0
        self.spare_dropped = 0
        self.spare_kernels = 0
        #: flushes made to get back the buffers of threads that stopped launching
        self.reclaims = 0
        self.parser: Optional[BufferParser] = None
        self.joiner: Optional[Joiner] = None
        self.hub: Optional[CallbackHub] = None
        #: receives each joined batch (None: batches are dropped, e.g. while stopping)
        self.sink = None
        #: Cumulative seconds per phase (diagnostics).
        self.timings = {}
        self.lock = threading.RLock()
        self.stop_event = threading.Event()
        self.thread: Optional[threading.Thread] = None
        self.launch_source = LAUNCH_FROM_API
        #: whether CUPTI keeps buffers per launching thread (then the pool knows each one's thread)
        self.per_thread_buffers = False
        #: ``(default_ns, {tid: ns})`` after the last drain (:meth:`watermark`); ``(0, {})``: unknown
        self.delivered = (0, {})
        #: the latency timestamps were switched on for kernels the python context could not place
        self.stamps_switched_on = False
        #: launch positions (:mod:`.positions`) with that launch source, else None
        self.positions: Optional[LaunchPositions] = None

    # ------------------------------------------------------------------ a session
    def begin(self, hub: CallbackHub, sink, clock_offset_ns: int, extcorr: bool,
              launch_source: str = LAUNCH_FROM_API, per_thread_buffers: bool = False) -> None:
        """A new parser and joiner for a session whose CUPTI clock is ``clock_offset_ns`` ahead
        and whose kernels' launches come from ``launch_source`` (:mod:`.activity`)."""
        start_ts = time.time_ns() + clock_offset_ns
        self.parser = BufferParser(self.kernel_stride, ts_lo=start_ts - TIMESTAMP_WINDOW_BEFORE_NS,
                                   ts_hi=start_ts + TIMESTAMP_WINDOW_AFTER_NS)
        self.parser.expect_extcorr = extcorr
        self.joiner = Joiner(clock_offset_ns, hub.resolve_graph_nodes, graph_launch_cbids=GRAPH_LAUNCH_CBIDS,
                             graph_exec_check=hub.check_graph_execs)
        self.hub = hub
        self.sink = sink
        self.launch_source = launch_source
        self.per_thread_buffers = per_thread_buffers
        self.delivered = (0, {})
        self.stamps_switched_on = False
        self.pool.use_positions(None)         # the last session's retired buffers back to the pool
        self.positions = None
        if launch_source == LAUNCH_FROM_POSITION:
            self.positions = LaunchPositions(self.pool.buffer_bytes, self.kernel_stride)
            self.pool.use_positions(self.positions)
            self.parser.want_offsets = True
        hub.edge_touch = self.positions.touch if self.positions is not None else None

    def start_thread(self, periodic: bool, flush_interval_s: float) -> None:
        """Start the collector thread (``periodic``: also flush CUPTI every ``flush_interval_s``)."""
        self.stop_event.clear()
        self.thread = threading.Thread(target=self._run, args=(periodic, flush_interval_s),
                                       name="proton_ctypes-cupti", daemon=True)
        self.thread.start()

    def stop_thread(self) -> None:
        """Stop the thread and wait for it (not when called from the thread itself)."""
        self.stop_event.set()
        self.pool.wake.set()
        thread, self.thread = self.thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=JOIN_TIMEOUT_S)

    def discard_completed(self) -> None:
        """Recycle every completed buffer unparsed (a start that failed)."""
        for address, valid in self.pool.take_completed():
            self.pool.release(address, valid)

    # ------------------------------------------------------------------ the thread
    def _run(self, periodic: bool, interval: float) -> None:
        raise_thresholds()    # the drains' arrays reuse the heap's pages (proton_ctypes._heap)
        try:
            # numpy >= 2 imports numpy.ma on the first np.unique (~15-50 ms): pay it here, off
            # the launching thread, rather than in the first finalize
            import numpy.ma  # noqa: F401
        except Exception:
            pass
        next_flush = time.monotonic() + interval
        next_reclaim = next_tick = time.monotonic() + RECLAIM_INTERVAL_S
        next_gone_reclaim, flushed_for = 0.0, set()
        wake, stop = self.pool.wake, self.stop_event
        while not stop.is_set():
            timeout = max(0.0, next_flush - time.monotonic()) if periodic else IDLE_WAIT_S
            wake.wait(timeout)
            wake.clear()
            if stop.is_set():
                break
            try:
                now = time.monotonic()
                if periodic and now >= next_flush:
                    next_flush = now + interval
                    self.lib.flush_all()
                elif now >= next_reclaim and self.reclaim_due():
                    next_reclaim = now + RECLAIM_INTERVAL_S
                    self.reclaims += 1
                    self.lib.flush_all()
                elif now >= next_gone_reclaim and (held_by_gone := self.pool.gone_holding()) - flushed_for:
                    next_gone_reclaim = now + RECLAIM_GONE_INTERVAL_S
                    flushed_for = held_by_gone
                    self.reclaims += 1
                    self.lib.flush_all()
                if periodic or self.parse_due():
                    self.drain(hold=True)
                elif self.per_thread_buffers and now >= next_tick:
                    next_tick = now + TICK_INTERVAL_S
                    self.drain(hold=True, idle=True)
            except Exception as e:  # never let the collector die silently
                self.warn_once("collector", f"proton_ctypes: CUPTI collector error: {e!r}")

    def parse_due(self) -> bool:
        """Parse now: enough buffers wait, or so many are out that CUPTI could run short."""
        pool = self.pool
        waiting = len(pool.completed)
        if not waiting:
            return False
        return waiting >= self.parse_batch_buffers or pool.low(LOW_FREE_BUFFERS)

    def reclaim_due(self) -> bool:
        """More buffers out than the threads that could hold them: some belong to threads
        that stopped launching (or exited), and only a flush gives them back."""
        return self.pool.outstanding - len(self.pool.completed) > threading.active_count() + RECLAIM_SLACK_BUFFERS

    # ------------------------------------------------------------------ the drain
    def drain(self, hold: bool, idle: bool = False) -> None:
        """Parse every completed buffer, recycle it, join and deliver one batch to the sink.

        ``hold``: keep kernels whose launch record may still come in a later buffer.
        ``idle``: the timer's call -- the sink gets the batch even when it is empty (the
        engine trims its logs there).
        """
        with self.lock:
            t0 = time.perf_counter()
            kernels, api, ext = [], [], []
            pool = self.pool
            now = time.time_ns()
            completed = pool.take_completed()
            # the buffers out besides these may hold launches older than now, nothing else does
            snapshot = (now, pool.held_since({a for a, _ in completed})) if self.per_thread_buffers else None
            parsed = {}      # buffer -> valid bytes; its columns may be views into it: released after the join
            marks = {}       # launch positions: each thread's marks, taken once
            try:
                for address, valid in completed:
                    if not pool.owns(address) or address in parsed:
                        continue
                    parsed[address] = valid
                    buf = pool.array(address)
                    if self.stride_source != "walk" and valid:
                        self._detect_stride(address, buf, valid)
                    parts = self.parser.parse(buf, valid, copy=False)
                    if pool.is_spare(address):
                        self.spare_dropped += record_count(parts)
                        self.spare_kernels += record_count(parts, L.KIND_CONCURRENT_KERNEL)
                        continue
                    owner = pool.owner(address)
                    for kind, cols in parts.items():
                        if kind == L.KIND_CONCURRENT_KERNEL:
                            cols["owner"] = np.full(len(cols["start"]), owner, np.int64)
                            if self.positions is not None:
                                self._place_by_position(address, cols, owner, len(parts) > 1, marks)
                            kernels.append(cols)
                        elif kind in _API_KINDS:
                            api.append(cols)
                        elif kind == L.KIND_EXTERNAL_CORRELATION:
                            ext.append(cols)
                api, ext, kernels = concat_columns(api), concat_columns(ext), concat_columns(kernels)
                t1 = time.perf_counter()
                # the joiner copies out what it keeps (its tables, held kernels, the batch)
                joiner = self.joiner
                joiner.add_api(api)
                joiner.add_external(ext)
                joiner.add_python(self.hub.take_python_entries())
                joiner.add_graph_launches(self.hub.take_graph_launches())
                batch = joiner.join(kernels, hold=hold)
                del api, ext, kernels
            finally:
                for address, valid in parsed.items():
                    pool.release(address, valid)
            if joiner.needs_stamps and not self.stamps_switched_on:
                # a CUPTI whose launch callbacks see other ids than the kernels: from now on
                # the kernels carry their ``queued`` time, and are placed by thread and time
                self.stamps_switched_on = True
                self.lib.enable_latency_timestamps(True)
            if self.positions is not None:
                self.positions.settle()
                pool.recycle_ended(look=idle)
            pool.forget_gone()
            pool.trim()
            self.cupti_dropped += self.lib.dropped_records()
            self._check_api_records()
            t2 = time.perf_counter()
            if snapshot is not None:
                watermark = self.watermark(*snapshot)
            sink = self.sink
            if (len(batch) or idle) and sink is not None:
                if snapshot is not None and len(batch) == 0:
                    self.delivered = watermark       # nothing in flight: it holds already
                sink(batch)
            if snapshot is not None:
                self.delivered = watermark
            self.add_time("parse_s", t1 - t0)
            self.add_time("join_s", t2 - t1)
            self.add_time("sink_s", time.perf_counter() - t2)

    def watermark(self, now_ns: int, held_since: dict) -> tuple:
        """``(default_ns, {tid: ns})``: the times before which each thread's launches have all
        been delivered, given the buffers that were out at ``now_ns`` (``held_since``: the
        request time of each thread's oldest one).

        CUPTI returns a thread's buffers whole and its records go into that thread's buffers
        only, so a thread's launches older than its oldest buffer still out are in buffers
        already parsed; a thread with none out has had all its launches parsed.  Kernels the
        joiner holds back (launch not known yet) pull every watermark back to their start.
        """
        default = now_ns - DELIVERY_MARGIN_NS
        held = self.joiner.held_start_ns() if self.joiner is not None else None
        if held is not None:
            default = min(default, held)
        return default, {tid: min(t - DELIVERY_MARGIN_NS, default) for tid, t in held_since.items()}

    def _place_by_position(self, address: int, cols: dict, owner: int, mixed: bool, marks: dict) -> None:
        """Give a buffer's kernels their launch time from their position (:mod:`.positions`), in
        the ``queued`` column (CUPTI's clock) as if CUPTI had stamped it: the unstamped ones, not
        replayed from a graph (a graph launch's callback gives those), of a buffer requested
        while positions were on.  ``marks``: each thread's marks, taken once per drain.

        A buffer holding other records than kernels breaks the positions its thread read (each
        read steps one kernel record at a time): then the timestamps take over."""
        offset = cols.pop("offset")
        if mixed:
            self.stop_positions("its buffers hold other records than kernels")
        base = self.positions.base_of(address)
        if base < 0 or owner < 0:
            return
        if owner not in marks:
            marks[owner] = self.positions.marks_of(owner)
        if marks[owner] is None:
            return
        queued = cols["queued"]
        todo = (queued == 0) & (cols["graphNodeId"] == 0)
        if todo.any():
            launch = self.positions.launch_times(marks[owner], base + offset // WORD_BYTES)
            stamp = (launch + self.joiner.clock_offset_ns).astype(queued.dtype)
            cols["queued"] = np.where(todo & (launch > 0), stamp, queued)

    def stop_positions(self, reason: str) -> None:
        """Launch positions cannot be trusted: warn once and have CUPTI stamp launch times instead."""
        if not self.stamps_switched_on:
            self.stamps_switched_on = True
            self.warn_once("positions", f"proton_ctypes: kernels are placed by CUPTI's launch timestamps from now "
                                        f"on, not by their launch positions: {reason}")
            self.lib.enable_latency_timestamps(True)
            if self.positions is not None:
                self.positions.distrust()

    def add_time(self, key: str, seconds: float) -> None:
        """Add ``seconds`` to the diagnostic timing ``key``."""
        self.timings[key] = self.timings.get(key, 0.0) + seconds

    def _detect_stride(self, address: int, buf: np.ndarray, valid: int) -> None:
        """Measure the kernel record size with CUPTI's record walk on the first kernel seen."""
        if not holds_kernel(buf, valid):
            return
        stride = measure_kernel_stride(self.lib, address, valid)
        if stride is None:
            return
        expected = L.expected_kernel_stride(self.lib.version)
        if stride != expected:
            self.warn_once("stride", f"proton_ctypes: CUPTI {self.lib.version} writes {stride}-byte kernel records, "
                                     f"the version table says {expected}; using {stride}")
        self.kernel_stride, self.stride_source = stride, "walk"
        self.parser.set_kernel_stride(stride)
        if self.positions is not None and self.positions.step * WORD_BYTES != stride:
            self.stop_positions(f"the kernel record size is {stride} bytes, not {self.positions.step * WORD_BYTES}")

    def _check_api_records(self) -> None:
        stats = self.joiner.stats
        if (stats["kernels"] < MIN_KERNELS_FOR_API_CHECK or stats["api_matched"] or stats["owner_matched"]
                or stats["lazy_matched"] or stats["py_launched"]):
            return
        if self.launch_source == LAUNCH_FROM_API:
            self.warn_once("api", "proton_ctypes: CUPTI delivered kernel records but no launch-API records; "
                                  "kernels are attributed to the root of their thread's tree")
        else:
            self.warn_once("api", "proton_ctypes: CUPTI delivered kernel records without launch times (queued); "
                                  "kernels are attributed to the root of their thread's tree")

    def lost(self) -> list:
        """``[(count, what)]`` for every way records were lost so far, each read as one phrase
        after its count: dropped by CUPTI, caught in spare buffers past the pool's ceiling,
        buffer requests declined, records without timestamps, records of unknown kinds."""
        pool = self.pool
        out = [(self.cupti_dropped, "activity records dropped by CUPTI"),
               (self.spare_dropped, f"activity records ({self.spare_kernels} of them kernels) found no room under "
                                    f"the {pool.limit_bytes / MIB:g} MiB buffer ceiling (raise {LIMIT_ENV})"),
               (pool.refused, "activity-buffer requests declined (no memory), their records lost")]
        if self.joiner is not None:
            out.append((self.joiner.stats["invalid_time"], "kernel records without timestamps"))
        if self.parser is not None and self.parser.stats["unparsed_bytes"]:
            out.append((1, f"stretch of activity records of unknown kinds left unread "
                           f"({self.parser.stats['unparsed_bytes']} bytes)"))
        return [(int(n), what) for n, what in out if n]

    @property
    def stats(self) -> dict:
        """Stride, drop, parse and join counters."""
        out = {"kernel_stride": self.kernel_stride, "stride_source": self.stride_source,
               "cupti_dropped": self.cupti_dropped, "spare_dropped": self.spare_dropped,
               "spare_kernels": self.spare_kernels, "reclaims": self.reclaims}
        if self.parser is not None:
            out.update({"parse_" + k: v for k, v in self.parser.stats.items()})
        if self.joiner is not None:
            out.update({"join_" + k: v for k, v in self.joiner.stats.items()})
        return out
