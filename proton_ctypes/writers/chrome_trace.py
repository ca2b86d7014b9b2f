"""The ``chrome_trace`` format for ``data="trace"`` (compact JSON, Perfetto/chrome://tracing).

Scope events: one complete event per scope instance, ``cat`` ``"scope"`` (or ``"metric"``
when the scope carried metrics, named ``"<leaf>: <k, v>, ..."`` with string values),
lanes ``pid`` 0 / ``tid`` = per-session dense thread number.  Kernel events: ``cat``
``"kernel"``, lane ``pid`` = device, ``tid`` = stream, ``args.call_stack`` = the path.
``ts`` are microseconds after ``baseTimeNanoseconds`` (the earliest event).
"""
from __future__ import annotations

import json

from ..tree import callpath
from ..tree import metrics as tmetrics


def _scope_event(ev, tids):
    _kind, tid, t0, t1, node, sid, raw = ev
    stack = callpath.path(node)
    args = {"call_stack": stack, "scope_id": sid}
    if raw:
        items = sorted(raw.items())
        args["metrics"] = {k: tmetrics.trace_string(vt, val) for k, (vt, val) in items}
        name = stack[-1] + ": " + ", ".join(f"<{k}, {tmetrics.trace_string(vt, val)}>" for k, (vt, val) in items)
        cat = "metric"
    else:
        name = stack[-1]
        cat = "scope"
    lane = tids.setdefault(tid, len(tids))
    return (0, lane, t0, t1, {"args": args, "cat": cat, "name": name, "ph": "X", "pid": 0, "tid": lane})


def _kernel_events(ev):
    _kind, starts, ends, streams, devices, nodes = ev
    paths = {}
    out = []
    for s, e, st, d, n in zip(starts.tolist(), ends.tolist(), streams.tolist(), devices.tolist(), nodes.tolist()):
        p = paths.get(n)
        if p is None:
            p = paths[n] = callpath.path(n)
        out.append((1 + d, st, s, e, {"args": {"call_stack": p}, "cat": "kernel", "name": p[-1], "ph": "X",
                                      "pid": d, "tid": st}))
    return out


def dumps(pd) -> str:
    """Serialise the trace events of one phase."""
    tids = {}
    events = []
    for ev in sorted((e for e in pd.trace if e[0] == "scope"), key=lambda e: e[2]):
        events.append(_scope_event(ev, tids))
    for ev in pd.trace:
        if ev[0] == "kernels":
            events.extend(_kernel_events(ev))
    events.sort(key=lambda e: (e[0], e[1], e[2]))
    base = min((e[2] for e in events), default=0)
    out = []
    for _g, _lane, t0, t1, body in events:
        body["dur"] = (t1 - t0) / 1000
        body["ts"] = (t0 - base) / 1000
        out.append(body)
    doc = {"baseTimeNanoseconds": base, "displayTimeUnit": "us", "traceEvents": out}
    return json.dumps(doc, separators=(",", ":"), sort_keys=True)
