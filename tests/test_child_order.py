"""Children are listed in the order *that session's* tree of that phase first saw them.

Proton inserts a node into a session's tree when a scope first enters it, when a kernel is
launched under it, or when metrics first land on it; the children of a node keep that
insertion order.  The trie of proton_ctypes is process-wide, so its node ids are not that
order once another session (or an earlier phase) created a node first (upstream
``test_pcsampling``: ``['init', 'test']`` where a previous test had made ``ROOT/test``).
``test_matches_real_proton`` runs the host-only scenarios under Proton 3.9 (CPU oracle of
tests/oracle/real_proton.py) too.
"""
import json
import os
import threading

import pytest

import proton_ctypes as proton
from conftest import child_names, find
from oracle import side_by_side


def _names(tree):
    if not tree["children"]:
        return tree["frame"]["name"]
    return [tree["frame"]["name"], [_names(c) for c in tree["children"]]]


def _tree(session, phase=0):
    return _names(proton.data.get(session, phase)[0])


# -- the scenarios (each returns what it observed; run here and under the oracle) -----------

def scenario_node_made_by_an_earlier_session(p, tmp):
    a = p.start(os.path.join(tmp, "a"))
    with p.scope("test"):
        pass
    p.finalize(a)
    b = p.start(os.path.join(tmp, "b"))
    with p.scope("init"):
        pass
    with p.scope("test"):
        pass
    out = _names(p.data.get(b)[0])
    p.finalize(b)
    return out


def scenario_two_active_sessions(p, tmp):
    a = p.start(os.path.join(tmp, "a"))
    with p.scope("x"):
        pass
    b = p.start(os.path.join(tmp, "b"))
    with p.scope("y"):
        pass
    with p.scope("x"):
        pass
    out = [_names(p.data.get(a)[0]), _names(p.data.get(b)[0])]
    p.finalize()
    return out


def scenario_phases(p, tmp):
    a = p.start(os.path.join(tmp, "a"))
    with p.scope("p"):
        with p.scope("b"):
            pass
        with p.scope("a"):
            pass
    p.data.advance_phase(a)
    with p.scope("p"):
        with p.scope("a"):
            pass
        with p.scope("c"):
            pass
        with p.scope("b"):
            pass
    out = [_names(p.data.get(a, 0)[0]), _names(p.data.get(a, 1)[0])]
    p.finalize()
    return out


def scenario_states_metrics_enter_scope(p, tmp):
    a = p.start(os.path.join(tmp, "a"))
    with p.scope("m1"):
        pass
    b = p.start(os.path.join(tmp, "b"))
    with p.state("st"):
        with p.scope("q"):
            pass
    with p.scope("m2", {"v": 1}):
        pass
    with p.scope("m1", {"v": 2}):
        pass
    p.enter_scope("z")
    p.exit_scope("z")
    with p.scope("deep"):
        with p.scope("m1"):
            pass
    out = [_names(p.data.get(a)[0]), _names(p.data.get(b)[0])]
    p.finalize()
    return out


def scenario_threads(p, tmp):
    a = p.start(os.path.join(tmp, "a"))
    with p.scope("main"):
        with p.scope("t0"):
            pass
        with p.scope("t2"):
            pass
    p.finalize(a)
    b = p.start(os.path.join(tmp, "b"))

    def work(name):
        with p.scope(name):
            pass

    with p.scope("main"):
        for name in ("t1", "t2"):
            t = threading.Thread(target=work, args=(name,))
            t.start()
            t.join()
        with p.scope("t0"):
            pass
    first = _names(p.data.get(b)[0])
    p.deactivate(b)
    p.activate(b)
    with p.scope("late"):
        pass
    with p.scope("main"):
        pass
    out = [first, _names(p.data.get(b)[0])]
    p.finalize()
    return out


def scenario_hatchet_file(p, tmp):
    a = p.start(os.path.join(tmp, "a"))
    with p.scope("s2"):
        with p.scope("k"):
            pass
    p.finalize(a)
    p.start(os.path.join(tmp, "b"))
    with p.scope("s1"):
        pass
    with p.scope("s2"):
        with p.scope("j"):
            pass
        with p.scope("k"):
            pass
    p.finalize()
    with open(os.path.join(tmp, "b.hatchet")) as f:
        return _names(json.load(f)[0])


SCENARIOS = {name[len("scenario_"):]: fn for name, fn in sorted(globals().items()) if name.startswith("scenario_")}

#: what Proton 3.9 gives (read off the oracle)
EXPECTED = {
    "node_made_by_an_earlier_session": ["ROOT", ["init", "test"]],
    "two_active_sessions": [["ROOT", ["x", "y"]], ["ROOT", ["y", "x"]]],
    "phases": [["ROOT", [["p", ["b", "a"]]]], ["ROOT", [["p", ["a", "c", "b"]]]]],
    "states_metrics_enter_scope": [["ROOT", ["m1", ["q", ["st"]], "m2", "z", ["deep", ["m1"]]]],
                                   ["ROOT", [["q", ["st"]], "m2", "m1", "z", ["deep", ["m1"]]]]],
    "threads": [["ROOT", [["main", ["t1", "t2", "t0"]]]], ["ROOT", [["main", ["t1", "t2", "t0"]], "late"]]],
    "hatchet_file": ["ROOT", ["s1", ["s2", ["j", "k"]]]],
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario(name, tmp_path):
    assert SCENARIOS[name](proton, str(tmp_path)) == EXPECTED[name]


def test_kernel_listed_where_it_was_launched(mock, tmp_path):
    # Proton inserts the kernel node at launch: before a scope entered after the launch,
    # even when the kernel records arrive later
    a = proton.start(str(tmp_path / "a"), backend="mock")
    with proton.scope("p"):
        with proton.scope("after"):
            pass
    mock.flush()
    proton.finalize(a)
    proton.start(str(tmp_path / "b"), backend="mock")
    with proton.scope("p"):
        with proton.scope("before"):
            pass
        mock.launch("k1")
        with proton.scope("after"):
            mock.launch("k2")
        mock.launch("k0")
    mock.flush()
    proton.finalize()
    with open(tmp_path / "b.hatchet") as f:
        root = json.load(f)[0]
    assert child_names(find(root, "p")) == ["before", "k1", "after", "k0"]


def test_kernel_seen_first_in_a_later_batch_keeps_its_launch_place(mock, tmp_path):
    proton.start(str(tmp_path / "a"), backend="mock")
    with proton.scope("p"):
        mock.launch("k1")
        mock.launch("k2")
        with proton.scope("s"):
            pass
    mock.flush()
    proton.finalize()
    with open(tmp_path / "a.hatchet") as f:
        root = json.load(f)[0]
    assert child_names(find(root, "p")) == ["k1", "k2", "s"]


def test_launch_hook_op_listed_at_launch(tmp_path):
    from proton_ctypes.hooks.launch import LaunchHook
    s = proton.start(str(tmp_path / "a"), backend="host", hook="triton")
    hook = LaunchHook()

    class Meta:
        def __init__(self, name):
            self.data = {"name": name}

        def get(self):
            return {"name": self.data["name"]}

    with proton.scope("p"):
        with proton.scope("first"):
            pass
        hook.enter(Meta("op"))
        hook.exit(Meta("op"))
        with proton.scope("last"):
            pass
    assert child_names(find(proton.data.get(s)[0], "p")) == ["first", "op", "last"]
    proton.finalize()


# -- against the real profiler -------------------------------------------------------------

_RUNNER = """
import json, os
import test_child_order as t
out = {}
for name, fn in sorted(t.SCENARIOS.items()):
    os.makedirs(name)
    out[name] = fn(p, os.path.abspath(name))
print(json.dumps(out))
"""


@pytest.mark.skipif(side_by_side.oracle_missing() is not None, reason=side_by_side.oracle_missing() or "")
def test_matches_real_proton(tmp_path):
    folders = {impl: str(tmp_path / impl) for impl in side_by_side.IMPLS}
    for d in folders.values():
        os.makedirs(d)
    results = {impl: json.loads(line) for impl, line in side_by_side.run_both(_RUNNER, folders).items()}
    assert results["real"] == EXPECTED
    assert results["ours"] == results["real"]
