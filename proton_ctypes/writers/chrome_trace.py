"""The ``chrome_trace`` format for ``data="trace"`` (compact JSON, Perfetto/chrome://tracing).

The layout is libproton 3.9's (``TraceData::dumpChromeTrace``); the text is what its JSON
library writes: keys sorted, no spaces, non-ASCII characters as UTF-8, one ``\\n`` at the end.

* **No kernels** (host-only): ``{"baseTimeNanoseconds", "displayTimeUnit": "us",
  "traceEvents"}`` with one complete event per CPU scope instance (below); no scopes at
  all: ``{"displayTimeUnit":"us","traceEvents":[]}``.
* **Kernels**: first the lane metadata (``ph`` ``"M"``): ``process_name`` ``"Trace"`` and
  ``process_sort_index`` 0, then ``thread_name``/``thread_sort_index`` for every lane:
  ``CPU Thread N`` (tid ``N``, threads with scope events), ``Graph: Stream S`` (tid
  ``100000 + S``, streams with graph scope events), ``GPU Stream S`` (tid ``200000 + S``).
  Then the CPU scope events, the graph scope events, the ``launch->kernel`` flow events
  and the kernel events.

CPU scope events: ``cat`` ``"scope"`` (``"metric"`` when the scope carried metrics, named
``"<leaf>: <k, v>, ..."`` with the values as strings), ``args`` ``call_stack`` (ROOT
first) and ``scope_id``; ``tid`` the session's thread number (0, 1, ... in order of each
thread's first event in the session); ordered by thread, then start.  Kernel events:
``cat`` ``"kernel"``, named by the kernel (``<metric>`` for metric kernels), ``args``
``call_stack`` and, unless replayed from a captured CUDA graph, an empty ``metrics``;
ordered by stream, then start.  A kernel replayed from a graph captured while profiling
(a ``<captured_at>`` frame in its path) also draws, on its stream's graph lane, the
captured scopes around it (``cat`` ``"scope"``, no ``args``), rebuilt from consecutive
kernels as libproton's ``reconstructGraphScopeEvents`` does.  Flow events join the
innermost CPU scope open on the launching thread at launch (``ph`` ``"s"``, at the scope's
start) to the kernel (``ph`` ``"f"``, at the kernel's start); ``id`` is that scope's event
number in the phase (scopes entered and launches, in time order); one flow per graph launch
and stream.  All ``pid`` 0; ``ts`` in microseconds after ``baseTimeNanoseconds``, the
earliest scope or kernel start.

The event text is assembled from cached per-node fragments because a trace may hold
millions of events.
"""
from __future__ import annotations

import json
from typing import List

import numpy as np

from . import cycle_trace
from ..tree import callpath
from ..tree.export import LOST_METRIC
from ..tree import metrics as tmetrics
from ..tree.phase import KernelRecords, PhaseData, ScopeRecord

#: lane (``tid``) bases of libproton's trace writer
CPU_LANE, GRAPH_LANE, GPU_LANE = 0, 100000, 200000
#: frame libproton names metric kernels by, and the frame above a graph's captured path
METRIC_FRAME = "<metric>"
CAPTURED_AT = callpath.CAPTURED_AT

_EMPTY = '{"displayTimeUnit":"us","traceEvents":[]}\n'


def _dumps(obj) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _num(x: float) -> str:
    """A double as nlohmann::json writes it: Python's shortest repr, except that 1e15 <= |x|
    < 1e16 is already written with an exponent there."""
    r = repr(x)
    if "e" in r or not 1e15 <= abs(x) < 1e16:
        return r
    sign = "-" if r[0] == "-" else ""
    digits = r.lstrip("-").replace(".", "").rstrip("0") or "0"
    return f"{sign}{digits[0]}{'.' + digits[1:] if len(digits) > 1 else ''}e+15"


def _vector_element(x) -> str:
    """One element of a vector metric as C++'s ``ostream <<`` prints it (``%g`` for doubles)."""
    return "%g" % x if isinstance(x, float) else str(x)


def _metric_string(vt: int, value) -> str:
    """A stored metric value as libproton's ``formatFlexibleMetricValue``: ``std::to_string``
    for scalars (``%f`` doubles), ``[a,b]`` of ``ostream <<`` elements for vectors."""
    if vt == tmetrics.INT:
        return str(value)
    if vt == tmetrics.DOUBLE:
        return "%f" % value
    return "[" + ",".join(_vector_element(x) for x in value) + "]"


class _Cache:
    """Per-node JSON fragments: ``(call stack, leaf name)``."""

    def __init__(self):
        self.stacks = {}

    def stack(self, node):
        s = self.stacks.get(node)
        if s is None:
            path = callpath.path(node)
            s = self.stacks[node] = (_dumps(path), _dumps(path[-1]))
        return s


def _scope_head(ev: ScopeRecord, cache):
    """``(text up to "dur":, name)`` of a CPU scope event."""
    stack, leaf = cache.stack(ev.node)
    sid = ev.scope_id
    if ev.metrics:
        strs = [(k, _metric_string(vt, val)) for k, (vt, val) in sorted(ev.metrics.items())]
        metrics = _dumps(dict(strs))
        name = _dumps(json.loads(leaf) + ": " + ", ".join(f"<{k}, {v}>" for k, v in strs))
        return (f'{{"args":{{"call_stack":{stack},"metrics":{metrics},"scope_id":{sid}}},"cat":"metric",'
                f'"dur":'), name
    return f'{{"args":{{"call_stack":{stack},"scope_id":{sid}}},"cat":"scope","dur":', leaf


def render(phase, device_type: str, device_block: dict) -> str:
    """The phase as a chrome trace (the writer signature of :mod:`proton_ctypes.writers`); records
    lost while the session ran are counted in ``otherData.lost_records`` (only when some were)."""
    text = dumps(phase)
    lost = sum(phase.lost.values())
    if lost and text.startswith("{"):
        text = f'{{"otherData":{{"{LOST_METRIC}":{lost}}},' + text[1:]
    return text


def dumps(pd: PhaseData) -> str:
    """Serialise the trace events of one phase."""
    trace = pd.trace
    # a phase holding device cycle records (instrumentation backend) is written as
    # libproton's cycle trace, and only that
    if trace.cycles:
        return cycle_trace.dumps(trace.cycles) + "\n"
    scopes = trace.scopes
    kernels = _Kernels(trace.kernels) if trace.kernels else None
    if kernels is not None and len(kernels.start) == 0:
        kernels = None
    if not scopes and kernels is None:
        return _EMPTY
    cache = _Cache()
    s_lane = np.array([e.lane for e in scopes], dtype=np.int64)
    s_start = np.array([e.start_ns for e in scopes], dtype=np.int64)
    s_end = np.array([e.end_ns for e in scopes], dtype=np.int64)
    base = int(s_start.min()) if len(scopes) else None
    if kernels is not None:
        k0 = int(kernels.start.min())
        base = k0 if base is None else min(base, k0)
    scope_order = np.lexsort((s_start, s_lane)).tolist()
    s_ts = _texts((s_start - base) / 1000)      # the scopes' ts: their events and their flows' starts
    out = []
    if kernels is None:
        _cpu_events(out, scopes, scope_order, s_ts, s_start, s_end, cache)
    else:
        graph = _graph_scopes(kernels, cache)
        _lane_metadata(out, sorted(set(s_lane.tolist())), sorted(graph), kernels.streams)
        _cpu_events(out, scopes, scope_order, s_ts, s_start, s_end, cache)
        _graph_events(out, graph, base)
        _flows_and_kernels(out, kernels, scopes, s_lane, s_ts, s_start, s_end, base, cache)
    return f'{{"baseTimeNanoseconds":{base},"displayTimeUnit":"us","traceEvents":[{",".join(out)}]}}\n'


def _texts(us: np.ndarray) -> list:
    """Microsecond values (float64 array) as the JSON writer prints them, one string each
    (``repr`` through ``map``: no Python frame per value)."""
    fmt = _num if len(us) and float(np.abs(us).max()) >= 1e15 else repr
    return list(map(fmt, us.tolist()))


def _cpu_events(out, scopes, order, ts, s_start, s_end, cache) -> None:
    dur = _texts((s_end - s_start) / 1000)
    append = out.append
    for i in order:
        ev = scopes[i]
        head, name = _scope_head(ev, cache)
        append(f'{head}{dur[i]},"name":{name},"ph":"X","pid":0,"tid":{CPU_LANE + ev.lane},"ts":{ts[i]}}}')


def _lane_metadata(out, cpu_lanes, graph_streams, gpu_streams) -> None:
    append = out.append
    append('{"args":{"name":"Trace"},"name":"process_name","ph":"M","pid":0,"tid":0}')
    append('{"args":{"sort_index":0},"name":"process_sort_index","ph":"M","pid":0,"tid":0}')
    for label, base, ids in (("CPU Thread", CPU_LANE, cpu_lanes), ("Graph: Stream", GRAPH_LANE, graph_streams),
                             ("GPU Stream", GPU_LANE, gpu_streams)):
        for i in ids:
            tid = base + i
            append(f'{{"args":{{"name":{_dumps(f"{label} {i}")}}},"name":"thread_name","ph":"M","pid":0,"tid":{tid}}}')
            append(f'{{"args":{{"sort_index":{tid}}},"name":"thread_sort_index","ph":"M","pid":0,"tid":{tid}}}')


class _Kernels:
    """Every kernel record of the phase, ordered by stream, then start (libproton's order)."""

    def __init__(self, recs: List[KernelRecords]):
        cat = np.concatenate
        start = cat([r.start_ns for r in recs]).astype(np.int64)
        stream = cat([r.stream for r in recs]).astype(np.int64)
        order = np.lexsort((start, stream))
        self.start = start[order]
        self.end = cat([r.end_ns for r in recs]).astype(np.int64)[order]
        self.stream = stream[order]
        self.node = cat([r.node for r in recs]).astype(np.int64)[order]
        n = len(order)
        # launch time and the session's number of the launching thread (-1: unknown)
        self.launch = cat([r.launch_ns for r in recs])[order]
        self.lane = cat([r.lane for r in recs])[order]
        self.streams = sorted(set(self.stream.tolist()))
        self.n = n


def _graph_info(node, cache, memo):
    """``(graph-linked, graph contexts or None)`` of a kernel node (see :func:`_graph_scopes`)."""
    info = memo.get(node)
    if info is None:
        frames = callpath.path(node)
        if CAPTURED_AT not in frames:
            info = (False, None)
        else:
            ctx = []
            seen = False
            for f in frames:
                if f == METRIC_FRAME or f == callpath.METADATA_FRAME:
                    ctx = None  # a metric or metadata kernel: no graph scope
                    break
                if f == CAPTURED_AT:
                    seen = True
                if seen:
                    ctx.append(f)
            info = (True, ctx[:-1] if ctx is not None else None)
        memo[node] = info
    return info


def _graph_scopes(k: _Kernels, cache) -> dict:
    """stream -> ``[(name, start, end), ...]``: the captured scopes around graph-replayed
    kernels, rebuilt per stream from consecutive kernels (libproton's
    ``reconstructGraphScopeEvents``: a scope opens at the first kernel under it and closes
    at the latest end before the first kernel outside it).  Sets ``k.linked``."""
    memo = {}
    nodes, inv = np.unique(k.node, return_inverse=True)
    infos = [_graph_info(n, cache, memo) for n in nodes.tolist()]
    linked = np.array([i[0] for i in infos], dtype=bool)[inv.reshape(-1)] if k.n else np.zeros(0, bool)
    k.linked = linked
    out = {}
    if not linked.any():
        return out
    open_by_stream = {}
    last_end = {}
    node_l, start_l, end_l, stream_l = k.node.tolist(), k.start.tolist(), k.end.tolist(), k.stream.tolist()
    for i in np.nonzero(linked)[0].tolist():
        ctx = memo[node_l[i]][1]
        if ctx is None:
            continue
        s = stream_l[i]
        opened = open_by_stream.setdefault(s, [])
        last = last_end.get(s, 0)
        t0 = start_l[i]
        if not opened:
            opened.extend([name, t0] for name in ctx)
        else:
            common = 0
            while common < len(opened) and common < len(ctx) and opened[common][0] == ctx[common]:
                common += 1
            events = out.setdefault(s, [])
            for name, t in reversed(opened[common:]):
                events.append((name, t, last))
            del opened[common:]
            opened.extend([name, t0] for name in ctx[common:])
        last_end[s] = max(last, end_l[i])
    for s, opened in open_by_stream.items():
        if opened:
            events = out.setdefault(s, [])
            for name, t in opened:
                events.append((name, t, last_end[s]))
    return dict(sorted(out.items()))


def _graph_events(out, graph, base) -> None:
    append = out.append
    for s, events in graph.items():
        tid = GRAPH_LANE + s
        for name, t0, t1 in events:
            append(f'{{"cat":"scope","dur":{_num((t1 - t0) / 1000)},"name":{_dumps(name)},"ph":"X","pid":0,'
                   f'"tid":{tid},"ts":{_num((t0 - base) / 1000)}}}')


def _innermost(starts, ends, times):
    """Per time, the index of the innermost interval ``[starts, ends]`` holding it (-1:
    none); intervals nest (one thread's scopes).  The interval starting last at or before
    the time holds it unless it ended before; then its enclosing intervals are tried."""
    order = np.argsort(starts, kind="stable")
    st, en = starts[order], ends[order]
    pos = np.searchsorted(st, times, side="right") - 1
    cand = np.maximum(pos, 0)
    hit = (pos >= 0) & (en[cand] >= times)
    out = np.where(hit, order[cand], -1)
    miss = np.nonzero((pos >= 0) & ~hit)[0]
    if len(miss):
        parent = [-1] * len(st)  # enclosing interval, by a stack over the sorted intervals
        stack = []
        st_l, en_l = st.tolist(), en.tolist()
        for i in range(len(st_l)):
            while stack and en_l[stack[-1]] < st_l[i]:
                stack.pop()
            parent[i] = stack[-1] if stack else -1
            stack.append(i)
        pos_l, times_l, order_l = pos.tolist(), times.tolist(), order.tolist()
        for m in miss.tolist():
            j, t = pos_l[m], times_l[m]
            while j >= 0 and en_l[j] < t:
                j = parent[j]
            out[m] = order_l[j] if j >= 0 else -1
    return out


def _launch_scopes(k: _Kernels, s_lane, s_start, s_end):
    """Per kernel, the index of the innermost CPU scope open on its launching thread at its
    launch (-1: none), and each scope's event number in the phase."""
    n_s = len(s_start)
    # event numbers: scope entries and distinct launches, in time order (libproton numbers
    # every scope entered and every launch op of the phase)
    o = np.lexsort((k.lane, k.launch))
    lane_o, launch_o = k.lane[o], k.launch[o]
    first = np.ones(k.n, dtype=bool)
    first[1:] = (lane_o[1:] != lane_o[:-1]) | (launch_o[1:] != launch_o[:-1])
    times = np.concatenate([s_start, launch_o[first]])
    rank = np.empty(len(times), dtype=np.int64)
    rank[np.argsort(times, kind="stable")] = np.arange(len(times))
    event_id = rank[:n_s]
    found = np.full(k.n, -1, dtype=np.int64)
    for lane in np.unique(k.lane).tolist():
        if lane < 0:
            continue
        idx = np.nonzero(s_lane == lane)[0]
        if not len(idx):
            continue
        sel = np.nonzero(k.lane == lane)[0]
        inner = _innermost(s_start[idx], s_end[idx], k.launch[sel])
        found[sel] = np.where(inner >= 0, idx[np.maximum(inner, 0)], -1)
    return found, event_id


def _flows_and_kernels(out, k: _Kernels, scopes, s_lane, s_ts, s_start, s_end, base, cache) -> None:
    found, event_id = _launch_scopes(k, s_lane, s_start, s_end)
    ts = _texts((k.start - base) / 1000)
    dur = _texts((k.end - k.start) / 1000)
    stream_l, node_l, found_l = k.stream.tolist(), k.node.tolist(), found.tolist()
    linked = k.linked.tolist()
    event_l = event_id.tolist()
    append = out.append
    prev_stream, prev_launch = None, None
    for i in np.nonzero(found >= 0)[0].tolist():
        s = stream_l[i]
        if s != prev_stream:
            prev_stream, prev_launch = s, None
        j = found_l[i]
        eid = event_l[j]
        if linked[i] and eid == prev_launch:
            continue  # one flow per graph launch on a stream
        append(f'{{"bp":"e","cat":"flow","id":{eid},"name":"launch->kernel","ph":"s","pid":0,'
               f'"tid":{CPU_LANE + scopes[j].lane},"ts":{s_ts[j]}}}')
        append(f'{{"bp":"e","cat":"flow","id":{eid},"name":"launch->kernel","ph":"f","pid":0,'
               f'"tid":{GPU_LANE + s},"ts":{ts[i]}}}')
        prev_launch = eid
    heads = {}
    for i in range(k.n):
        node = node_l[i]
        key = (node, linked[i], stream_l[i])
        head = heads.get(key)
        if head is None:
            stack, leaf = cache.stack(node)
            metrics = "" if linked[i] else ',"metrics":{}'
            head = heads[key] = (f'{{"args":{{"call_stack":{stack}{metrics}}},"cat":"kernel","dur":',
                                 f',"name":{leaf},"ph":"X","pid":0,"tid":{GPU_LANE + stream_l[i]},"ts":')
        append(f'{head[0]}{dur[i]}{head[1]}{ts[i]}}}')
