"""Decoded launch buffers into the sessions: scope nodes under the kernel node, trace records.

What libproton's ``exitInstrumentedOp`` does for each instrumented launch (3.9):

* the kernel node ``<current context>/<kernel name>`` is created first (with no
  metrics of its own), even when the buffer then fails to decode;
* every event adds, at ``<kernel>/<scope path>``, ``cycles`` (end - start, summed as
  unsigned 64-bit), ``normalized_cycles`` (each event's cycles divided by
  ``num_warps * num_blocks``, summed in event order as doubles), ``device_id`` (the
  device index, a string) and ``device_type`` (libproton's enum as a string:
  ``"1"`` CUDA, ``"0"`` HIP);
* the hatchet file's device block lists the device; ROOT carries ``cycles: 0`` and
  ``normalized_cycles: 0`` (3.9);
* for ``data="trace"`` sessions each launch becomes a cycle record that
  :mod:`proton_ctypes.writers.cycle_trace` writes (a phase holding any replaces the usual trace, as in Proton).

Scope nodes are created in the order libproton first meets them (CTAs in order, each
CTA's warps, each warp's events by end entry, then the CTA's async events).
"""
from __future__ import annotations

import itertools
import os
import sys
from typing import Optional

import numpy as np

from . import general_path, threads
from .registry import G
from .views import first_seen
from ..tree import callpath
from ..backends import mode_types as modes
from ..tree import metrics as tmetrics
from ..tree.phase import CycleRecord
from ..backends.instrumentation.decode import TIME_SHIFT_COST, Decoded, DecodeError, decode
from ..backends.instrumentation.metadata import KernelInfo
from ..backends.instrumentation.modes import sampling_uids, uses

DEVICE_TYPE_CODE = {"HIP": "0", "CUDA": "1"}
BACKEND = "instrumentation"

#: launch order across the process (libproton's per-launch kernel id)
_launch_seq = itertools.count(1).__next__

_U64 = 1 << 64


def scope_totals(dec: Decoded, info: KernelInfo):
    """Per scope, in first-seen order: ``(scope_id, path, cycles, per-event normalised array)``."""
    scope, start, end, _blk = dec.attribution_order()
    if not len(scope):
        return []
    dur = end - start
    denom = float(info.num_warps * dec.num_blocks)
    uniq, first = np.unique(scope, return_index=True)
    out = []
    if len(uniq) == 1:
        sid = int(uniq[0])
        out.append((sid, info.paths.get(sid, ()), int(dur.sum(dtype=np.uint64)), dur.astype(np.float64) / denom))
        return out
    for sid in uniq[np.argsort(first)].tolist():
        d = dur[scope == sid]
        out.append((sid, info.paths.get(sid, ()), int(d.sum(dtype=np.uint64)), d.astype(np.float64) / denom))
    return out


def _seq_sum(start: float, vals: np.ndarray) -> float:
    """``start + v0 + v1 + ...`` added left to right, as libproton accumulates doubles."""
    if len(vals) == 0:
        return start
    if len(vals) == 1:
        return start + float(vals[0])
    return float(np.cumsum(np.concatenate(([start], vals)))[-1])


def add_cycles(flex: dict, node: int, cycles: int, normalized: np.ndarray, device: str, device_type: str) -> None:
    """Accumulate one scope's cycle metrics at ``node`` of one phase's ``flex`` dict."""
    nm = flex.get(node)
    if nm is None:
        nm = flex[node] = {}
    cur = nm.get("cycles")
    if cur is None or cur[1] != tmetrics.INT:
        nm["cycles"] = [False, tmetrics.INT, cycles % _U64]
    else:
        cur[2] = (cur[2] + cycles) % _U64
    cur = nm.get("normalized_cycles")
    if cur is None or cur[1] != tmetrics.DOUBLE:
        nm["normalized_cycles"] = [False, tmetrics.DOUBLE, _seq_sum(float(normalized[0]), normalized[1:])]
    else:
        cur[2] = _seq_sum(cur[2], normalized)
    # properties written as strings, as libproton does (stored under the int tag: the
    # writers print them as they are)
    nm["device_id"] = [True, tmetrics.INT, device]
    nm["device_type"] = [True, tmetrics.INT, device_type]


_PKG_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _frames_inside_package() -> int:
    """How many frames above the caller still belong to proton_ctypes (the launch hook)."""
    f = sys._getframe(2)
    n = 0
    while f is not None and f.f_code.co_filename.startswith(_PKG_DIR):
        f = f.f_back
        n += 1
    return n


def launch_targets(ctx, name: str):
    """``[(session, kernel node)]`` of the active instrumentation sessions of the thread.

    Like :func:`proton_ctypes.core.general_path.op_prepare` (the node is ``<context>/<name>``,
    marked as entered), but only for sessions whose backend is ``instrumentation``:
    libproton files instrumented launches only in the sessions of its instrumentation
    profiler, so a CUPTI or host session sharing the thread's scope stack gets no node.
    """
    threads.ensure(ctx)
    out = []
    for v in ctx.views:
        node = None
        for s in v.sessions:
            if s.active and s.backend_name == BACKEND:
                if node is None:
                    node = callpath.child(v.context_node(ctx.state), name)
                first_seen(s.current.created, node)
                out.append((s, node))
    py = [s for s in G.py_active if s.active and s.backend_name == BACKEND]
    if py:
        # the launching Python stack, without the hook's own frames (README, differences)
        node = callpath.child(general_path.python_node(2 + _frames_inside_package()), name)
        for s in py:
            first_seen(s.current.created, node)
            out.append((s, node))
    return out


def record_launch(ctx, info: KernelInfo, host, device: int, device_type: str, mode_obj,
                  warn=None) -> Optional[Decoded]:
    """Attribute one instrumented launch whose buffer is ``host`` (bytes / uint8 array).

    ``ctx`` is the launching thread's context (:func:`proton_ctypes.core.threads.thread_ctx`).
    Returns the decoded buffer, or None when no active session records the launch.

    Raises:
        IndexError: a sampled warp id the kernel does not have (Proton's message).
        RuntimeError: ``[PROTON] Clock overflow`` (Proton's parser error).
    """
    pairs = launch_targets(ctx, info.name)
    if not pairs:
        return None
    uids = sampling_uids(mode_obj.sampling_options, info.num_warps)
    try:
        dec = decode(host, info.scratch, info.num_warps, uids, warn=warn)
    except DecodeError as e:
        print(f"ParserException [offset={e.offset}]: {e}", file=sys.stderr)
        raise e.to_exception() from None
    if dec.num_events == 0:
        return dec
    dev = str(int(device))
    dtype = DEVICE_TYPE_CODE.get(device_type, "1")
    seq = _launch_seq()
    totals = None
    for s, knode in pairs:
        pd = s.current
        if s.data == "trace":
            cost = TIME_SHIFT_COST.get(device_type, 0) if _time_shift(mode_obj) else 0
            pd.trace.cycles.append(CycleRecord(seq, info.name, knode, info.paths, dec, cost))
            continue
        if totals is None:
            totals = scope_totals(dec, info)
        for _sid, path, cyc, norm in totals:
            node = callpath.walk(knode, path)
            add_cycles(pd.flex, node, cyc, norm, dev, dtype)
        pd.devices.add(int(device))
    return dec


def _time_shift(mode_obj) -> bool:
    return uses(mode_obj, modes.Optimize.TIMESHIFT)
