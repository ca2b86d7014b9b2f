"""CUPTI's activity API as the CUPTI backend sets it up: the clock, the kinds, the record size.

* :func:`calibrate_clock` -- CUPTI's clock against ``time.time_ns()``; the backend joins
  kernels to scopes by timestamp when they agree within :data:`MAX_CLOCK_OFFSET_NS`
  (:func:`choose_attribution`), through external correlation ids otherwise;
* :func:`enable_activity` -- kernel records plus one launch-API record per launch (the
  deny-list recipe, docs/collection.md);
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
from .lib import DRIVER_LAUNCH_CBIDS, RUNTIME_LAUNCH_CBIDS, CuptiLib

#: Largest |CUPTI clock - time.time_ns()| accepted for the timestamp join.
MAX_CLOCK_OFFSET_NS = 50_000
#: Clock reads compared at start; the pair with the tightest read window wins.
CLOCK_PAIRS = 64
ATTRIBUTION_ENV = "PROTON_CTYPES_ATTRIBUTION"


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


def enable_activity(lib: CuptiLib, extcorr: bool, enabled: list) -> None:
    """Kernel records plus launch-API records only: enable the kinds, then deny every other cbid.

    Each kind is appended to ``enabled`` once it is on (the caller switches those off again,
    also when a later one fails).
    """
    kinds = [L.KIND_CONCURRENT_KERNEL, L.KIND_DRIVER, L.KIND_RUNTIME]
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
    return bool((slots == L.KIND_CONCURRENT_KERNEL).any())


def measure_kernel_stride(lib: CuptiLib, address: int, valid: int) -> Optional[int]:
    """The size of the first kernel record of a completed buffer, by CUPTI's own record walk.

    The distance from the first kernel record to the next record (or to the end of the
    buffer when it is the last); None when the buffer holds no kernel record.
    """
    kernel_at = None
    for offset in lib.record_offsets(address, valid):
        if kernel_at is not None:
            return offset - kernel_at
        if ctypes.c_uint32.from_address(address + offset).value == L.KIND_CONCURRENT_KERNEL:
            kernel_at = offset
    return None if kernel_at is None else valid - kernel_at
