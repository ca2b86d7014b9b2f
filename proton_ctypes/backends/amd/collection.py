"""What the two AMD backends share: the collection skeleton around their vendor library.

:class:`AmdCollection` is the part of :class:`~proton_ctypes.backends.rocprof.RocprofilerBackend`
and :class:`~proton_ctypes.backends.roctracer.RoctracerBackend` that does not depend on the
library: the environment check and the choice of attribution at start, the periodic-flushing
timer thread, the flush (synchronise the device, take what the library completed, parse it,
hand the batch to the sink), stop, and the device block.  A subclass says how to collect
(:meth:`AmdCollection._collect`), whether it is collecting (:meth:`AmdCollection._collecting`),
how to end (:meth:`AmdCollection._end_collection`) and which agents describe its devices
(:meth:`AmdCollection._agents_by_device`).
"""
from __future__ import annotations

import threading
from typing import Callable, Iterable, Optional

import numpy as np

from ..base import ATTRIBUTION_EXTCORR, ATTRIBUTION_TIMESTAMP, DEFAULT_FLUSH_INTERVAL_S, Backend
from ..modes import NO_MODE, Mode
from . import devices as rocm_devices, lib as rocm_lib, parse as rocm_parse

#: the kernel name of a record whose name could not be resolved
UNKNOWN_KERNEL = "<unknown>"


class AmdCollection(Backend):
    """The shared skeleton of the AMD backends (module docstring); not a backend by itself."""

    device_type = "HIP"
    #: name of the ``periodic_flushing`` timer thread
    timer_name = "proton_ctypes-amd-flush"

    def __init__(self, hip=None, environ=None, flush_interval_s: float = DEFAULT_FLUSH_INTERVAL_S,
                 synchronize: Optional[Callable[[], object]] = None):
        """``hip``: a hip-python module (``False``: none), ``environ``: the environment to read
        (default ``os.environ``), ``synchronize``: the device synchronisation (default HIP's)."""
        self._hip, self._environ = hip, environ
        self.flush_interval_s = flush_interval_s
        self._synchronize = synchronize
        self.sink = None
        self.mode = NO_MODE
        self.attribution = ATTRIBUTION_TIMESTAMP
        self._parse_dropped = 0
        self._joiner = rocm_parse.KernelJoiner()
        self._queues = rocm_parse.IdMap()
        self._flush_lock = threading.RLock()
        self._timer: Optional[threading.Thread] = None
        self._timer_stop = threading.Event()

    # ------------------------------------------------------------------ contract
    @property
    def invalid(self) -> int:
        """Kernel records skipped because they end before they start (Proton skips them too)."""
        return self._joiner.invalid

    @property
    def unmatched(self) -> int:
        """Kernels delivered without a launch-API record (``launch_ns = start_ns``)."""
        return self._joiner.unmatched

    def flush(self) -> None:
        """Synchronise the device, flush the library's buffer and deliver what completed."""
        self._flush(sync=True, final=False)

    def stop(self) -> None:
        """Stop the timer, deliver everything (unmatched kernels included), end collection."""
        self._timer_stop.set()
        if self._timer is not None and self._timer is not threading.current_thread():
            self._timer.join()
        self._timer = None
        if self._collecting():
            self._flush(sync=True, final=True)
            self._end_collection()
        self.sink = None

    def device_info(self, devices: Iterable[int]) -> dict:
        """``{"HIP": {"0": {arch, bus_width, clock_rate, memory_clock_rate, num_sms}}}`` through
        hip-python, else from the library's agents (``{}`` if no device)."""
        by_dev = self._agents_by_device()
        out = {}
        for d in sorted(set(int(x) for x in devices)):
            info = rocm_devices.hip_device_info(d, self._hip)
            if info is None and d in by_dev:
                info = rocm_devices.agent_device_info(by_dev[d])
            out[str(d)] = info if info is not None else {}
        return {"HIP": out} if out else {}

    # ------------------------------------------------------------------ for subclasses
    def _begin(self, mode: Mode) -> None:
        """The start of every ``start``: Proton's environment check, then keep the mode."""
        rocm_lib.check_amd_env(self._environ)
        self.mode = mode

    def _wants_extcorr(self, calibration, python_context) -> bool:
        """Whether to attribute through external correlation: forced by
        ``PROTON_CTYPES_ATTRIBUTION``, needed by the python context, or because the vendor clock
        matches no Python clock."""
        override = rocm_lib.attribution_override(self._environ)
        return override == ATTRIBUTION_EXTCORR or python_context is not None or \
            (override != ATTRIBUTION_TIMESTAMP and not calibration.agrees)

    def _start_timer(self) -> None:
        """``periodic_flushing``: deliver every ``flush_interval_s`` from a thread of our own."""
        if self.mode.periodic_flushing:
            self._timer_stop.clear()
            self._timer = threading.Thread(target=self._periodic, name=self.timer_name, daemon=True)
            self._timer.start()

    def _add_launch_log(self, log) -> None:
        """Hand the launch stamps taken on the launching threads (external-correlation fallback:
        ``(correlation, time_ns, thread, python node)`` tuples) to the join; they win over the
        library's launch records."""
        if log:
            a = np.array(log, dtype=np.int64).reshape(-1, rocm_parse.LAUNCH_LOG_FIELDS)
            self._joiner.add_launches(a[:, 0], a[:, 1], a[:, 2], a[:, 3])

    def _collecting(self) -> bool:
        """Whether the library is set up (a flush has something to ask it)."""
        raise NotImplementedError

    def _collect(self, final: bool) -> np.ndarray:
        """Flush the library's buffer and return the kernel batch of what completed (``final``:
        kernels still waiting for their launch record are delivered too)."""
        raise NotImplementedError

    def _end_collection(self) -> None:
        """Stop the library's collection (after the final flush)."""

    def _agents_by_device(self) -> dict:
        """Device index -> the library's agent record (the device block's fallback)."""
        return {}

    # ------------------------------------------------------------------ work
    def _periodic(self) -> None:
        while not self._timer_stop.wait(self.flush_interval_s):
            try:
                self._flush(sync=False, final=False)
            except Exception:  # a timed flush must never kill its thread; the next one retries
                pass

    def _flush(self, sync: bool, final: bool) -> None:
        if not self._collecting():
            return
        with self._flush_lock:
            if sync:
                (self._synchronize or (lambda: rocm_devices.device_synchronize(self._hip)))()
            batch = self._collect(final)
            sink = self.sink
        if sink is not None and len(batch):
            sink(batch)
