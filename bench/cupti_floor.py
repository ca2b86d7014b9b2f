"""The CUPTI floor of a benchmark: what CUPTI itself costs, with no profiler around it.

A profile of GPU kernels through CUPTI costs at least what CUPTI charges for writing the
kernel activity records (on the launching thread, and on the GPU). Both Proton and proton_ctypes
pay that, so where a case's overhead is mostly this floor no profiler can be much cheaper
than Proton there. :class:`Floor` has the small part of the profiler API that the benchmarks call
(``start``, ``finalize``, ``scope``, ``enter_scope``, ``exit_scope``, ``state``), and only
switches CUPTI on and off. Its recipes are:

* ``kernels``: ``CONCURRENT_KERNEL`` records and nothing else, which is the floor common
  to every CUPTI kernel profiler;
* ``ours``: the CUPTI configuration of proton_ctypes's ``PROTON_CTYPES_LAUNCH_SOURCE=kernel``
  (the default before launch positions): kernel records, one activity buffer per launching
  thread, and latency timestamps (each kernel's ``queued`` time, which the join reads). No
  Python of proton_ctypes runs at all.
* ``per_thread``: ``ours`` without the latency timestamps: the CUPTI configuration of the
  default launch positions (``proton_ctypes/backends/nvidia/positions.py``), whose buffers are
  also zeroed at each request.
* ``subscribed``: ``per_thread`` plus a CUPTI callback subscriber (``cuptiSubscribe``) with no
  callback switched on; ``callbacks``: ``subscribed`` with the callbacks proton_ctypes switches
  on in the shadow context (graph node resource callbacks, the driver's graph-launch and
  stream-capture calls), their callback doing nothing.  What a subscriber charges a launch.
* ``pylog``: ``per_thread``, and scopes that write down their edges as cheaply as Python can
  (:class:`LogScope`): the floor of any pure-Python profiler that attributes kernels to scopes
  after the fact, as proton_ctypes does.  A thread of the floor's own takes the logs away every
  :data:`LOG_TAKE_INTERVAL_S`, as a collector would.

Buffers are recycled from a small pool and never read. The scopes and states of the CUPTI
recipes do nothing: writing them down is the profiler's cost, not CUPTI's.
``flush_interval_s`` (0: never) has a thread of the floor's own call ``cuptiActivityFlushAll``
that often, as a profiler's collector does, so that CUPTI hands back its buffers during a long
run (the memory then left growing is CUPTI's own).
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import threading
from time import time_ns

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: the recipes by name (see the module doc): (per-thread buffers, latency timestamps)
RECIPES = {"kernels": (False, False), "ours": (True, True), "per_thread": (True, False), "pylog": (True, False),
           "subscribed": (True, False), "callbacks": (True, False)}
#: the recipes with a callback subscriber, and those that also switch callbacks on
SUBSCRIBING_RECIPES = ("subscribed", "callbacks")
CALLBACK_RECIPES = ("callbacks",)
#: the recipes whose scopes log their edges (:class:`LogScope`)
LOGGING_RECIPES = ("pylog",)
#: seconds between two takes of the ``pylog`` scopes' logs
LOG_TAKE_INTERVAL_S = 0.5


class _Logs(threading.local):
    log = None


_logs = _Logs()
#: every thread's log (the taking thread empties them)
_all_logs = []


def _thread_log() -> list:
    log = _logs.log = []
    _all_logs.append(log)
    return log


class LogScope:
    """The least a pure-Python scope that logs can do: at its entry and its exit, one thread-local
    lookup and one ``(time_ns(), code)`` entry (two list appends) -- no stack, no node."""

    __slots__ = ("name",)

    def __init__(self, name, metrics=None):
        self.name = name

    def __enter__(self):
        log = _logs.log
        if log is None:
            log = _thread_log()
        log.append(time_ns())
        log.append(0)
        return self

    def __exit__(self, *exc):
        log = _logs.log
        if log is None:
            log = _thread_log()
        log.append(time_ns())
        log.append(0)


def take_logs() -> int:
    """Empty every thread's log, as a collector takes them (whole entries only); returns the
    number of items taken."""
    taken = 0
    for log in list(_all_logs):
        n = len(log) & ~1
        del log[:n]
        taken += n
    return taken


def _log_edge() -> None:
    """One log entry on the calling thread (``enter_scope`` and ``exit_scope`` of ``pylog``)."""
    log = _logs.log
    if log is None:
        log = _thread_log()
    log.append(time_ns())
    log.append(0)


#: bytes per activity buffer and CUPTI's alignment for them
BUFFER_BYTES = 8 * 1024 * 1024
BUFFER_ALIGN = 8


class Floor:
    """CUPTI switched on (kernel records, the recipe's options) between ``start`` and ``finalize``."""

    def __init__(self, recipe: str, lib=None, keep_records: bool = False, flush_interval_s: float = 0.0,
                 on_kernel=None):
        if recipe not in RECIPES:
            raise ValueError(f"unknown floor recipe {recipe!r} (one of {sorted(RECIPES)})")
        self.recipe = recipe
        self._lib = lib
        self._pool, self._buffers = [], {}
        self._lock = threading.Lock()
        self._callbacks = None
        self._registered = False
        self.records_bytes = 0
        self.flush_interval_s = flush_interval_s
        self._stop_flushing = threading.Event()
        if recipe in LOGGING_RECIPES:     # the scopes of this floor log their edges
            self.scope = self.state = LogScope
            self.enter_scope, self.exit_scope = self._log_enter, self._log_exit
        #: with ``keep_records``: ``(owner thread, queued, start)`` of every kernel record (probes)
        self.kernels = [] if keep_records else None
        #: probes: ``on_kernel(owner thread, buffer address, record offset)`` for each kernel
        #: record of a buffer handed back, while the buffer is still whole
        self.on_kernel = self._keep if keep_records else on_kernel
        #: buffer address -> the number of its latest request (1, 2, ...: the order CUPTI asked), and
        #: thread -> the address of the buffer it asked for last (the one it writes into now; a
        #: recycled buffer is not cleared)
        self.requests, self.request_number, self.current = 0, {}, {}

    # ------------------------------------------------------------------ CUPTI buffers
    def _on_request(self, buffer, size, max_records) -> None:
        with self._lock:
            buf = self._pool.pop() if self._pool else None
            if buf is None:
                raw = ctypes.create_string_buffer(BUFFER_BYTES + BUFFER_ALIGN)
                address = (ctypes.addressof(raw) + BUFFER_ALIGN - 1) // BUFFER_ALIGN * BUFFER_ALIGN
                buf = (address, raw)
            me = threading.get_native_id()
            self._buffers[buf[0]] = buf + (me,)
            self.requests += 1
            self.request_number[buf[0]] = self.requests
            self.current[me] = buf[0]
        buffer[0] = buf[0]
        size[0] = BUFFER_BYTES
        max_records[0] = 0

    def _on_complete(self, context, stream_id, buffer, size, valid) -> None:
        with self._lock:
            buf = self._buffers.pop(buffer, None)
            self.records_bytes += valid
        if buf is None:
            return
        if self.on_kernel is not None and valid:
            from proton_ctypes.backends.nvidia import layout

            for offset in self._lib.record_offsets(buffer, valid):
                if ctypes.c_uint32.from_address(buffer + offset).value in layout.KERNEL_KINDS:
                    self.on_kernel(buf[2], buffer, offset)
        with self._lock:
            self._pool.append(buf[:2])

    def _keep(self, owner: int, buffer: int, offset: int) -> None:
        record, offsets = buffer + offset, self.field_offsets
        self.kernels.append((owner, ctypes.c_uint64.from_address(record + offsets["queued"]).value,
                             ctypes.c_uint64.from_address(record + offsets["start"]).value))

    # ------------------------------------------------------------------ the profiler API the benches call
    def start(self, name=None, **kwargs) -> int:
        """Switch CUPTI's kernel records on (the arguments of ``proton.start`` are ignored)."""
        from proton_ctypes.backends.nvidia import layout
        from proton_ctypes.backends.nvidia.lib import BUFFER_COMPLETE_FUNC, BUFFER_REQUEST_FUNC, load_cupti

        if self._lib is None:
            self._lib = load_cupti()
        #: kernel-record field name -> byte offset (for ``on_kernel`` hooks)
        self.field_offsets = {name: offset for name, _fmt, offset in layout.KERNEL_FIELDS}
        lib = self._lib
        per_thread, timestamps = RECIPES[self.recipe]
        if not self._registered:
            if per_thread:
                lib.set_per_thread_buffers(True)
            self._callbacks = (BUFFER_REQUEST_FUNC(self._on_request), BUFFER_COMPLETE_FUNC(self._on_complete))
            lib.register_buffer_callbacks(*self._callbacks)
            self._registered = True
        if timestamps:
            lib.enable_latency_timestamps(True)
        lib.enable_kind(layout.KIND_CONCURRENT_KERNEL)
        if self.recipe in SUBSCRIBING_RECIPES:
            self._subscribe(lib)
        self._stop_flushing.clear()
        if self.flush_interval_s > 0:
            threading.Thread(target=self._flush_loop, name="cupti-floor-flush", daemon=True).start()
        if self.recipe in LOGGING_RECIPES:
            threading.Thread(target=self._take_loop, name="cupti-floor-logs", daemon=True).start()
        return 0

    def _subscribe(self, lib) -> None:
        """A subscriber whose callback does nothing, with proton_ctypes's shadow-context callback
        ids switched on for ``callbacks``."""
        from proton_ctypes.backends.nvidia import cbids
        from proton_ctypes.backends.nvidia.callbacks import GRAPH_CBIDS
        from proton_ctypes.backends.nvidia.lib import CALLBACK_FUNC

        self._subscriber_callback = CALLBACK_FUNC(lambda *args: None)
        self._subscriber = lib.subscribe(self._subscriber_callback)
        self._enabled = []
        if self.recipe in CALLBACK_RECIPES:
            wanted = ([(cbids.CB_DOMAIN_RESOURCE, c) for c in GRAPH_CBIDS + (cbids.RESOURCE_GRAPHEXEC_CREATED,)]
                      + [(cbids.CB_DOMAIN_DRIVER_API, c) for c in cbids.DRIVER_GRAPH_LAUNCH_CBIDS
                         + cbids.DRIVER_CAPTURE_BEGIN_CBIDS + cbids.DRIVER_CAPTURE_END_CBIDS])
            for domain, cbid in wanted:
                try:
                    lib.enable_callback(self._subscriber, domain, cbid)
                    self._enabled.append((domain, cbid))
                except Exception:       # an id this CUPTI does not know, as proton_ctypes skips it
                    pass

    def _unsubscribe(self, lib) -> None:
        for domain, cbid in self._enabled:
            lib.disable_callback(self._subscriber, domain, cbid)
        lib.unsubscribe(self._subscriber)

    def _take_loop(self) -> None:
        while not self._stop_flushing.wait(LOG_TAKE_INTERVAL_S):
            take_logs()

    @staticmethod
    def _log_enter(name, *args, **kwargs) -> int:
        _log_edge()
        return 0

    @staticmethod
    def _log_exit(name=None, *args, **kwargs) -> int:
        _log_edge()
        return 0

    def _flush_loop(self) -> None:
        while not self._stop_flushing.wait(self.flush_interval_s):
            self._lib.flush_all_quietly(0)

    def finalize(self, *args, **kwargs) -> None:
        """Switch the kernel records off, hand every buffer back and detach CUPTI
        (``cuptiFinalize``), as both profilers do at their stop: a CUPTI left attached makes the
        process's later launches dearer (``docs/collection.md``), and a bench times its bare
        loops before and after the profiled one.  The next ``start`` attaches it afresh."""
        from proton_ctypes.backends.nvidia import layout

        lib = self._lib
        self._stop_flushing.set()
        lib.disable_kind(layout.KIND_CONCURRENT_KERNEL)
        if RECIPES[self.recipe][1]:
            lib.enable_latency_timestamps(False)
        if self.recipe in SUBSCRIBING_RECIPES:
            self._unsubscribe(lib)
        lib.flush_all_quietly()
        lib.finalize_quietly()
        self._registered = False          # CUPTI forgot the buffer callbacks
        if self.recipe in LOGGING_RECIPES:
            take_logs()

    @staticmethod
    def scope(name, metrics=None):
        """A scope that records nothing."""
        return contextlib.nullcontext()

    state = scope

    @staticmethod
    def enter_scope(name, *args, **kwargs) -> int:
        return 0

    @staticmethod
    def exit_scope(name=None, *args, **kwargs) -> int:
        return 0


def floor_profiler(impl: str, lib=None, flush_interval_s: float = 0.0) -> Floor:
    """The :class:`Floor` of a bench's ``floor:<recipe>`` implementation name."""
    if ROOT not in sys.path:
        sys.path.insert(0, ROOT)
    return Floor(impl.split(":", 1)[1], lib=lib, flush_interval_s=flush_interval_s)
