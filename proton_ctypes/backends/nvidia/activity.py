"""CUPTI's activity API as the CUPTI backend sets it up: the clock, the kinds, the record size.

* :func:`calibrate_clock` -- CUPTI's clock against ``time.time_ns()``; the backend joins
  kernels to scopes by timestamp when they agree within :data:`MAX_CLOCK_OFFSET_NS`
  (:func:`choose_attribution`), through external correlation ids otherwise;
* :func:`choose_launch_source` / :func:`enable_activity` -- where each kernel's launch (thread
  and host time) comes from: the kernel record itself (:data:`LAUNCH_FROM_KERNEL`: the thread
  owning the per-thread buffer it was written to, and its ``queued`` latency timestamp), or
  one launch-API record per launch (:data:`LAUNCH_FROM_API`, the deny-list recipe).  The API
  kinds make CUPTI intercept *every* driver/runtime call, denied or not (0.3-0.6 us each on
  the H200, ~21 calls per kernel in a torch training step), so they are only the fallback
  (docs/collection.md);
* :func:`measure_kernel_stride` -- the kernel record size, measured with CUPTI's own
  record walk on the first buffer holding a kernel.

Every CUPTI call goes through :class:`~.lib.CuptiLib`.
"""
from __future__ import annotations

import ctypes
import os
import time
from typing import Optional

import numpy as np

from . import layout as L
from ..base import tightest_offset
from .cbids import DRIVER_LAUNCH_CBIDS, RUNTIME_LAUNCH_CBIDS
from .lib import CuptiLib

#: Largest |CUPTI clock - time.time_ns()| accepted for the timestamp join.
MAX_CLOCK_OFFSET_NS = 50_000
#: Clock reads compared at start; the pair with the tightest read window wins.
CLOCK_PAIRS = 64
ATTRIBUTION_ENV = "PROTON_CTYPES_ATTRIBUTION"
#: Launch thread and time from the kernel record (buffer owner, ``queued``): no API records.
LAUNCH_FROM_KERNEL = "kernel"
#: Launch thread and time from one launch-API record per launch (DRIVER + RUNTIME kinds).
LAUNCH_FROM_API = "api"
#: Launch thread from the buffer owner, launch time from the record's place in that buffer
#: among the thread's scope edges (:mod:`.positions`): no API records, no latency timestamps.
LAUNCH_FROM_POSITION = "position"
#: the sources that need kernel records only
KERNEL_RECORD_SOURCES = (LAUNCH_FROM_KERNEL, LAUNCH_FROM_POSITION)
#: Forces a launch source (``kernel``, ``position`` or ``api``).
LAUNCH_SOURCE_ENV = "PROTON_CTYPES_LAUNCH_SOURCE"
#: ``0``: one buffer queue for every thread (CUPTI before 13's default), a diagnostic of what
#: CUPTI's per-thread buffers cost the launching threads; the launch source is then ``api``
PER_THREAD_BUFFERS_ENV = "PROTON_CTYPES_PER_THREAD_BUFFERS"
#: ``1``: latency timestamps wait for the first context change (:func:`lazy_timestamps`)
LAZY_TIMESTAMPS_ENV = "PROTON_CTYPES_LAZY_TIMESTAMPS"
#: ``0``: CUPTI stays attached after a session's stop (by default it is detached, ``cuptiFinalize``,
#: as Proton does: :func:`finalize_at_stop`)
FINALIZE_ENV = "PROTON_CTYPES_CUPTI_FINALIZE"


def calibrate_clock(lib: CuptiLib, pairs: int = CLOCK_PAIRS) -> tuple:
    """``(window_ns, offset_ns)``: CUPTI's clock minus ``time.time_ns()`` from the tightest of ``pairs`` reads."""
    return tightest_offset(lib.timestamp, time.time_ns, pairs)


def choose_attribution(offset_ns: int, environ=None) -> tuple:
    """``(attribution, forced)``: ``"extcorr"`` when forced by ``PROTON_CTYPES_ATTRIBUTION`` or
    when the clocks disagree by more than :data:`MAX_CLOCK_OFFSET_NS`, else ``"timestamp"``."""
    env = os.environ if environ is None else environ
    forced = env.get(ATTRIBUTION_ENV, "").strip().lower() == "extcorr"
    if forced or abs(offset_ns) > MAX_CLOCK_OFFSET_NS:
        return "extcorr", forced
    return "timestamp", forced


def choose_launch_source(lib: CuptiLib, extcorr: bool, environ=None, serialized: bool = False,
                         launch_callbacks: bool = False) -> tuple:
    """``(source, per_thread_buffers)``: :data:`LAUNCH_FROM_POSITION` when CUPTI gives every
    launching thread buffers of its own (and can stamp launch times, the fallback should the
    positions fail, :mod:`.positions`), with the latency timestamps off; else
    :data:`LAUNCH_FROM_API`; and whether the buffers are per thread.
    ``PROTON_CTYPES_LAUNCH_SOURCE=kernel`` (or lazy timestamps, :func:`lazy_timestamps`) asks for
    :data:`LAUNCH_FROM_KERNEL` instead: the ``queued`` latency timestamps, ~2 us of CPU per launch.
    So do ``launch_callbacks`` (``context="python"``): the callback at every launch gives its
    thread and time, and the backend switches the timestamps off again.

    Called before the buffer callbacks are registered (the per-thread attribute must be set
    then).  External-correlation attribution needs the API records (CUPTI writes an
    external-correlation record per API record only; none without the API kinds, measured
    on the H200), and so does a CUPTI lacking either feature.  ``serialized`` kernel records
    (``mode="pcsampling"``, :func:`enable_activity`) are joined through the API records too:
    whether CUPTI stamps their ``queued`` time is not known, and that mode synchronizes every
    launch anyway.  Per-thread buffers are asked for in every case (CUDA 13's default): the
    buffer pool grows with the launching threads; ``PROTON_CTYPES_PER_THREAD_BUFFERS=0`` asks
    for one queue instead (a diagnostic, :data:`PER_THREAD_BUFFERS_ENV`).
    """
    env = os.environ if environ is None else environ
    if env.get(PER_THREAD_BUFFERS_ENV, "").strip() == "0":
        lib.set_per_thread_buffers(False)
        return LAUNCH_FROM_API, False
    per_thread = lib.set_per_thread_buffers(True)
    forced = env.get(LAUNCH_SOURCE_ENV, "").strip().lower()
    if extcorr or serialized or forced == LAUNCH_FROM_API or not per_thread:
        return LAUNCH_FROM_API, per_thread
    if launch_callbacks or forced == LAUNCH_FROM_KERNEL or lazy_timestamps(env):
        return (LAUNCH_FROM_KERNEL if lib.enable_latency_timestamps(True) else LAUNCH_FROM_API), per_thread
    return (LAUNCH_FROM_POSITION if lib.enable_latency_timestamps(False) else LAUNCH_FROM_API), per_thread


def lazy_timestamps(environ=None) -> bool:
    """Whether a session of the kernel launch source starts with the latency timestamps off
    and switches them on at the first context change (``PROTON_CTYPES_LAZY_TIMESTAMPS=1``).

    Stamping costs the launching thread CPU time at every launch (about 1.3 us on the H200),
    and a kernel launched while no thread has a scope and no session has changed needs no
    launch time: its context is its thread's at the session's start. Off by default until
    it is measured on a GPU that CUPTI stamps every launch once they are switched on in the
    middle of a session (``tests/gpu/probe_latency_toggle.py``)."""
    env = os.environ if environ is None else environ
    return env.get(LAZY_TIMESTAMPS_ENV, "").strip() == "1"


def finalize_at_stop(environ=None) -> bool:
    """Whether a session's stop detaches CUPTI (``cuptiFinalize``), as Proton's does: yes unless
    ``PROTON_CTYPES_CUPTI_FINALIZE=0``.

    A CUPTI left attached, all its kinds and callbacks off, still costs every later launch of
    the program: on an H100 +0.5 us per Triton launch and +0.8 us per torch launch of one
    thread, and +4 to +8 us per launch with four launching threads (``tests/gpu/probe_after_stop.py``,
    ``bench/threads.py``'s bare run after the profiled one; ``docs/collection.md``).  Staying
    attached saves a start about 8 ms and a first session's launches some microseconds each:
    what ``0`` is for, in a program that starts and stops sessions all the time."""
    env = os.environ if environ is None else environ
    return env.get(FINALIZE_ENV, "").strip() != "0"


def enable_activity(lib: CuptiLib, extcorr: bool, enabled: list, source: str = LAUNCH_FROM_API,
                    serialized: bool = False) -> None:
    """The kinds of ``source``: kernel records alone (:data:`LAUNCH_FROM_KERNEL`), or kernel and
    launch-API records with every other cbid denied (plus external correlation with ``extcorr``).
    ``serialized``: ``KIND_KERNEL`` records (kernels run one at a time) instead of concurrent
    ones, for ``mode="pcsampling"`` as Proton (continuous PC sampling is not compatible with
    concurrent kernel tracing).

    Each kind is appended to ``enabled`` once it is on (the caller switches those off again,
    also when a later one fails).
    """
    kernel_kind = L.KIND_KERNEL if serialized else L.KIND_CONCURRENT_KERNEL
    if source in KERNEL_RECORD_SOURCES:
        lib.enable_kind(kernel_kind)
        enabled.append(kernel_kind)
        return
    kinds = [kernel_kind, L.KIND_DRIVER, L.KIND_RUNTIME]
    if extcorr:
        kinds.append(L.KIND_EXTERNAL_CORRELATION)
    for kind in kinds:
        lib.enable_kind(kind)
        enabled.append(kind)
    # After the kinds: enabling a kind resets its per-cbid filter (measured on CUPTI 13.0).
    lib.deny_api_records(set(DRIVER_LAUNCH_CBIDS.values()), set(RUNTIME_LAUNCH_CBIDS.values()))


def holds_kernel(buf: np.ndarray, valid: int) -> bool:
    """Whether any 8-byte aligned slot of the buffer starts with the kernel kind (a cheap pre-check)."""
    slots = buf[: valid - valid % L.RECORD_ALIGNMENT].view("<u4")[0::2]     # the first u32 of each 8-byte slot
    return bool(((slots == L.KIND_CONCURRENT_KERNEL) | (slots == L.KIND_KERNEL)).any())   # np.isin sorts: slow


def measure_kernel_stride(lib: CuptiLib, address: int, valid: int) -> Optional[int]:
    """The size of the first kernel record of a completed buffer, by CUPTI's own record walk.

    The distance from the first kernel record to the next record (or to the end of the
    buffer when it is the last); None when the buffer holds no kernel record.
    """
    kernel_at = None
    for offset in lib.record_offsets(address, valid):
        if kernel_at is not None:
            return offset - kernel_at
        if ctypes.c_uint32.from_address(address + offset).value in L.KERNEL_KINDS:
            kernel_at = offset
    return None if kernel_at is None else valid - kernel_at
