"""Output files: ``.hatchet``, ``.hatchet_msgpack``,
``.chrome_trace``; output format selection and errors; files are whole or absent.

Expected contents are those real Proton 3.9 writes (``conformance/scenarios/writers.py``).
Tests marked ``xfail(strict=True)`` state what Proton writes where proton_ctypes does not
(yet): each names the difference.
"""
import json
import os
import threading

import msgpack
import pytest

import proton_ctypes as proton
from conftest import flat, json_decodes_deep_nesting, read_tree, written
from proton_ctypes import _atomic as atomic


def one_scope_file(fmt="", data="tree", name="w", metrics=None):
    """Profile one scope ``a`` and finalize in ``fmt``; return the bytes written."""
    proton.start(name, backend="host", data=data)
    with proton.scope("a", metrics):
        pass
    proton.finalize(None, fmt)
    (path,) = os.listdir(".")
    return path, open(path, "rb").read()


# --- file names and formats -----------------------------------------------------------------

def test_tree_data_is_written_as_name_dot_hatchet_by_default():
    assert one_scope_file()[0] == "w.hatchet"


def test_trace_data_is_written_as_name_dot_chrome_trace_by_default():
    assert one_scope_file(data="trace")[0] == "w.chrome_trace"


def test_the_extension_is_always_appended():
    proton.start("x.hatchet", backend="host")
    proton.finalize()
    assert os.listdir(".") == ["x.hatchet.hatchet"]


def test_output_format_names_are_case_insensitive():
    assert one_scope_file("HATCHET_MSGPACK")[0] == "w.hatchet_msgpack"


@pytest.mark.parametrize("one", [True, False], ids=["finalize_session", "finalize_all"])
def test_unknown_output_format_raises_writes_nothing_and_keeps_the_session_deactivated(one):
    # as Proton: finalize stops the session before it rejects the format
    s = proton.start("e", backend="host")
    with proton.scope("a"):
        pass
    with pytest.raises(ValueError) as e:
        proton.finalize(s if one else None, "nope")
    assert str(e.value) == "[PROTON] Unknown output format: nope"
    assert os.listdir(".") == []
    proton.start("other", backend="host")  # profiling on again (finalize() turned it off)
    with proton.scope("not_recorded"):
        pass
    proton.activate(s)
    with proton.scope("b"):
        pass
    assert [c["frame"]["name"] for c in proton.data.get(s)[0]["children"]] == ["a", "b"]
    proton.finalize(s, "HATCHET")
    assert written("e") == {"a": {}, "b": {}}


@pytest.mark.parametrize("data,fmt", [("tree", "chrome_trace"), ("trace", "hatchet"), ("trace", "hatchet_msgpack")])
def test_output_format_not_supported_by_the_data_raises_writes_nothing_and_keeps_the_session(data, fmt):
    # a deliberate difference (README): Proton leaves an empty file behind
    s = proton.start("keep", backend="host", data=data)
    with pytest.raises(ValueError) as e:
        proton.finalize(s, fmt)
    assert str(e.value) == "[PROTON] Output format not supported"
    assert os.listdir(".") == []
    proton.finalize(s)
    assert os.listdir(".") == ["keep.hatchet" if data == "tree" else "keep.chrome_trace"]


def test_a_failed_write_leaves_neither_the_file_nor_a_temporary_file(monkeypatch):
    proton.start("atomic", backend="host")
    with proton.scope("a"):
        pass

    def boom(src, dst):
        raise OSError("disk full")
    monkeypatch.setattr(atomic.os, "replace", boom)
    with pytest.raises(OSError):
        proton.finalize()
    assert os.listdir(".") == []


@pytest.fixture
def umask():
    """Set the process umask for one test (``umask(value)``); the old one comes back after it."""
    old = os.umask(0o022)
    os.umask(old)
    yield os.umask
    os.umask(old)


@pytest.mark.parametrize("mask", [0o022, 0o077, 0o002])
@pytest.mark.parametrize("data, fmt", [("tree", "hatchet"), ("tree", "hatchet_msgpack"), ("trace", "chrome_trace")])
def test_files_get_the_mode_open_would_give_them_under_the_umask(umask, mask, data, fmt):
    # before: 0600 whatever the umask (the temporary file kept mkstemp's mode)
    umask(mask)
    s = proton.start(os.path.join("shared", "run"), backend="host", data=data)
    proton.data.advance_phase(s) if data == "tree" else None
    proton.finalize(s, fmt)
    for name in os.listdir("shared"):
        assert os.stat(os.path.join("shared", name)).st_mode & 0o777 == 0o666 & ~mask, name
    assert os.stat("shared").st_mode & 0o777 == 0o777 & ~mask  # a created folder too, as mkdir -p


def test_every_file_is_written_by_the_one_atomic_writer():
    # writers and the viewer's HTML report share proton_ctypes/_atomic.py; nobody else writes files
    import ast
    import proton_ctypes
    root = os.path.dirname(proton_ctypes.__file__)
    writers = []
    for folder, _dirs, files in os.walk(root):
        for f in files:
            if not f.endswith(".py") or f == "_atomic.py":
                continue
            for node in ast.walk(ast.parse(open(os.path.join(folder, f)).read())):
                if isinstance(node, ast.Attribute) and node.attr in ("replace", "mkstemp", "rename") and \
                        isinstance(node.value, ast.Name) and node.value.id in ("os", "tempfile"):
                    writers.append(f"{f}:{node.lineno} {node.value.id}.{node.attr}")
                if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "open" and any(
                        isinstance(a, ast.Constant) and isinstance(a.value, str) and set(a.value) & set("wax")
                        for a in node.args[1:2]):
                    writers.append(f"{f}:{node.lineno} open(..., {node.args[1].value!r})")
    assert writers == []


def test_a_file_in_the_way_of_a_folder_is_named_and_nothing_is_written():
    open("taken", "w").close()
    s = proton.start(os.path.join("taken", "run"), backend="host")
    with pytest.raises(NotADirectoryError) as e:
        proton.finalize(s)
    assert str(e.value) == (f"[Errno 20] Not a directory: {os.path.abspath('taken')!r}: the profile "
                            f"{os.path.join('taken', 'run')!r} was not written and session {s} is still alive; "
                            "fix the cause and call finalize again")
    assert os.listdir(".") == ["taken"]


# --- hatchet (JSON) -------------------------------------------------------------------------

def test_hatchet_is_a_root_node_and_an_empty_device_block():
    _, raw = one_scope_file(metrics={"m": 1})
    assert json.loads(raw) == [{"children": [{"children": [], "frame": {"name": "a", "type": "function"},
                                              "metrics": {"m": 1}}],
                                "frame": {"name": "ROOT", "type": "function"}, "metrics": {}}, {}]


def test_hatchet_json_is_indented_by_four_with_sorted_keys():
    _, raw = one_scope_file(metrics={"zz": 1, "aa": [1, 2]})
    text = raw.decode()
    assert text.strip() == json.dumps(json.loads(text), indent=4, sort_keys=True)


def test_hatchet_file_is_the_json_between_two_newlines():
    _, raw = one_scope_file(metrics={"m": 1})
    text = raw.decode()
    assert text == "\n" + json.dumps(json.loads(text), indent=4, sort_keys=True) + "\n"


def test_hatchet_writes_nan_and_infinities_as_null_and_doubles_in_shortest_form():
    _, raw = one_scope_file(metrics={"n": float("nan"), "ninf": float("-inf"), "big": 1e300, "z": -0.0,
                                     "f": 1.5e9, "t": 0.1, "v": [0.5, 2.0]})
    text = raw.decode()
    for expected in ('"n": null', '"ninf": null', '"big": 1e+300', '"z": -0.0', '"f": 1500000000.0', '"t": 0.1'):
        assert expected in text


def test_root_has_no_metrics_when_only_scopes_carry_metrics():
    proton.start("root", backend="host")
    with proton.scope("a", {"p": 1, "e (exc)": 1, "i (inc)": 1, "k (pty)": 1, "f": 1.5, "v": [1, 2]}):
        pass
    with proton.cpu_timed_scope("c"):
        pass
    proton.finalize()
    root, dev = read_tree("root.hatchet")
    assert root["metrics"] == {} and dev == {}


def test_children_are_in_first_insertion_order_of_the_session():
    for name, order in (("s1", ("w_b", "w_a")), ("s2", ("w_a", "w_b"))):
        proton.start(name, backend="host")
        for n in order:
            with proton.scope(n):
                pass
        proton.finalize()
    assert list(written("s2")) == ["w_a", "w_b"]


# --- hatchet_msgpack ------------------------------------------------------------------------

def test_msgpack_nodes_are_frame_metrics_children_maps_with_sorted_metric_keys():
    _, raw = one_scope_file("hatchet_msgpack", metrics={"zz": 1, "aa": 2.5, "i (inc)": 3, "k (pty)": 4,
                                                        "v": [1, 2], "mm": 0})
    tree, dev = msgpack.unpackb(raw)
    a = tree["children"][0]
    assert list(tree) == list(a) == ["frame", "metrics", "children"]
    assert list(a["metrics"].items()) == [("aa", 2.5), ("i (inc)", 3), ("k", 4), ("mm", 0), ("v", [1, 2]),
                                          ("zz", 1)]
    assert dev == {}


def test_msgpack_omits_nodes_without_metrics_and_children():
    s = proton.start("mp", backend="host")
    with proton.scope("a", {"m": 1}):
        with proton.scope("b"):
            with proton.scope("d"):
                with proton.scope("e"):
                    pass
    with proton.scope("f"):
        with proton.scope("g"):
            with proton.scope("h"):
                pass
    tree, _ = msgpack.unpackb(proton.data.get_msgpack(s))
    assert list(flat(tree)) == ["a", "a/b", "a/b/d", "f", "f/g"]


def test_msgpack_file_is_byte_identical_to_get_msgpack():
    s = proton.start("mp", backend="host")
    with proton.scope("a", {"m": 1, "v": [0.5]}):
        pass
    got = proton.data.get_msgpack(s)
    proton.finalize(s, "hatchet_msgpack")
    assert open("mp.hatchet_msgpack", "rb").read() == got


def test_msgpack_keeps_nan_and_infinities_as_doubles():
    import math
    _, raw = one_scope_file("hatchet_msgpack", metrics={"n": float("nan"), "ninf": float("-inf")})
    m = msgpack.unpackb(raw)[0]["children"][0]["metrics"]
    assert math.isnan(m["n"]) and m["ninf"] == float("-inf")


# --- chrome_trace ---------------------------------------------------------------------------

def trace_events(name="tr"):
    doc = json.load(open(f"{name}.chrome_trace"))
    return doc, doc["traceEvents"]


def test_an_empty_trace_is_the_display_unit_and_no_events():
    proton.start("te", backend="host", data="trace")
    proton.finalize()
    assert open("te.chrome_trace").read().strip() == '{"displayTimeUnit":"us","traceEvents":[]}'


def test_a_trace_file_ends_with_a_newline():
    proton.start("te", backend="host", data="trace")
    proton.finalize()
    assert open("te.chrome_trace").read() == '{"displayTimeUnit":"us","traceEvents":[]}\n'


def test_a_trace_is_compact_json_with_base_time_unit_and_complete_events():
    path, raw = one_scope_file(data="trace")
    doc = json.loads(raw)
    assert b" " not in raw
    assert list(doc) == ["baseTimeNanoseconds", "displayTimeUnit", "traceEvents"]
    assert isinstance(doc["baseTimeNanoseconds"], int) and doc["baseTimeNanoseconds"] > 1.6e18  # epoch ns
    (ev,) = doc["traceEvents"]
    assert list(ev) == ["args", "cat", "dur", "name", "ph", "pid", "tid", "ts"]
    assert (ev["cat"], ev["name"], ev["ph"], ev["pid"], ev["tid"], ev["ts"]) == ("scope", "a", "X", 0, 0, 0.0)
    assert ev["args"]["call_stack"] == ["ROOT", "a"] and isinstance(ev["args"]["scope_id"], int)
    assert ev["dur"] >= 0


def test_trace_events_of_scopes_states_and_metrics():
    proton.start("tr", backend="host", data="trace")
    with proton.scope("a"):
        with proton.scope("b", {"m": 1, "z (exc)": 2.5, "v": [1, 2]}):
            pass
        with proton.state("st"):
            with proton.scope("c"):
                pass
        proton.enter_scope("e", metrics={"m": 1})
        proton.exit_scope(metrics={"m": 4})
        with proton.cpu_timed_scope("ct", {"k (pty)": 1, "y (inc)": 2}):
            pass
    proton.finalize()
    _, evs = trace_events()
    first = evs[0]["args"]["scope_id"]
    got = [(e["cat"], e["name"], e["args"]["call_stack"], e["args"].get("metrics"), e["args"]["scope_id"] - first)
           for e in evs]
    cpu = evs[4]["args"]["metrics"]["cpu_time (ns)(exc)"]
    assert cpu.isdigit()
    assert got == [
        ("scope", "a", ["ROOT", "a"], None, 0),
        # a scope with metrics is one "metric" event: keys sorted, raw suffixes, values as strings
        ("metric", "b: <m, 1>, <v, [1,2]>, <z (exc), 2.500000>", ["ROOT", "a", "b"],
         {"m": "1", "v": "[1,2]", "z (exc)": "2.500000"}, 1),
        # under a state the event is named by the state, the last frame of its call stack
        ("scope", "st", ["ROOT", "a", "c", "st"], None, 2),
        # enter-time and exit-time metrics merged: 1 + 4
        ("metric", "e: <m, 5>", ["ROOT", "a", "e"], {"m": "5"}, 3),
        ("metric", f"ct: <cpu_time (ns)(exc), {cpu}>, <k (pty), 1>, <y (inc), 2>", ["ROOT", "a", "ct"],
         {"cpu_time (ns)(exc)": cpu, "k (pty)": "1", "y (inc)": "2"}, 4)]


def test_trace_events_are_grouped_by_thread_in_order_of_each_threads_first_event():
    proton.start("tr", backend="host", data="trace")

    def th():
        with proton.scope("t1"):
            pass
    x = threading.Thread(target=th)
    x.start()
    x.join()
    with proton.scope("main"):
        with proton.scope("inner"):
            pass
    proton.finalize()
    _, evs = trace_events()
    assert [(e["tid"], e["name"]) for e in evs] == [(0, "t1"), (1, "main"), (1, "inner")]
    assert evs[0]["ts"] == 0.0 and evs[1]["ts"] <= evs[2]["ts"]


def test_trace_thread_ids_restart_at_zero_in_each_session():
    proton.start("tr1", backend="host", data="trace")
    with proton.scope("a"):
        pass
    proton.finalize()
    proton.start("tr2", backend="host", data="trace")
    t = threading.Thread(target=lambda: proton.scope("t2").__enter__().__exit__(None, None, None))
    t.start()
    t.join()
    with proton.scope("m2"):
        pass
    proton.finalize()
    assert [(e["tid"], e["name"]) for e in trace_events("tr2")[1]] == [(0, "t2"), (1, "m2")]


def test_trace_vector_of_doubles_is_printed_in_shortest_form():
    proton.start("tr", backend="host", data="trace")
    with proton.scope("main", {"d": 0.5, "v": [1.5, 2.5]}):
        pass
    proton.finalize()
    (ev,) = trace_events()[1]
    assert ev["args"]["metrics"] == {"d": "0.500000", "v": "[1.5,2.5]"}
    assert ev["name"] == "main: <d, 0.500000>, <v, [1.5,2.5]>"


def test_trace_thread_ids_are_kept_across_phases():
    s = proton.start("tp", backend="host", data="trace")
    t = threading.Thread(target=lambda: proton.scope("t1").__enter__().__exit__(None, None, None))
    t.start()
    t.join()
    with proton.scope("main"):
        pass
    proton.data.advance_phase(s)
    with proton.scope("p1"):
        pass
    proton.finalize()
    assert [(e["tid"], e["name"]) for e in trace_events("tp.part_1")[1]] == [(1, "p1")]


def test_trace_events_check_metric_types_within_themselves_only():
    # as Proton: each event holds its own metrics; a tree session would raise a type mismatch
    proton.start("types", backend="host", data="trace")
    for v in (1, 1.5, [1, 2], [1, 2, 3]):
        with proton.scope("m", {"v": v}):
            pass
    proton.enter_scope("e", metrics={"x": 1})
    with pytest.raises(ValueError, match=r"^\[PROTON\] Metric value type mismatch for valueId 0 \(x\): "
                                         r"current=int64_t, new=double$"):
        proton.exit_scope(metrics={"x": 2.5})
    proton.finalize()
    events = json.load(open("types.chrome_trace"))["traceEvents"]
    assert [e["args"]["metrics"] for e in events] == [{"v": "1"}, {"v": "1.500000"}, {"v": "[1,2]"}, {"v": "[1,2,3]"},
                                                      {"x": "1"}]


def test_finalize_of_every_session_stops_at_the_first_one_whose_data_cannot_take_the_format():
    # as Proton: the sessions after it are left as they are (alive, still recording)
    tree = proton.start("tree", backend="host")
    trace = proton.start("trace", backend="host", data="trace")
    with pytest.raises(ValueError, match=r"^\[PROTON\] Output format not supported$"):
        proton.finalize(None, "chrome_trace")
    assert os.listdir(".") == []
    proton.start("again", backend="host")  # profiling back on
    with proton.scope("later"):
        pass
    assert proton.data.get(tree)[0]["children"] == []  # deactivated by the failed finalize
    proton.finalize(trace)
    events = json.load(open("trace.chrome_trace"))["traceEvents"]
    assert [e["name"] for e in events] == ["later"]


# --- deep call trees ------------------------------------------------------------------------

def _reference_hatchet(tree, device_info):
    """The hatchet text as Python's own JSON encoder writes it (shallow trees only)."""
    return "\n" + json.dumps([tree, device_info], indent=4, sort_keys=True, allow_nan=False) + "\n"


def _reference_msgpack(tree, device_info):
    """The hatchet_msgpack bytes as msgpack.packb writes the pruned document (shallow trees only)."""
    def pack_node(node):
        kids = [p for p in map(pack_node, node["children"]) if p is not None]
        if not node["metrics"] and not node["children"]:
            return None
        return {"frame": dict(node["frame"]), "metrics": {k: node["metrics"][k] for k in sorted(node["metrics"])},
                "children": kids}
    root = pack_node(tree) or {"frame": dict(tree["frame"]), "metrics": {}, "children": []}
    return msgpack.packb([root, device_info], use_bin_type=True)


def _random_tree(rng, depth=0):
    names = ["a", "b", "k\u00e9rnel", 'q"uote', "sl\\ash", "<metric>"]
    metrics = {}
    for key in rng.sample(["count", "time (ns)", "flops", "bytes", "vec", "p (pty)", "nan"], rng.randrange(4)):
        metrics[key] = {"vec": [1, 2.5, -3], "flops": 1.5e20, "nan": None, "p (pty)": "x"}.get(key, rng.randrange(-5, 10**12))
    n_kids = rng.choice([0, 0, 1, 2, 3, 17]) if depth < 3 else 0
    return {"children": [_random_tree(rng, depth + 1) for _ in range(n_kids)],
            "frame": {"name": rng.choice(names), "type": "function"}, "metrics": metrics}


@pytest.mark.parametrize("seed", range(30))
def test_both_tree_formats_write_what_the_library_encoders_write(seed):
    import random
    from proton_ctypes.writers import hatchet, msgpack as mp_writer
    rng = random.Random(seed)
    tree = _random_tree(rng)
    device = rng.choice([{}, {"CUDA": {"0": {"arch": "90", "bus_width": 6016, "num_sms": 132}}}])
    assert hatchet.dumps(tree, device) == _reference_hatchet(tree, device)
    assert mp_writer.dumps(tree, device) == _reference_msgpack(tree, device)


@pytest.mark.parametrize("fmt", ["hatchet", "hatchet_msgpack"])
def test_a_call_tree_over_a_thousand_frames_deep_is_written_whole(fmt):
    from proton_ctypes.viewer.loader import load_document
    depth = 1500    # the encoders of the json and msgpack libraries stop at a few hundred levels
    proton.start("deep", backend="host")
    for i in range(depth):
        proton.enter_scope(f"s{i}")
    with proton.scope("leaf", {"m": 1}):
        pass
    for _ in range(depth):
        proton.exit_scope()
    proton.finalize(None, fmt)
    if fmt == "hatchet" and not json_decodes_deep_nesting():   # written whole, but this Python cannot read it
        text = open(f"deep.{fmt}").read()
        assert text.endswith("\n]\n") and text.count('"name": "s') == depth and '"name": "leaf"' in text
        return
    node, levels = load_document(f"deep.{fmt}")[0], 0
    while node["children"]:
        (node,) = node["children"]
        levels += 1
    assert levels == depth + 1 and node["frame"]["name"] == "leaf" and node["metrics"] == {"m": 1}
