"""The ``chrome_trace`` format for ``data="trace"`` (compact JSON, Perfetto/chrome://tracing).

Scope events: one complete event per scope instance, ``cat`` ``"scope"`` (or ``"metric"``
when the scope carried metrics, named ``"<leaf>: <k, v>, ..."`` with string values),
lanes ``pid`` 0 / ``tid`` = per-session dense thread number.  Kernel events: ``cat``
``"kernel"``, lane ``pid`` = device, ``tid`` = stream, ``args.call_stack`` = the path.
``ts`` are microseconds after ``baseTimeNanoseconds`` (the earliest event); events are
ordered by lane, then start time.  Keys are sorted, separators compact, exactly as
``json.dumps(..., separators=(",", ":"), sort_keys=True)`` would write them; the event
text is assembled from cached per-node fragments because a trace may hold millions.
"""
from __future__ import annotations

import json

import numpy as np

from . import cycle_trace
from ..tree import callpath
from ..tree import metrics as tmetrics

_dumps = json.dumps


def _stack_json(cache, node):
    s = cache.get(node)
    if s is None:
        path = callpath.path(node)
        s = cache[node] = (_dumps(path, separators=(",", ":")), _dumps(path[-1]))
    return s


def _scope_body(ev, cache):
    """Everything of a scope event but dur/pid/tid/ts, as a JSON fragment (leading part)."""
    _kind, _tid, _t0, _t1, node, sid, raw = ev
    stack, leaf = _stack_json(cache, node)
    if raw:
        items = sorted(raw.items())
        strs = [(k, tmetrics.trace_string(vt, val)) for k, (vt, val) in items]
        metrics = _dumps(dict(strs), separators=(",", ":"))
        name = _dumps(json.loads(leaf) + ": " + ", ".join(f"<{k}, {v}>" for k, v in strs))
        return (f'{{"args":{{"call_stack":{stack},"metrics":{metrics},"scope_id":{sid}}},"cat":"metric",'
                f'"dur":'), name
    return f'{{"args":{{"call_stack":{stack},"scope_id":{sid}}},"cat":"scope","dur":', leaf


def render(phase, device_type: str, device_block: dict) -> str:
    """The phase as a chrome trace (the writer signature of :mod:`proton_ctypes.writers`)."""
    return dumps(phase)


def dumps(pd) -> str:
    """Serialise the trace events of one phase."""
    # a phase holding device cycle records (instrumentation backend) is written as
    # libproton's cycle trace, and only that
    cycles = [e for e in pd.trace if e[0] == "cycles"]
    if cycles:
        return cycle_trace.dumps(cycles)
    cache = {}
    scopes = [e for e in pd.trace if e[0] == "scope"]
    kern = [e for e in pd.trace if e[0] == "kernels"]
    # scope lanes: dense per-session thread numbers in order of first event
    lanes = {}
    for ev in sorted(scopes, key=lambda e: e[2]):
        lanes.setdefault(ev[1], len(lanes))
    n_s = len(scopes)
    k_start = np.concatenate([e[1] for e in kern]) if kern else np.zeros(0, np.int64)
    k_end = np.concatenate([e[2] for e in kern]) if kern else np.zeros(0, np.int64)
    k_stream = np.concatenate([e[3] for e in kern]).astype(np.int64) if kern else np.zeros(0, np.int64)
    k_dev = np.concatenate([e[4] for e in kern]).astype(np.int64) if kern else np.zeros(0, np.int64)
    k_node = np.concatenate([e[5] for e in kern]) if kern else np.zeros(0, np.int64)
    s_start = np.array([e[2] for e in scopes], dtype=np.int64)
    s_end = np.array([e[3] for e in scopes], dtype=np.int64)
    s_lane = np.array([lanes[e[1]] for e in scopes], dtype=np.int64)
    group = np.concatenate([np.zeros(n_s, np.int64), 1 + k_dev])
    lane = np.concatenate([s_lane, k_stream])
    start = np.concatenate([s_start, k_start])
    end = np.concatenate([s_end, k_end])
    base = int(start.min()) if len(start) else 0
    order = np.lexsort((start, lane, group))
    ts = ((start - base) / 1000).tolist()
    dur = ((end - start) / 1000).tolist()
    lane_l = lane.tolist()
    out = []
    append = out.append
    kbody = {}
    k_dev_l = k_dev.tolist()
    k_node_l = k_node.tolist()
    for i in order.tolist():
        if i < n_s:
            head, name = _scope_body(scopes[i], cache)
            append(f'{head}{dur[i]!r},"name":{name},"ph":"X","pid":0,"tid":{lane_l[i]},"ts":{ts[i]!r}}}')
        else:
            j = i - n_s
            node = k_node_l[j]
            head = kbody.get(node)
            if head is None:
                stack, leaf = _stack_json(cache, node)
                head = kbody[node] = (f'{{"args":{{"call_stack":{stack}}},"cat":"kernel","dur":', leaf)
            append(f'{head[0]}{dur[i]!r},"name":{head[1]},"ph":"X","pid":{k_dev_l[j]},"tid":{lane_l[i]},'
                   f'"ts":{ts[i]!r}}}')
    if not out:  # 3.9 writes no base time for an empty trace
        return '{"displayTimeUnit":"us","traceEvents":[]}'
    return f'{{"baseTimeNanoseconds":{base},"displayTimeUnit":"us","traceEvents":[{",".join(out)}]}}'
