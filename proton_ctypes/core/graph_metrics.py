"""Metrics given inside a CUDA-graph capture, replayed and attributed per ``replay()``.

A metric given while a stream is captured (a scope's or a launch hook's, a device tensor or
a host number) is not added at capture: as in Proton, each replay of the graph adds it to
``<replay path>/<captured_at>/<capture path>`` in the replay's phase, for every session that
was live at capture and is active at the replay (docs/graph-metrics.md has the design).

* A **book** per captured graph holds its metric **slots**.  A device-tensor slot owns a
  small device region ``[count, dump values, bank 0 values, bank 1 values, ...]`` that the
  metric kernel captured with the graph adds into (:mod:`.graph_metric_kernel`); a host number
  is a constant of the slot, multiplied by the replays at read-back.
* A **bank** gathers the replays of the book that attribute alike (one replay key: same
  epoch, same contexts on the launching thread).  The graph-launch callback (:func:`replayed`,
  one Python call per replay, from the backend) finds the key's bank (or opens one) when the
  key changes and, only then, has the book's **bank word** (device memory) rewritten on the
  replay's stream, ahead of the replay (:attr:`Book.write`); every metric kernel of a replay
  reads that word, counts its run and adds into that bank.  Memory grows with slots x banks,
  never with the number of replays; a replay in the same context as the one before costs the
  device nothing extra.
* Opening a bank records, per active session, the context code and phase a kernel launched
  there would get.  :func:`drain` (at flush, after the device synchronisation a flush makes
  anyway) reads each region once and adds each bank's change since the previous read; regions
  are never reset (replays go on during a flush), a bank is reused once all its replays ran.
"""
from __future__ import annotations

import itertools
import os
import threading
from typing import Callable, Optional

import numpy as np

from .registry import G
from .threads import stack_of, tls
from ..tree import callpath
from ..tree import metrics as tmetrics
from ..tree.codes import node_of

#: ``0`` turns metrics captured with CUDA graphs off (on by default: the engine connects
#: :func:`capture_edge`, :func:`replayed` and :func:`instantiated` to the backend); off, metrics
#: given during a capture are added once, at capture (docs/graph-metrics.md, "Switch")
ENABLE_ENV = "PROTON_CTYPES_GRAPH_METRICS"
#: banks a book holds between two read-backs (``PROTON_CTYPES_GRAPH_METRIC_BANKS``); replays
#: beyond them join the last bank and are counted in :data:`stats` ``["merged_replays"]``
DEFAULT_BANKS = 64
#: the count word in front of a region's banks
COUNT_WORDS = 1
#: the device bank replays nobody reported add into (the bank word's initial zero; never read);
#: bank ``b`` of :attr:`Book.banks` is device bank ``b + 1``
DUMP_BANK = 0

#: every book, by the capture that made it (kept for the life of the process: the graph's
#: kernels keep adding into its regions)
books: dict = {}
#: CUgraph handle -> the book of its latest capture.  torch destroys a captured graph once it is
#: instantiated, so the next capture may reuse the handle: it gets a book of its own
by_graph: dict = {}
#: executable-graph handle -> the book of the capture it was instantiated from (bound at
#: instantiation, so a later capture reusing the graph handle does not take its replays)
by_exec: dict = {}
#: captures begun so far; the capturing thread's current one is ``_capturing.seq``
_captures = itertools.count(1)
_capturing = threading.local()
_lock = threading.Lock()
#: diagnostics: replays seen, replays whose graph has no book, replays merged into a full last bank
stats = {"replays": 0, "unknown_graph": 0, "merged_replays": 0, "banks_read": 0}


#: whether the engine connected the capture and replay hooks to the backend (set by the manager
#: when it starts a backend, from :func:`enabled`)
connected = False


def enabled() -> bool:
    """Whether metrics given during a CUDA-graph capture are replayed with it (:data:`ENABLE_ENV`)."""
    return os.environ.get(ENABLE_ENV, "1").strip() != "0"


def bank_count() -> int:
    """Banks per book (``PROTON_CTYPES_GRAPH_METRIC_BANKS``, at least 1)."""
    try:
        return max(1, int(os.environ.get("PROTON_CTYPES_GRAPH_METRIC_BANKS", DEFAULT_BANKS)))
    except ValueError:
        return DEFAULT_BANKS


class Slot:
    """One metric given during a capture: where each replay's value goes, and where it is kept.

    ``dests``: ``[(session id, capture-time node)]``; ``region``: the device region (or a
    numpy array standing for it) of a tensor metric, None for a host number ``const``;
    ``seen``: the region as last read (the device sums only ever grow; a read adds the change).
    """

    __slots__ = ("key", "is_float", "numel", "dests", "region", "const", "seen")

    def __init__(self, key, is_float, numel, dests, region=None, const=None):
        self.key = key
        self.is_float = is_float
        self.numel = numel
        self.dests = dests
        self.region = region
        self.const = const
        self.seen = None


class Bank:
    """The replays attributed alike (one replay key): ``targets`` ``{session id: (context code,
    phase)}``, the replays launched since the last read-back and the ordinal of the latest one."""

    __slots__ = ("key", "targets", "replays", "last")

    def __init__(self, key, targets: dict):
        self.key = key
        self.targets = targets
        self.replays = 0
        self.last = -1


class Book:
    """The metric slots of one captured graph and the banks its replays add into."""

    def __init__(self, banks: int, write: Optional[Callable] = None):
        #: ``write(device bank, stream, previous stream)``: make the device's metric kernels of
        #: the replays launched from now on (on ``stream``) add into that bank, in stream order
        #: after the replays launched before (on ``previous stream``); None: no device
        self.write = write
        #: the device bank as last written (:data:`DUMP_BANK` until the first reported replay:
        #: replays nobody reported land there, not in a bank of some context)
        self.device_bank = DUMP_BANK
        #: the stream of the latest replay
        self.stream = None
        #: the capture (``capture_edge`` count) that made it
        self.capture = None
        self.nbanks = banks
        self.slots = []
        #: the host's count of this graph's replays (= the device's ordinal of the next one)
        self.launched = 0
        self.key = None
        #: bank index -> Bank, or None when free; ``current``: the bank of ``key``; ``by_key``:
        #: replay key -> index of its bank while that bank is held (a context the replays come
        #: back to, e.g. alternating scopes, keeps its bank until a read-back frees it)
        self.banks = [None] * banks
        self.current = -1
        self.by_key = {}
        #: taken by the launching thread (per replay) and the read-back, never across a CUDA call
        self.lock = threading.Lock()

    def region_words(self, numel: int) -> int:
        """Words of one tensor slot's region: the count, then one bank of ``numel`` values each
        (the dump bank first)."""
        return COUNT_WORDS + (self.nbanks + 1) * numel

    def replay(self, key, targets: Callable[[], dict], stream=None) -> None:
        """Note one replay launched now on ``stream``: its bank (when ``key`` changed: the one
        ``key`` holds, else a free one attributed by ``targets()``), written to the device when
        it is not the last one written."""
        with self.lock:
            if key != self.key or self.current < 0:
                held = self.by_key.get(key)
                if held is not None:
                    self.current = held
                elif None in self.banks:
                    free = self.banks.index(None)
                    self.banks[free] = Bank(key, targets())
                    self.by_key[key] = self.current = free
                elif self.current >= 0:
                    stats["merged_replays"] += 1
                self.key = key
            bank = self.banks[self.current]
            k = self.launched
            bank.replays += 1
            bank.last = k
            self.launched = k + 1
            previous, self.stream = self.stream, stream
            want = self.current + 1
            if want == self.device_bank or self.write is None:
                return
            self.device_bank = want
        try:   # outside the lock: a CUDA call (it queues a memset, it never waits)
            self.write(want, stream, previous)
        except Exception:
            self.device_bank = -1   # unknown: written again at the next replay
            raise


def capture_book(graph):
    """The book of the capture in progress on this thread into ``graph`` (a CUgraph handle),
    or None before its first metric."""
    book = by_graph.get(graph)
    return book if book is not None and book.capture == getattr(_capturing, "seq", None) else None


def new_book(graph, write: Optional[Callable] = None, banks: Optional[int] = None) -> Book:
    """Register the book of the capture in progress on this thread into ``graph`` (its CUgraph
    handle) and return it; ``write``: :attr:`Book.write`."""
    book = Book(bank_count() if banks is None else banks, write)
    book.capture = getattr(_capturing, "seq", None)
    with _lock:
        books[(graph, book.capture)] = book
        by_graph[graph] = book
    return book


def instantiated(exec_handle, graph) -> None:
    """An executable graph was made from ``graph`` (the backend's instantiation callback, right
    after the capture): its replays go to that capture's book from now on."""
    book = by_graph.get(graph)
    if book is None:
        by_exec.pop(exec_handle, None)
    else:
        by_exec[exec_handle] = book


def capture_edge(begin: bool) -> None:
    """A stream capture begins (``begin``) or ends (the backend's capture callbacks): while
    one is in progress every thread leaves the fast paths, so the general path can hand the
    metrics given meanwhile to the graph.  No lock: this runs inside a driver call."""
    G.capturing = max(0, G.capturing + (1 if begin else -1))
    if begin:
        _capturing.seq = next(_captures)
    G.epoch += 1   # every thread regroups at its next event (fast path back on after the end)
    for ctx in list(G.threads.values()):
        ctx.view = None


def _replay_key(ctx):
    """What a bank's replays share: the epoch (sessions, activity, phases) and the contexts of
    the calling thread's views.  No lock is taken: this runs inside the driver's graph launch."""
    if ctx is None:
        return (G.epoch, None)
    views = ctx.views
    if len(views) == 1:   # the common case, without a generator (a third of the call's cost)
        return (G.epoch, ctx.epoch, ctx.state, views[0].top)
    return (G.epoch, ctx.epoch, ctx.state, tuple([v.top for v in views]))


def _targets_now(ctx) -> dict:
    """``{session id: (context code, phase)}`` of the sessions active now, as a kernel launched
    now on this thread would be attributed: its view's top (and state); on a thread without a
    view of the session, the starting thread's top (as the kernel join does), else ROOT."""
    out = {}
    st = ctx.state if ctx is not None else None
    if ctx is not None:
        for v in ctx.views:
            code = v.top if st is None else callpath.child(v.top, st)
            for s in v.sessions:
                if s.active:
                    out[s.id] = (code, s.phase)
    for s in list(G.sessions.values()):
        if s.active and s.id not in out and s.context != "python":
            starter = G.threads.get(s.starter_tid)
            stack = stack_of(starter, s) if starter is not None else None
            out[s.id] = (callpath.ROOT if stack is None else stack[1], s.phase)
    return out


def replayed(graph, tid: int, t: int, exec_handle=None, stream=None) -> None:
    """A replay of the executable graph ``exec_handle`` made from ``graph`` is being launched now
    on the calling thread (``tid``, ``t``: its id and the time; the backend's graph-launch
    callback, before the launch is queued on ``stream``).  Without an instantiation seen (or an
    executable handle), ``graph``'s latest book."""
    stats["replays"] += 1
    book = by_exec.get(exec_handle) if exec_handle is not None else None
    if book is None:
        book = by_graph.get(graph)
    if book is None:
        stats["unknown_graph"] += 1
        return
    ctx = tls.__dict__.get("ctx")   # no AttributeError raised (and caught) on a thread without one
    book.replay(_replay_key(ctx), lambda: _targets_now(ctx), stream)


def _read_region(region) -> np.ndarray:
    if isinstance(region, np.ndarray):
        return region.copy()
    return region.cpu().numpy()


def _values(slot: Slot, words: np.ndarray, bank: int, replays: int):
    """What bank ``bank`` adds for ``slot``: the change of its device sums since the last read,
    or the host number times the replays (a property is set, not summed); None when nothing."""
    if slot.region is None:
        c = slot.const
        if not replays or tmetrics.parse_key(slot.key)[1] == tmetrics.PTY:
            return c if replays else None
        return [x * replays for x in c] if isinstance(c, list) else c * replays
    lo = COUNT_WORDS + (bank + 1) * slot.numel
    vals, old = words[lo:lo + slot.numel], slot.seen[lo:lo + slot.numel]
    if slot.is_float:
        py = [float(x) for x in vals.view(np.float64) - old.view(np.float64)]
    else:
        py = [int(x) for x in vals - old]
    if not replays and not any(py):
        return None
    return py if slot.numel > 1 else py[0]


def _read_back(book: Book) -> None:
    """Add what every bank of ``book`` gathered since the last read to its sessions, and free the
    banks whose replays have all run (the current one stays: replays are still joining it)."""
    reads = [_read_region(sl.region) if sl.region is not None else None for sl in book.slots]
    counts = [int(w[0]) for w in reads if w is not None]
    ran = min(counts) if counts else book.launched     # every replay below this ordinal has run
    with book.lock:
        if ran > book.launched:   # the device ran replays nobody reported: count on from there
            book.launched = ran
        banks = [(b, bank, bank.replays) for b, bank in enumerate(book.banks) if bank is not None]
        for b, bank, _n in banks:
            bank.replays = 0
            if b != book.current and bank.last < ran:
                book.banks[b] = None
                if book.by_key.get(bank.key) == b:
                    del book.by_key[bank.key]
    grafts = {}
    for slot, words in zip(book.slots, reads):
        if words is not None and slot.seen is None:
            slot.seen = np.zeros_like(words)
        for sid, cap_node in slot.dests:
            s = G.sessions.get(sid)
            if s is None or s.data == "trace":
                continue  # Proton's trace shows no metric values on graph scopes
            for b, bank, replays in banks:
                target = bank.targets.get(sid)
                pd = s.phases.get(target[1]) if target is not None else None
                value = _values(slot, words, b, replays) if pd is not None else None
                if value is None:
                    continue
                gkey = (target[0], cap_node)
                node = grafts.get(gkey)
                if node is None:
                    node = grafts[gkey] = callpath.graft(node_of(gkey[0]), cap_node)
                tmetrics.add((pd.flex,), node, {slot.key: value})
        if words is not None:
            slot.seen = words
    stats["banks_read"] += len(banks)


def _live_books() -> list:
    """The books some session still reads (a slot with destinations)."""
    with _lock:
        return [b for b in books.values() if any(sl.dests for sl in b.slots)]


def _has_regions(live: list) -> bool:
    return any(sl.region is not None for b in live for sl in b.slots)


def needs_sync() -> bool:
    """Whether :func:`drain` would synchronize the device (a live book has device regions)."""
    return _has_regions(_live_books())


def drain(synchronize: Optional[Callable[[], None]] = None) -> None:
    """Read every book with live slots back (after ``synchronize``, the device sync) and add what
    each bank gathered to its sessions.  Replays may go on meanwhile, on any thread: the device
    sums only grow, a read adds their change, and a bank is reused only once all its replays ran."""
    live = _live_books()
    if not live:
        return
    if synchronize is not None and _has_regions(live):
        synchronize()
    for book in live:
        _read_back(book)


def forget_session(sid: int) -> None:
    """Drop ``sid`` from every slot (its session was finalized).  Books stay: the graph's
    metric kernels keep adding into their regions for as long as the graph lives."""
    with _lock:
        for book in books.values():
            for sl in book.slots:
                sl.dests = [d for d in sl.dests if d[0] != sid]
