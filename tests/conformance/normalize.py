"""Normalise the outputs of both implementations before comparing them.

* times: ``cpu_time (ns)`` values, trace ``ts``/``dur``/``baseTimeNanoseconds`` are
  replaced by a marker (compared by presence only);
* the deliberate differences (README) accepted for named scenarios (see ``DEVIATIONS``).
"""
import json
import math
import os

import msgpack

TIME_KEYS = ("cpu_time (ns)",)

#: scenario -> why the raw comparison may differ, and how it is normalised
def _drop_empty_trace(real_dir, files):
    # a deliberate difference (README): a finalize failing with "Output format not supported" leaves an empty file
    # in Proton; ours writes none.
    return [f for f in files if not (f.endswith(".chrome_trace") and os.path.getsize(os.path.join(real_dir, f)) == 0)]


def _drop_created_folders(ours_dir, files):
    # a deliberate difference (README): proton_ctypes creates the missing folders of a session's
    # name and writes the profile there; Proton writes nothing and says nothing
    return [f for f in files if not os.path.isdir(os.path.join(ours_dir, f))]


def _drop_exit_error(values):
    # a deliberate difference (README): exiting a scope opened before a later session started raises
    # "Context stack is empty" in Proton; ours closes it quietly.
    values.get("values", {}).pop("exit_error", None)
    return values


def _error_types_only(values):
    # deliberate: argument errors keep Proton's exception type; the message names the argument,
    # key and expected type (Proton's reads like its C++ bindings)
    def kind(v):
        if isinstance(v, str):
            head = v.split(":", 1)[0]
            return head if head.endswith("Error") and " " not in head else "<message>"
        return v
    values = dict(values)
    values["error"] = kind(values.get("error"))
    values["values"] = {k: kind(v) for k, v in values.get("values", {}).items()}
    return values


def _lift(*names):
    # deliberate: a scope whose metrics were refused is closed; in Proton it stays open and
    # everything after it nests below it.  Lift the children of those scopes to their level.
    def lift(node):
        out = []
        for c in node["children"]:
            c = lift(c)
            if c["frame"]["name"] in names:
                out.append(dict(c, children=[]))
                out.extend(c["children"])
            else:
                out.append(c)
        merged = {}  # a scope refused several times is several nested nodes in Proton, one node here
        for c in out:
            same = merged.get(c["frame"]["name"])
            if same is None:
                merged[c["frame"]["name"]] = c
            else:
                same["metrics"].update(c["metrics"])
                same["children"].extend(c["children"])
        return dict(node, children=list(merged.values()))
    return lift


DEVIATIONS = {
    "output_format_not_supported": {"real_files": _drop_empty_trace},
    "failed_finalize_leaves_the_session_deactivated": {"real_files": _drop_empty_trace},
    "scope_open_when_second_session_starts": {"values": _drop_exit_error},
    "finalize_into_a_missing_folder": {"ours_files": _drop_created_folders},
    "metric_bad_value": {"values": _error_types_only},
    "metric_none_value": {"values": _error_types_only},
    "metric_bad_value_kinds": {"values": _error_types_only, "real_tree": _lift("s0", "s1", "s2", "s3")},
    "metric_errors_leave_the_scope_entered": {"real_tree": _lift("k", "p")},
    "argument_type_errors": {"values": _error_types_only},
    "refused_scope_metrics_leave_no_scope_open": {"values": _error_types_only, "real_tree": _lift("s")},
    "one_key_metrics_repeated": {"real_tree": _lift("e1", "e2")},
}


def _own_frame(name):
    # a deliberate difference (README): python-context frames of the profiler's own files name
    # other files and lines; the functions, and so the shape of the path, are Proton's
    path = name.split(":", 1)[0]
    return "/triton/profiler/" in path or "/proton_ctypes/" in path


def _own_name(name):
    """A python-context frame name, with only the function kept for the profiler's own frames."""
    return "<own>@" + name.rsplit("@", 1)[-1] if _own_frame(name) else name


def _norm_value(v):
    # NaN != NaN: compare it as a marker (msgpack keeps NaN; JSON has null)
    if isinstance(v, float) and math.isnan(v):
        return "<nan>"
    if isinstance(v, list):
        return [_norm_value(x) for x in v]
    return v


def _norm_tree(node):
    m = {k: ("<t>" if k in TIME_KEYS else _norm_value(v)) for k, v in node.get("metrics", {}).items()}
    children = []
    for c in node.get("children", []):
        n = _norm_tree(c)
        n["frame"] = dict(n["frame"], name=_own_name(n["frame"]["name"]))
        children.append(n)
    return {"frame": node["frame"], "metrics": m, "children": _merge(children)}


def _merge(children):
    """Siblings of one name as one node, recursively: the profiler's own frames of two lines of
    one function are one node once their lines are dropped, whichever of their children met."""
    merged = {}
    for c in children:
        key = c["frame"]["name"]
        if key in merged:
            merged[key]["children"].extend(c["children"])
            merged[key]["metrics"].update(c["metrics"])
        else:
            merged[key] = dict(c, children=list(c["children"]), metrics=dict(c["metrics"]))
    for c in merged.values():
        c["children"] = _merge(c["children"])
    return list(merged.values())


def _norm_trace(doc):
    doc = dict(doc)
    doc["baseTimeNanoseconds"] = "<t>" if "baseTimeNanoseconds" in doc else None
    evs = []
    for e in doc.get("traceEvents", []):
        e = dict(e)
        e["ts"] = "<t>"
        e["dur"] = "<t>"
        args = dict(e.get("args", {}))
        stack = args.get("call_stack")
        if stack and any(_own_frame(c) for c in stack):  # python context: the profiler's frames by function
            args["call_stack"] = [_own_name(c) for c in stack]
            leaf, sep, rest = e["name"].partition(": <")
            e["name"] = _own_name(leaf) + sep + rest
        if "metrics" in args:
            args["metrics"] = {k: ("<t>" if k.startswith("cpu_time") else v) for k, v in args["metrics"].items()}
            if any(k.startswith("cpu_time") for k in args["metrics"]):
                e["name"] = "<cpu-timed>"
        e["args"] = args
        evs.append(e)
    doc["traceEvents"] = evs
    return doc


def load_output(path):
    """Parse one output file into a normalised Python object."""
    if path.endswith(".hatchet"):
        tree, dev = json.load(open(path))
        return [_norm_tree(tree), dev]
    if path.endswith(".hatchet_msgpack"):
        tree, dev = msgpack.unpackb(open(path, "rb").read())
        return [_norm_tree(tree), dev]
    if path.endswith(".chrome_trace"):
        return _norm_trace(json.load(open(path)))
    if path.endswith("result.json"):
        r = json.load(open(path))
        return _norm_values(r)
    return open(path, "rb").read()


def _norm_values(r):
    def walk(v):
        if isinstance(v, dict):
            if "frame" in v and "metrics" in v:
                return _norm_tree(v)
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v
    return walk(r)


def compare_dirs(name, real_dir, ours_dir):
    """List the differences between the two output folders (empty when they agree)."""
    problems = []
    dev = DEVIATIONS.get(name, {})
    real = sorted(f for f in os.listdir(real_dir))
    if "real_files" in dev:
        real = dev["real_files"](real_dir, real)
    ours = sorted(f for f in os.listdir(ours_dir))
    if "ours_files" in dev:
        ours = dev["ours_files"](ours_dir, ours)
    if real != ours:
        problems.append(f"files differ: real={real} ours={ours}")
    for f in sorted(set(real) & set(ours)):
        a = load_output(os.path.join(real_dir, f))
        b = load_output(os.path.join(ours_dir, f))
        if f == "result.json" and "values" in dev:
            a, b = dev["values"](a), dev["values"](b)
        elif f != "result.json" and "real_tree" in dev:
            a = [dev["real_tree"](a[0])] + a[1:]
        if a != b:
            problems.append(f"{f} differs:\nreal: {json.dumps(a, sort_keys=True, default=repr)[:3000]}\n"
                            f"ours: {json.dumps(b, sort_keys=True, default=repr)[:3000]}")
    return problems
