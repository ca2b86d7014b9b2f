"""The CUPTI hub's part in metrics captured with CUDA graphs (docs/graph-metrics.md).

Two things the engine must learn from the driver, through :attr:`Backend.graph_hooks`:

* **capture edges**: ``cuStreamBeginCapture*`` (at ENTER, before the stream captures) and
  ``cuStreamEndCapture*`` (at EXIT): metrics given in between belong to the graph;
* **replays**: each driver ``cuGraphLaunch`` (once per replay; the runtime's call nests one),
  at its ENTER (before the replay is queued), with its stream, the executable graph and the
  captured graph it was made from (``GRAPHEXEC_CREATED`` gives
  the pair, :attr:`CallbackHub.exec_graph`, and is passed on at once: torch destroys the captured
  graph after instantiating it, and a later capture may reuse its handle).

:class:`GraphHooks` is a part of :class:`~.callbacks.CallbackHub` (which owns the subscriber,
the ``exec_graph`` map, ``graph_hooks`` and ``callback_errors``).  Nothing raises into CUPTI.
"""
from __future__ import annotations

import ctypes
import threading

from . import layout as L
from .cbids import (CB_DOMAIN_DRIVER_API, CB_SITE_ENTER, DRIVER_CAPTURE_BEGIN_CBIDS, DRIVER_CAPTURE_END_CBIDS,
                    DRIVER_LAUNCH_CBIDS)
from .lib import CuptiError

#: Clone links followed at most from an executable graph's graph to the captured one.
MAX_CLONE_HOPS = 64
#: The stream-capture begin and end callback ids.
CAPTURE_CBIDS = frozenset(DRIVER_CAPTURE_BEGIN_CBIDS + DRIVER_CAPTURE_END_CBIDS)
#: ``cuGraphLaunch_ptsz``: its NULL stream is the thread's default stream, not the legacy one
GRAPH_LAUNCH_PTSZ_CBID = DRIVER_LAUNCH_CBIDS["cuGraphLaunch_ptsz"]
#: ``CU_STREAM_PER_THREAD``: the handle naming the calling thread's default stream in any call
STREAM_PER_THREAD = 0x2
#: ``cuGraphLaunch_params``: ``{CUgraphExec hGraphExec; CUstream hStream}``
GRAPH_LAUNCH_STREAM_OFFSET = ctypes.sizeof(ctypes.c_void_p)


class GraphHooks:
    """Capture edges and graph replays, handed to the engine's ``graph_hooks``."""

    def enable_capture_callbacks(self) -> None:
        """Turn on the driver's stream-capture begin/end callbacks (metrics given while a graph is
        captured are replayed with it, :attr:`graph_hooks`)."""
        for cbid in DRIVER_CAPTURE_BEGIN_CBIDS + DRIVER_CAPTURE_END_CBIDS:
            try:
                self._enable(CB_DOMAIN_DRIVER_API, cbid)
            except CuptiError:  # an id this CUPTI does not know (ToGraph is CUDA 12.3+)
                pass

    def _on_capture(self, cbid, site) -> None:
        """Tell the engine a capture begins (at the begin call's ENTER) or ended (at the end
        call's EXIT) on this thread."""
        hooks = self.graph_hooks
        if hooks is None:
            return
        try:
            if cbid in DRIVER_CAPTURE_BEGIN_CBIDS:
                if site == CB_SITE_ENTER:
                    hooks[0](True)
            elif site != CB_SITE_ENTER:
                hooks[0](False)
        except Exception:
            self.callback_errors += 1

    def note_clone(self, desc: int) -> None:
        """GRAPHNODE_CLONED (``CUpti_GraphData`` at ``desc``): the graph being built is a clone of
        ``originalGraph`` (the captured one, or a clone of it)."""
        clone = ctypes.c_void_p.from_address(desc + L.GRAPHDATA_GRAPH_OFFSET).value
        source = ctypes.c_void_p.from_address(desc + L.GRAPHDATA_ORIGINAL_GRAPH_OFFSET).value
        if clone and source and clone != source:
            self.clone_source[clone] = source

    def captured_graph(self, exec_handle):
        """The captured graph an executable graph was made from: GRAPHEXEC_CREATED's graph,
        followed back through clones; None when the exec was made before profiling."""
        graph = self.exec_graph.get(exec_handle)
        hops = 0
        while graph in self.clone_source and hops < MAX_CLONE_HOPS:
            graph = self.clone_source[graph]
            hops += 1
        return graph

    def _on_graph_replay(self, head, t, cbid=None) -> None:
        """A driver graph launch (once per replay, the runtime call nests one): tell the engine
        which captured graph is replayed, and on which stream (``cuGraphLaunch_params``)."""
        hooks = self.graph_hooks
        if hooks is None or not head.params:
            return
        try:
            exec_handle = ctypes.c_void_p.from_address(head.params).value
            graph = self.captured_graph(exec_handle)
            if graph is not None:
                stream = ctypes.c_void_p.from_address(head.params + GRAPH_LAUNCH_STREAM_OFFSET).value or 0
                if not stream and cbid == GRAPH_LAUNCH_PTSZ_CBID:
                    stream = STREAM_PER_THREAD
                hooks[1](graph, threading.get_native_id(), t, exec_handle, stream)
        except Exception:
            self.callback_errors += 1

    def _on_instantiated(self, exec_handle) -> None:
        """GRAPHEXEC_CREATED (right after a capture, for torch): tell the engine which captured
        graph the executable graph was made from, while that graph handle is still its own."""
        hooks = self.graph_hooks
        if hooks is None:
            return
        try:
            graph = self.captured_graph(exec_handle)
            if graph is not None:
                hooks[2](exec_handle, graph)
        except Exception:
            self.callback_errors += 1
