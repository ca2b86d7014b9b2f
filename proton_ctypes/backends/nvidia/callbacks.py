"""The one CUPTI subscriber of the process: CUDA-graph resource callbacks, the missing-graph check,
NVTX ranges and the python-context launch callback.

CUPTI allows a single subscriber per process (``cuptiSubscribe`` returns
``CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED`` otherwise), so both uses share
one callback function:

* **RESOURCE domain** (always on): ``GRAPHNODE_CREATED`` fires inside the launch call that
  a stream capture turns into a node, on the capturing thread, so ``(get_native_id(),
  time_ns())`` taken there locates the scopes open at capture.  ``GRAPHNODE_CLONED``
  (at instantiate) maps the executable graph's node id back to the captured one; the
  replayed kernel records carry the *cloned* ids (docs/collection.md, CUDA graphs).
* **Missing-graph check**: ``GRAPHEXEC_CREATED`` (and ``GRAPHNODE_CLONED``, whose graph id is
  the executable graph being built) records each executable graph made while subscribed.  A
  replayed kernel record names its executable graph (``graphId``, which CUPTI fills with the
  exec id); an exec never recorded was created before profiling started and gets Proton's
  ``[PROTON] Cannot find graph for graphExecId`` line on stderr, once per exec
  (:meth:`CallbackHub.check_graph_execs`, called by the joiner per batch).  No driver
  callback is needed for it: nothing runs per launch.
* **NVTX domain** (``TRITON_ENABLE_NVTX``, :mod:`.nvtx`): ``nvtxRangePushA`` / ``nvtxRangePop``
  open and close a scope on the calling thread through the profiler's ``nvtx_scopes``.
* **Graph launches** (``cuGraphLaunch``, the driver's, when the launch times come from the
  kernel records): on API ENTER remember ``(correlationId, thread, time)``.  A replayed
  kernel's record has no ``queued`` time; this gives its launch.  The runtime's
  ``cudaGraphLaunch`` nests the driver call, and the replayed kernels carry the driver
  call's correlation id, as a ``cudaLaunchKernel``'s kernel carries its nested
  ``cuLaunchKernel``'s (measured on the H200 by ``tests/gpu/probe_correlation.py``: 5 600
  of 5 600 torch, Triton and replayed kernels matched a driver callback's id, and one
  replay's id follows the previous one's by 1: the nested call takes no id of its own;
  Proton subscribes the driver domain only, for the same reason).  So the runtime domain
  stays off: CUPTI calls into Python at ENTER and EXIT of each enabled call, two calls per
  replay instead of four; never one per kernel.
* **DRIVER domain, launch ids** (``context="python"`` only): on API ENTER call the
  profiler's ``python_context()`` and remember ``(correlationId, node, thread, time)``.
  The default context installs no kernel-launch callback at all.

Nothing raises out of the callback into CUPTI: failures are counted (``callback_errors``,
``nvtx_errors``).
"""
from __future__ import annotations

import ctypes
import os
import sys
import threading
import time
from itertools import chain

import numpy as np

from . import layout as L
from .graph_hooks import CAPTURE_CBIDS, GraphHooks
from .nvtx import NvtxHooks
from ..threadstate import keep_thread_state
from ...tree.kernels import group
from .cbids import (CB_DOMAIN_DRIVER_API, CB_DOMAIN_NVTX, CB_DOMAIN_RESOURCE, CB_SITE_ENTER, DRIVER_GRAPH_LAUNCH_CBIDS,
                    DRIVER_LAUNCH_CBIDS, RESOURCE_GRAPHEXEC_CREATED, RESOURCE_GRAPHNODE_CLONED,
                    RESOURCE_GRAPHNODE_CREATED)
from .lib import CALLBACK_FUNC, CuptiError, CuptiLib, ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED

#: Every callback object ever handed to CUPTI stays alive for the life of the process.
_KEEP_ALIVE = []
#: The resource callbacks of CUDA-graph bookkeeping.
GRAPH_CBIDS = (RESOURCE_GRAPHNODE_CREATED, RESOURCE_GRAPHNODE_CLONED)
#: Clone links followed at most from a replayed node to the captured one.
MAX_CLONE_HOPS = 64
#: A python-context entry: ``(correlation id, node, native thread id, time_ns)``.
PY_ENTRY_FIELDS = 4
#: A graph-launch entry: ``(correlation id, native thread id, time_ns)``.
GRAPH_LAUNCH_FIELDS = 3
#: Proton's line (GPUProfiler.cpp) for a launched executable graph made before profiling started.
MISSING_GRAPH_MESSAGE = ("[PROTON] Cannot find graph for graphExecId: {}, and it may cause memory leak. "
                         "To avoid this problem, please start profiling before the graph is created.")

OTHER_SUBSCRIBER_MESSAGE = (
    "[PROTON] proton_ctypes cannot profile with CUPTI: another CUPTI subscriber is active in this process "
    "(torch.profiler / Kineto, Nsight Systems (nsys), Nsight Compute, or another profiler). CUPTI allows one "
    "subscriber per process: stop the other profiler first, or run without it.")


def torch_profiler_active() -> bool:
    """Whether torch.profiler (Kineto, a CUPTI user) is profiling in this process right now."""
    torch = sys.modules.get("torch")
    try:
        return bool(torch is not None and torch._C._autograd._profiler_enabled())
    except Exception:
        return False


class _SiteAndCorrelation(ctypes.Structure):
    """The fields of ``CUpti_CallbackData`` the launch callback reads."""
    _fields_ = [("site", ctypes.c_int),
                ("_pad", ctypes.c_byte * (L.CALLBACK_PARAMS_OFFSET - ctypes.sizeof(ctypes.c_int))),
                ("params", ctypes.c_void_p),
                ("_pad2", ctypes.c_byte * (L.CALLBACK_CORRELATION_OFFSET - L.CALLBACK_PARAMS_OFFSET
                                           - ctypes.sizeof(ctypes.c_void_p))),
                ("correlation_id", ctypes.c_uint32)]


class CallbackHub(GraphHooks, NvtxHooks):
    """Owns the subscriber handle, the graph-node maps and the python-context entries."""

    def __init__(self, lib: CuptiLib):
        self.lib = lib
        self.subscriber = ctypes.c_void_p()
        self.subscribed = False
        #: graph node id -> (native thread id, time_ns) at GRAPHNODE_CREATED.
        self.created = {}
        #: cloned node id -> the node it was cloned from.
        self.cloned = {}
        #: python-context entries ``(corr, node, tid, time_ns)``, appended by launching threads.
        self.py_entries = []
        #: graph-launch entries ``(corr, tid, time_ns)`` (:meth:`enable_graph_launch_callbacks`)
        self.graph_launches = []
        self.callback_errors = 0
        #: ``mode="pcsampling"``: a :class:`~.pcsampling.PCSampler` also fed every callback
        self.pc = None
        #: executable-graph ids made while subscribed, and those already reported missing (the
        #: backend hands in sets it keeps across starts, as Proton keeps its graph states)
        self.graph_execs = set()
        self.graph_warned = set()
        self.graph_check = False
        #: executable-graph handle -> the CUgraph handle GRAPHEXEC_CREATED names; the graph a
        #: clone was made from (GRAPHNODE_CLONED), for when that handle is the exec's own clone
        self.exec_graph = {}
        self.clone_source = {}
        #: ``(capture(begin), replayed(graph handle, thread, time_ns))`` (:attr:`Backend.graph_hooks`):
        #: stream-capture edges and graph replays for metrics captured with a graph; None: off
        self.graph_hooks = None
        #: with launch positions, :meth:`.positions.LaunchPositions.touch`: graph nodes captured
        #: and graph launches are placed by their time, so the thread's next scope edge must
        #: write an entry of its own; else None
        self.edge_touch = None
        #: ``(enter(name), exit() -> bool)`` from the profiler while NVTX ranges are scopes, else None
        self.nvtx_scopes = None
        self.nvtx_errors = 0
        #: nvtxRangePop calls with no NVTX-opened scope on their thread (ignored)
        self.nvtx_unmatched = 0
        #: ``(domain, cbid)`` switched on through the hub, switched off at :meth:`unsubscribe`
        self._enabled = []
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ subscription
    def subscribe(self, python_context=None) -> None:
        """Subscribe with a callback built for ``python_context`` (None: resource callbacks only)."""
        callback = CALLBACK_FUNC(self._make_callback(python_context))
        _KEEP_ALIVE.append(callback)
        try:
            self.subscriber = self.lib.subscribe(callback)
        except CuptiError as e:
            if e.code == ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
                raise RuntimeError(OTHER_SUBSCRIBER_MESSAGE) from e
            raise
        self.subscribed = True

    def _enable(self, domain: int, cbid: int) -> None:
        self.lib.enable_callback(self.subscriber, domain, cbid)
        self._enabled.append((domain, cbid))

    def enable_graph_callbacks(self) -> None:
        """Turn on GRAPHNODE_CREATED and GRAPHNODE_CLONED."""
        for cbid in GRAPH_CBIDS:
            self._enable(CB_DOMAIN_RESOURCE, cbid)

    def enable_graph_check(self) -> bool:
        """Turn on the missing-graph check (the GRAPHEXEC_CREATED resource callback).

        False (and no check) where this CUPTI lacks the graph-id functions or refuses the
        callback id: better no line than a wrong one.
        """
        if not self.lib.has_graph_ids:
            return False
        try:
            self._enable(CB_DOMAIN_RESOURCE, RESOURCE_GRAPHEXEC_CREATED)
        except CuptiError:
            return False
        self.graph_check = True
        return True

    def enable_graph_launch_callbacks(self) -> None:
        """Turn on the driver's graph-launch callbacks (the launch of replayed kernels; the
        runtime's ``cudaGraphLaunch`` nests one, module docstring)."""
        for cbid in DRIVER_GRAPH_LAUNCH_CBIDS:
            self._enable(CB_DOMAIN_DRIVER_API, cbid)

    def enable_launch_callbacks(self) -> None:
        """Turn on the driver launch callbacks (python context, PC sampling)."""
        for cbid in DRIVER_LAUNCH_CBIDS.values():
            self._enable(CB_DOMAIN_DRIVER_API, cbid)

    def unsubscribe(self) -> None:
        """Switch every callback off and drop the subscription (errors ignored: used in teardown)."""
        if not self.subscribed:
            return
        self.subscribed = False
        self.nvtx_scopes = None
        for domain, cbid in dict.fromkeys(self._enabled):
            self.lib.disable_callback(self.subscriber, domain, cbid)
        self._enabled = []
        self.lib.unsubscribe(self.subscriber)
        self.subscriber = ctypes.c_void_p()

    # ------------------------------------------------------------------ the callback
    def _make_callback(self, python_context):
        """Build the Python function CUPTI calls; the launch path binds everything it uses locally.

        With :attr:`pc` set, every callback goes to the PC sampler first (its launch EXIT
        work must run before the python-context entry is consumed; it never raises).
        """
        inner = self._make_inner_callback(python_context)
        pc = self.pc
        if pc is None:
            return inner
        on_pc = pc.on_callback

        def callback(userdata, domain, cbid, data):
            on_pc(domain, cbid, data)
            inner(userdata, domain, cbid, data)
        return callback

    def _make_inner_callback(self, python_context):
        on_resource, on_nvtx = self._on_resource, self._on_nvtx
        driver, resource, nvtx = CB_DOMAIN_DRIVER_API, CB_DOMAIN_RESOURCE, CB_DOMAIN_NVTX
        at = _SiteAndCorrelation.from_address  # one ctypes object per callback, two field reads
        graph_append = self.graph_launches.append
        graph_cbids = frozenset(DRIVER_GRAPH_LAUNCH_CBIDS)
        now = time.time_ns
        native_id = threading.get_native_id
        enter = CB_SITE_ENTER
        keep = keep_thread_state
        on_replay, on_capture = self._on_graph_replay, self._on_capture
        capture_cbids = CAPTURE_CBIDS
        hub = self
        if python_context is None:
            def callback(userdata, domain, cbid, data):
                keep()
                touch = hub.edge_touch
                if touch is not None and domain != nvtx:
                    touch()
                if domain == resource:
                    on_resource(cbid, data)
                elif domain == nvtx:
                    on_nvtx(cbid, data)
                elif domain == driver:     # graph launches and captures
                    head = at(data)
                    if cbid in capture_cbids:
                        on_capture(cbid, head.site)
                    elif head.site == enter:
                        t = now()
                        graph_append((head.correlation_id, native_id(), t))
                        on_replay(head, t, cbid)
            return callback

        append = self.py_entries.append

        def callback(userdata, domain, cbid, data):
            if domain == driver:   # a thread's first driver callback is an ENTER: keep() there only
                head = at(data)
                if cbid in capture_cbids:
                    keep()
                    on_capture(cbid, head.site)
                elif head.site == enter:
                    keep()
                    t = now()
                    append((head.correlation_id, python_context(), native_id(), t))
                    if cbid in graph_cbids:
                        graph_append((head.correlation_id, native_id(), t))
                        on_replay(head, t, cbid)
            elif domain == resource:
                keep()
                on_resource(cbid, data)
            elif domain == nvtx:
                keep()
                on_nvtx(cbid, data)
        return callback

    # ------------------------------------------------------------------ missing-graph check
    def check_graph_execs(self, exec_ids: np.ndarray) -> None:
        """Report each executable-graph id of ``exec_ids`` (the ``graphId`` of replayed kernel
        records) that was never seen made while subscribed: once per exec id, on stderr."""
        if not self.graph_check:
            return
        try:
            # grouped as int64 bit patterns (no sort), read back in the ids' own type
            for exec_id in group(exec_ids.astype(np.int64, copy=False))[0].astype(exec_ids.dtype).tolist():
                if exec_id == 0 or exec_id in self.graph_execs:
                    continue
                with self._lock:
                    if exec_id in self.graph_warned:
                        continue
                    self.graph_warned.add(exec_id)
                _write_stderr(MISSING_GRAPH_MESSAGE.format(exec_id))
        except Exception:  # a diagnostic: never the reason a batch is lost
            self.callback_errors += 1

    def _on_resource(self, cbid, data) -> None:
        """GRAPHNODE_CREATED / GRAPHNODE_CLONED: remember where the node was made / what it copies;
        GRAPHEXEC_CREATED (and CLONED): remember the executable graph as made while profiling."""
        if cbid != RESOURCE_GRAPHNODE_CREATED and cbid != RESOURCE_GRAPHNODE_CLONED:
            if cbid == RESOURCE_GRAPHEXEC_CREATED:
                self._on_exec_created(data)
            return
        try:
            desc = ctypes.c_void_p.from_address(data + L.RESOURCE_DESCRIPTOR_OFFSET).value
            if not desc:
                return
            if cbid == RESOURCE_GRAPHNODE_CLONED:
                self.note_clone(desc)
            if cbid == RESOURCE_GRAPHNODE_CLONED and self.graph_check:
                # nodes are cloned into the executable graph being instantiated: its graph id
                # is the exec id (as Proton keys it)
                graph_id = self.lib.graph_id(ctypes.c_void_p.from_address(desc + L.GRAPHDATA_GRAPH_OFFSET).value)
                if graph_id is not None:
                    self.graph_execs.add(graph_id)
            node_id = self._node_id(ctypes.c_void_p.from_address(desc + L.GRAPHDATA_NODE_OFFSET).value)
            if node_id is None:
                return
            if cbid == RESOURCE_GRAPHNODE_CREATED:
                self.created[node_id] = (threading.get_native_id(), time.time_ns())
            else:
                original = self._node_id(ctypes.c_void_p.from_address(desc + L.GRAPHDATA_ORIGINAL_NODE_OFFSET).value)
                if original is not None and original != node_id:
                    self.cloned[node_id] = original
        except Exception:
            self.callback_errors += 1

    def _on_exec_created(self, data) -> None:
        try:
            desc = ctypes.c_void_p.from_address(data + L.RESOURCE_DESCRIPTOR_OFFSET).value
            if not desc:
                return
            exec_handle = ctypes.c_void_p.from_address(desc + L.GRAPHDATA_GRAPH_EXEC_OFFSET).value
            graph = ctypes.c_void_p.from_address(desc + L.GRAPHDATA_GRAPH_OFFSET).value
            if exec_handle and graph:
                self.exec_graph[exec_handle] = graph
                self._on_instantiated(exec_handle)
            exec_id = self.lib.graph_exec_id(exec_handle)
            if exec_id is not None:
                self.graph_execs.add(exec_id)
        except Exception:
            self.callback_errors += 1

    def _node_id(self, node_handle):
        return self.lib.graph_node_id(node_handle) if node_handle else None

    # ------------------------------------------------------------------ used by the parser
    def take_python_entries(self) -> np.ndarray:
        """Remove and return the python-context entries so far as an ``(n, PY_ENTRY_FIELDS)`` int64 array."""
        entries = self.py_entries
        n = len(entries)
        if n == 0:
            return np.zeros((0, PY_ENTRY_FIELDS), np.int64)
        chunk = entries[:n]
        del entries[:n]
        try:   # one C loop over the flattened tuples (half the time of np.asarray on a list of tuples)
            return np.fromiter(chain.from_iterable(chunk), np.int64, n * PY_ENTRY_FIELDS).reshape(n, PY_ENTRY_FIELDS)
        except (TypeError, ValueError):  # python_context() returned None or a non-int somewhere
            return np.asarray([(c, -1 if not isinstance(v, int) else v, t, s) for c, v, t, s in chunk],
                              np.int64).reshape(n, PY_ENTRY_FIELDS)

    def take_graph_launches(self) -> np.ndarray:
        """Remove and return the graph-launch entries so far as an ``(n, GRAPH_LAUNCH_FIELDS)`` int64 array."""
        entries = self.graph_launches
        n = len(entries)
        chunk = entries[:n]
        del entries[:n]
        return np.asarray(chunk, np.int64).reshape(n, GRAPH_LAUNCH_FIELDS)

    def capture_points(self) -> dict:
        """``{native tid: [time_ns, ...]}`` of every graph node captured (GRAPHNODE_CREATED)."""
        out = {}
        for tid, t in list(self.created.values()):
            out.setdefault(tid, []).append(t)
        return out

    def resolve_graph_nodes(self, node_ids: np.ndarray):
        """``(cap_tid, cap_ns)`` per replayed node id: follow clone links to the captured node
        (Python once per distinct node id; :func:`group` finds them without a sort)."""
        uniq, _first, inverse = group(node_ids.astype(np.int64, copy=False))
        uniq = uniq.astype(node_ids.dtype)        # int64 bit patterns back to the ids' own type
        tids = np.full(uniq.size, -1, np.int64)
        stamps = np.full(uniq.size, -1, np.int64)
        cloned, created = self.cloned, self.created
        for i, node in enumerate(uniq.tolist()):
            hops = 0
            while node in cloned and hops < MAX_CLONE_HOPS:
                node = cloned[node]
                hops += 1
            hit = created.get(node)
            if hit is not None:
                tids[i], stamps[i] = hit
        return tids[inverse], stamps[inverse]


def _write_stderr(line: str) -> None:
    """One line on stderr (Python's, else file descriptor 2), never raising."""
    try:
        err = sys.stderr
        if err is not None:
            err.write(line + "\n")
            err.flush()
            return
    except Exception:
        pass
    try:
        os.write(2, (line + "\n").encode())
    except Exception:
        pass
