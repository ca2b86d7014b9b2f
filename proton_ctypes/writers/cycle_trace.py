"""The chrome trace of cycle events (``data="trace"`` with the instrumentation backend).

When a phase holds cycle events, Proton 3.9 writes them -- and only them -- with its
``StreamChromeTraceWriter``: ``{"displayTimeUnit": "ns", "traceEvents": [...]}``, one
complete event per scope instance with

* ``pid`` ``"<kernel> Core<sm> CTA<block>"``, ``tid`` ``"warp <w> (line <l>)"`` (lines
  separate overlapping scopes of one warp), ``cat`` the kernel name, ``cname`` a colour
  of Perfetto's palette per scope (in first-seen order, per kernel);
* ``ts``/``dur`` in microseconds at a nominal 1 GHz (cycles / 1000): each CTA is placed
  at its ``globaltimer`` start relative to the earliest CTA, its first event at that
  instant;
* ``args``: ``call_stack`` (the path above the scope), ``Init Time (ns)``, ``Post Final
  Time (ns)``, ``Finalization Time (ns)``, ``Frequency (MHz)`` (1000.0).

Async events (3.9) follow the scopes of their CTA: ``cat`` ``"async"`` slices when both
ends are in one warp, else two zero-length ``cat`` ``"flow"`` endpoints bound by
``bind_id``.  This module mirrors libproton's ``convertToTimelineTrace`` (events sorted
per launch by CTA, warp and start; scope ids renumbered by leaf name; the call stack of
the launch's first event) and the writer.
"""
from __future__ import annotations

import json
from typing import List

from ..tree import callpath
from ..tree.phase import CycleRecord

COLORS = ("cq_build_passed", "cq_build_failed", "thread_state_iowait", "thread_state_running",
          "thread_state_runnable", "thread_state_unknown", "rail_response", "rail_idle", "rail_load",
          "cq_build_attempt_passed", "cq_build_attempt_failed")

FREQ = 1000.0
_U64 = 1 << 64


def _i64(x: int) -> int:
    x %= _U64
    return x - _U64 if x >= 1 << 63 else x


class _Block:
    __slots__ = ("block_id", "proc", "init", "prefinal", "postfinal", "traces", "links")

    def __init__(self, block_id, proc, init, prefinal, postfinal):
        self.block_id = block_id
        self.proc = proc
        self.init = init
        self.prefinal = prefinal
        self.postfinal = postfinal
        #: [(uid, [[start, end, scope], ...]), ...]
        self.traces = []
        #: [[start, end, scope, uid_start, uid_end], ...]
        self.links = []


def _kernel_timeline(rec: CycleRecord):
    """One launch as libproton's timeline: ``(blocks, scope names, call stack, name)``."""
    kname, knode, paths, dec, cost = rec.kernel_name, rec.kernel_node, rec.paths, rec.decoded, rec.shift_cost
    bid = dec.blk_id.tolist()
    # (block id, uid, start, end, scope, block index, is async, uid of the end)
    sync = [(bid[b], u, s, e, sc, b, False, u) for sc, s, e, b, u in
            zip(dec.ev_scope.tolist(), dec.ev_start.tolist(), dec.ev_end.tolist(), dec.ev_blk.tolist(),
                dec.ev_uid.tolist())]
    asyn = [(bid[b], us, s, e, sc, b, True, ue) for sc, s, e, b, us, ue in
            zip(dec.as_scope.tolist(), dec.as_start.tolist(), dec.as_end.tolist(), dec.as_blk.tolist(),
                dec.as_uid_start.tolist(), dec.as_uid_end.tolist())]
    # libproton's attribution order (per CTA, its scope events then its async events), then
    # its timeline order: by CTA, warp (of the start) and start cycle
    events = sorted(sync + asyn, key=lambda x: (x[5], x[6]))
    events.sort(key=lambda x: (x[0], x[1], x[2]))
    kpath = callpath.path(knode)
    names_to_id = {}
    id_to_name = {}
    blocks: List[_Block] = []
    cur_block = None
    cur_uid = None
    call_stack = None
    for (b_id, u, s, e, sc, bi, is_async, ue) in events:
        path = paths.get(sc, ())
        leaf = path[-1] if path else kpath[-1]
        if call_stack is None:
            full = kpath + list(path)
            call_stack = full[:-1]
        if leaf not in names_to_id:
            names_to_id[leaf] = len(names_to_id)
            id_to_name[names_to_id[leaf]] = leaf
        sid = names_to_id[leaf]
        if cur_block is None or cur_block.block_id != b_id:
            cur_block = _Block(b_id, int(dec.blk_proc[bi]), int(dec.blk_init[bi]), int(dec.blk_prefinal[bi]),
                               int(dec.blk_postfinal[bi]))
            blocks.append(cur_block)
            cur_uid = None
        if cur_uid != u:
            cur_block.traces.append((u, []))
            cur_uid = u
        if is_async:
            cur_block.links.append([s, e, sid, u, ue])
        else:
            cur_block.traces[-1][1].append([s, e, sid])
    if cost > 0:
        for b in blocks:
            per_warp = {}
            for u, evs in b.traces:
                per_warp.setdefault(u, []).extend(evs)
            for ln in b.links:
                per_warp.setdefault(ln[3], [])
                per_warp.setdefault(ln[4], [])
            for u, evs in per_warp.items():
                async_cells = [(ln, 0) for ln in b.links if ln[3] == u] + [(ln, 1) for ln in b.links if ln[4] == u]
                cells = [(ev, i) for ev in evs for i in (0, 1)] + async_cells
                _time_shift(evs, cells, async_cells, cost)
    return blocks, id_to_name, call_stack or [], kname


def _time_shift(evs, cells, async_cells, cost: int) -> None:
    """libproton's ``timeShift`` for one warp: every timestamp at or after a probe moves back by
    the probe's cost (so a timestamp loses ``cost`` per probe of its warp up to itself)."""
    def shift(base):
        for obj, i in cells:
            if obj[i] >= base:
                obj[i] = (obj[i] - cost) % _U64
    for ev in evs:
        shift(ev[0])
        shift(ev[1])
        if ev[1] < ev[0]:
            ev[1] = ev[0] + cost // 2
    for obj, i in async_cells:
        shift(obj[i])


def _assign_lines(intervals):
    """libproton's ``assignLineIds``: first line whose intervals do not overlap."""
    result = [0] * len(intervals)
    order = sorted(range(len(intervals)), key=lambda i: intervals[i][0])
    lines = []
    for i in order:
        s, e = intervals[i][0], intervals[i][1]
        for li, line in enumerate(lines):
            if all(not (s < ie and e > is_) for is_, ie in line):
                line.append((s, e))
                result[i] = li
                break
        else:
            result[i] = len(lines)
            lines.append([(s, e)])
    return result


def dumps(records: List[CycleRecord]) -> str:
    """The chrome trace of the cycle records of one phase (in launch order)."""
    timelines = [_kernel_timeline(r) for r in sorted(records, key=lambda r: r.seq)]
    timelines = [t for t in timelines if t[0]]
    out = []
    if timelines:
        min_init = min(b.init for t in timelines for b in t[0])
        flow = [1]
        for blocks, names, call_stack, kname in timelines:
            _write_kernel(out, blocks, names, call_stack, kname, min_init, flow)
    return json.dumps({"displayTimeUnit": "ns", "traceEvents": out}, separators=(",", ":"), sort_keys=True,
                      ensure_ascii=False)


def _write_kernel(out, blocks, names, call_stack, kname, min_init, flow) -> None:
    colors = {}
    nxt = [0]

    def color(sid):
        c = colors.get(sid)
        if c is None:
            c = colors[sid] = nxt[0]
            nxt[0] = (nxt[0] + 1) % len(COLORS)
        return COLORS[c]

    by_proc = {}
    block_min = {}
    for b in blocks:
        m = None
        for _u, evs in b.traces:
            for ev in evs:
                if m is None or ev[0] < m:
                    m = ev[0]
        for ln in b.links:
            for c in (ln[0], ln[1]):
                if m is None or c < m:
                    m = c
        block_min[b.block_id] = m if m is not None else (1 << 64) - 1
        by_proc.setdefault(b.proc, []).append(b)
    for proc in sorted(by_proc):
        for b in by_proc[proc]:
            pid = f"{kname} Core{proc} CTA{b.block_id}"
            adjust = _i64(b.init - min_init) - _i64(block_min[b.block_id])
            lines = _block_lines(b)
            args = {"Init Time (ns)": b.init, "Post Final Time (ns)": b.postfinal,
                    "Finalization Time (ns)": (b.postfinal - b.prefinal) % _U64, "Frequency (MHz)": FREQ,
                    "call_stack": call_stack}
            for u, evs in b.traces:
                for ev in evs:
                    s, e, sid = ev
                    out.append({"args": args, "cat": kname, "cname": color(sid), "dur": _i64(e - s) / FREQ,
                                "name": names.get(sid, f"scope_{sid}"), "ph": "X", "pid": pid,
                                "tid": f"warp {u} (line {lines[id(ev)]})", "ts": _i64(s + adjust) / FREQ})
            for ln in b.links:
                s, e, sid, us, ue = ln
                c = color(sid)
                name = names.get(sid, f"event_{sid}")
                if us == ue:
                    out.append({"args": {"call_stack": call_stack}, "cat": "async", "cname": c,
                                "dur": _i64(e - s) / FREQ, "name": name, "ph": "X", "pid": pid,
                                "tid": f"warp {us} (line {lines[id(ln)]})", "ts": _i64(s + adjust) / FREQ})
                    continue
                fid = flow[0]
                flow[0] += 1
                for cyc, uu, key in ((s, us, "flow_out"), (e, ue, "flow_in")):
                    out.append({"args": {"call_stack": call_stack}, "bind_id": fid, "cat": "flow", "cname": c,
                                "dur": 0, key: True, "name": name, "ph": "X", "pid": pid,
                                "tid": f"warp {uu} (line 0)", "ts": _i64(cyc + adjust) / FREQ})


def _block_lines(b: _Block) -> dict:
    """Line ids of a CTA's events: per warp, its scopes and its same-warp async events."""
    per_warp = {}
    for u, evs in b.traces:
        per_warp.setdefault(u, []).extend(evs)
    for ln in b.links:
        if ln[3] == ln[4]:
            per_warp.setdefault(ln[3], []).append(ln)
    lines = {}
    for u in sorted(per_warp):
        evs = per_warp[u]
        ids = _assign_lines([(ev[0], ev[1]) for ev in evs])
        for ev, li in zip(evs, ids):
            lines[id(ev)] = li
    return lines
