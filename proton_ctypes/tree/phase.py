"""What one phase of one session holds: the typed structure the engine fills and the writers read.

A phase (``proton.data.advance_phase``) keeps the call-path nodes it touched, the user metrics
per node and the kernel aggregates per node (``data="tree"``), or the time line of its events
(``data="trace"``): :class:`TraceData`, three lists of typed records.  Nodes are ids of the
process-wide trie (:mod:`.callpath`); nothing here knows sessions, threads or backends.
"""
from __future__ import annotations

from typing import Any, NamedTuple, Optional

import numpy as np


class ScopeRecord(NamedTuple):
    """One CPU scope instance of a trace (written when the scope exits)."""

    #: the session's number of the thread that entered it (its ``CPU Thread`` lane)
    lane: int
    start_ns: int
    end_ns: int
    #: the scope's call-path node (its state child when entered under a state)
    node: int
    #: the scope id (``scope_id`` of the event)
    scope_id: int
    #: the metrics given to the scope: ``{name: (value type, value)}`` (:mod:`.metrics` types), or
    #: None when it had none (a record holding only ints and None is left alone by the garbage
    #: collector: a trace may hold millions)
    metrics: Optional[dict]


class KernelRecords(NamedTuple):
    """The kernels of one batch that fell into one phase: one array element per kernel."""

    start_ns: np.ndarray
    end_ns: np.ndarray
    stream: np.ndarray
    device: np.ndarray
    #: the kernel's call-path node
    node: np.ndarray
    #: the launch time on the launching thread
    launch_ns: np.ndarray
    #: the session's number of the launching thread (-1: unknown)
    lane: np.ndarray


class CycleRecord(NamedTuple):
    """One instrumented launch (``backend="instrumentation"``): its decoded profile buffer."""

    #: launch order across the process
    seq: int
    kernel_name: str
    kernel_node: int
    #: scope id -> the scope's path below the kernel (names, outermost first)
    paths: dict
    #: the decoded buffer (:class:`proton_ctypes.backends.instrumentation.decode.Decoded`)
    decoded: Any
    #: cycles one probe costs, taken off later timestamps (``time_shift``); 0: none
    shift_cost: int


class TraceData:
    """The events of a ``data="trace"`` phase, in the order they were recorded, by kind."""

    __slots__ = ("scopes", "kernels", "cycles")

    def __init__(self):
        self.scopes: list = []
        self.kernels: list = []
        self.cycles: list = []

    def __bool__(self) -> bool:
        return bool(self.scopes or self.kernels or self.cycles)


class PhaseData:
    """What one phase of one session accumulated."""

    __slots__ = ("created", "flex", "kcount", "ktime", "kdevice", "kernel_nodes", "trace", "devices",
                 "complete", "cleared", "lost")

    def __init__(self):
        #: node -> time_ns the phase first saw it entered (scopes, their state children, ops;
        #: ancestors are implied): Proton lists children in that order
        self.created: dict = {}
        #: node -> {stored metric name: [is_property, type, value]}
        self.flex: dict = {}
        #: kernel node -> launch count / summed duration ns / last device index
        self.kcount: dict = {}
        self.ktime: dict = {}
        self.kdevice: dict = {}
        #: kernel node -> its first launch time_ns (its metrics come from the backend)
        self.kernel_nodes: dict = {}
        #: data="trace": the events (written by :mod:`proton_ctypes.writers.chrome_trace`)
        self.trace = TraceData()
        #: device indices that ran kernels in this phase
        self.devices: set = set()
        #: True once the phase is closed and flushed
        self.complete = False
        #: True for a current phase recreated by ``data.clear``
        self.cleared = False
        #: records the backend lost while the session ran, ``{what: count}`` (set when written)
        self.lost: dict = {}

    def has_data(self) -> bool:
        """Whether anything at all was recorded in this phase."""
        return bool(self.created or self.flex or self.kcount or self.trace)
