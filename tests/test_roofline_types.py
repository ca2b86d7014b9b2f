"""Roofline metric types: ``metric.transform_tensor_metrics`` gives ``flops*`` keys floats and
``bytes`` ints, whatever the host value (int, bool, numpy scalar, list, tuple, CPU tensor).

The expectations were read off Proton 3.9's function; ``test_matches_real_proton`` runs both
functions (the real one through the CPU oracle of tests/oracle/real_proton.py, in a subprocess) on every input
kind and compares the results.  Deliberate difference: a CPU tensor under a non-roofline key
is turned into a Python scalar or list here; 3.9 passes the tensor on, and libproton then
truncates a float tensor to an int or rejects a tensor of several elements.
"""
import json

import numpy as np
import pytest

import proton_ctypes as proton
from proton_ctypes.metric import transform_tensor_metrics
from conftest import find, read_tree
from oracle import side_by_side

FLOPS_KEYS = ["flops", "flops8", "flops16", "flops32", "flops64"]


@pytest.mark.parametrize("key", FLOPS_KEYS)
@pytest.mark.parametrize("value,expected", [
    (1, 1.0), (True, 1.0), (False, 0.0), (2.5, 2.5), (10 ** 20, 1e20),
    (np.int64(3), 3.0), (np.float32(1.5), 1.5), (np.bool_(True), 1.0), (np.array(4), 4.0), ("7", 7.0),
])
def test_flops_scalars_become_float(key, value, expected):
    scalar, tensor = transform_tensor_metrics({key: value})
    assert tensor == {}
    assert type(scalar[key]) is float and scalar[key] == expected


@pytest.mark.parametrize("value,expected", [
    (3.0, 3), (3.7, 3), (True, 1), (np.float64(2.5), 2), (np.int32(7), 7), ("9", 9),
])
def test_bytes_scalars_become_int(value, expected):
    scalar, _ = transform_tensor_metrics({"bytes": value})
    assert type(scalar["bytes"]) is int and scalar["bytes"] == expected


@pytest.mark.parametrize("value", [[1, 2], (1, 2), [True, 2.0]])
def test_flops_sequences_become_float_lists(value):
    scalar, _ = transform_tensor_metrics({"flops32": value})
    assert scalar["flops32"] == [float(v) for v in value]
    assert all(type(v) is float for v in scalar["flops32"])


def test_bytes_sequences_become_int_lists():
    assert transform_tensor_metrics({"bytes": (1.5, 2)})[0]["bytes"] == [1, 2]
    assert transform_tensor_metrics({"bytes": ()})[0]["bytes"] == []


def test_other_keys_keep_their_values():
    vals = {"custom": 4, "f": 2.5, "b": True, "n": np.int64(3), "l": (1, 2), "flops128": 7}
    scalar, tensor = transform_tensor_metrics(vals)
    assert tensor == {}
    for k, v in vals.items():
        assert scalar[k] is v


@pytest.mark.parametrize("key,value,exc", [
    ("flops", "x", ValueError), ("flops", None, TypeError), ("bytes", None, TypeError),
    ("flops16", np.array([1, 2]), TypeError), ("bytes", "x", ValueError),
])
def test_unconvertible_roofline_values_raise(key, value, exc):
    with pytest.raises(exc):
        transform_tensor_metrics({key: value})


def test_cpu_tensors():
    torch = pytest.importorskip("torch")
    scalar, tensor = transform_tensor_metrics({
        "flops64": torch.tensor([7, 8], dtype=torch.int64), "bytes": torch.tensor([9.0, 10.0]),
        "flops": torch.tensor(2), "custom": torch.tensor(5), "v": torch.tensor([1.5, 2.5])})
    assert tensor == {}
    assert scalar["flops64"] == [7.0, 8.0] and all(type(v) is float for v in scalar["flops64"])
    assert scalar["bytes"] == [9, 10] and all(type(v) is int for v in scalar["bytes"])
    assert type(scalar["flops"]) is float and scalar["flops"] == 2.0
    assert type(scalar["custom"]) is int and scalar["custom"] == 5  # deliberate: .item()
    assert scalar["v"] == [1.5, 2.5]


def test_scope_with_int_flops_stores_a_double(tmp_path):
    proton.start(str(tmp_path / "r"), backend="host")
    with proton.scope("s", {"flops": 3, "bytes": 2.0}):
        pass
    proton.finalize()
    tree, _ = read_tree(tmp_path / "r.hatchet")
    m = find(tree, "s")["metrics"]
    assert type(m["flops"]) is float and m["flops"] == 3.0
    assert type(m["bytes"]) is int and m["bytes"] == 2


# -- against the real function ---------------------------------------------------------------

_CASES = """
import numpy as np
cases = [1, 2.5, True, False, np.int64(3), np.float32(1.5), np.float64(2.5), np.bool_(True), np.int32(7),
         [1, 2], (1, 2), [1.5, 2], [True, 1], np.array(3.0), np.array([1, 2]), "7", "x", None, 10**20, -1,
         [], ()]
try:
    import torch
    cases += [torch.tensor(3), torch.tensor(2.5), torch.tensor([1, 2]), torch.tensor([1.5, 2.5]),
              torch.tensor(True), torch.tensor([5])]
except ImportError:
    pass
keys = ["flops", "flops8", "flops16", "flops32", "flops64", "bytes", "custom", "flops128"]
out = []
for key in keys:
    for i, v in enumerate(cases):
        try:
            s, t = transform({key: v})
            x = s.get(key)
            if hasattr(x, "data_ptr"):
                x = "<tensor passed on>"
            out.append([key, i, type(x).__name__, repr(x), sorted(t)])
        except Exception as e:
            out.append([key, i, "EXC", type(e).__name__, str(e)])
"""

#: the function under test, as the script sees it (``p``: the profiler)
_TRANSFORM = """
import importlib, json
transform = importlib.import_module(p.__name__ + ".metric").transform_tensor_metrics
"""


def _results(tmp_path):
    folders = {impl: str(tmp_path) for impl in side_by_side.IMPLS}
    lines = side_by_side.run_both(_TRANSFORM + _CASES + "print(json.dumps(out))\n", folders)
    return {impl: json.loads(line) for impl, line in lines.items()}


@pytest.mark.skipif(side_by_side.oracle_missing() is not None, reason=side_by_side.oracle_missing() or "")
def test_matches_real_proton(tmp_path):
    results = _results(tmp_path)
    real, ours = results["real"], results["ours"]
    assert len(real) == len(ours)
    differ = []
    for r, o in zip(real, ours):
        if r == o:
            continue
        if r[3] == "'<tensor passed on>'" and r[0] != "bytes" and r[0] not in FLOPS_KEYS:
            continue  # deliberate: a CPU tensor under another key becomes .item()/.tolist()
        if r[2] == o[2] == "EXC" and r[3] == o[3] and o[4].startswith(f"metric {r[0]!r}: the value must be "):
            continue  # deliberate: Proton's exception type, with a message naming the key
        differ.append((r, o))
    assert not differ, differ
