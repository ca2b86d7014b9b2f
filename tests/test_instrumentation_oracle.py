"""proton_ctypes against the REAL libproton decoder (triton 3.9's, and 3.6's when available).

libproton's instrumentation profiler runs host-only here: a stub CUDA driver makes device
pointers host pointers and copies memcpy (``tests/data/instrumentation``).  Random
scenarios (kernels with nested, mismatched and async scopes, 64/32-bit clocks, sampled
warps, wrapped circular segments, bad CTA records, several launches and kernels under CPU
scopes) and hand-picked ones go through libproton's ``exit_instrumented_op`` and through
our hook; outputs (tree or cycle trace), stderr warnings and errors must be equal.

Allowance: the device block's values (libproton reads the stub driver: zeros).  ROOT's
metrics are compared exactly, in ``hatchet`` and ``hatchet_msgpack`` alike (3.9 writes
``cycles: 0, normalized_cycles: 0`` there, see ``test_root_zeros``).  Phases without any
cycle event are the ordinary trace writer's and are not compared here.  Every scenario
runs in fresh processes on both sides.

``PROTON_CTYPES_TRITON36_PYTHON`` may name an interpreter with triton 3.6 to also compare
with 3.6's libproton (without async entries, which 3.6 does not know, and with 3.6's
documented differences: ROOT, name-sorted children, no ``Init/Post Final Time`` args,
``Invalid preamble`` raised).
"""
import json
import os
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "data", "instrumentation"))

import instr_scenarios as S  # noqa: E402
from proton_ctypes.backends.instrumentation.layout import build_block, build_buffer, scratch_size  # noqa: E402
from proton_ctypes.backends.instrumentation.modes import interpret_mode  # noqa: E402

A = 1
N_RANDOM = int(os.environ.get("PROTON_CTYPES_ORACLE_SCENARIOS", "24"))


def _oracle_available():
    try:
        import importlib.util
        S.build_stubs()
        if importlib.util.find_spec("triton._C.libproton") is None:
            return "triton has no libproton"
        return S.oracle_mismatch()
    except Exception as e:
        return str(e)


_why = _oracle_available()
pytestmark = pytest.mark.skipif(_why is not None, reason=f"libproton oracle unavailable: {_why}")


def _lines(stderr):
    return [ln for ln in stderr.splitlines() if ln.startswith(("Warning (cta", "ParserException"))]


def _normalise(text, data):
    obj = json.loads(text)
    if data == "tree":
        obj[1] = {k: sorted(v) for k, v in obj[1].items()}
    return obj


def compare(path, python=None):
    """``None`` when both sides agree on the scenario at ``path``, else a description."""
    with open(path) as f:
        data = json.load(f)["data"]
    o_out, o_err, o_stderr = S.run_oracle(path, python=python)
    u_out, u_err, u_stderr = S.run_ours_subprocess(path)
    if (o_err or u_err) and o_err != u_err:
        return f"errors differ: libproton {o_err!r}, ours {u_err!r}"
    if _lines(o_stderr) != _lines(u_stderr):
        return f"stderr differs: {_lines(o_stderr)} vs {_lines(u_stderr)}"
    if o_err:
        return None
    if data == "trace" and '"displayTimeUnit":"us"' in o_out:
        return None  # no cycle event: the ordinary trace writer's business
    a, b = _normalise(o_out, data), _normalise(u_out, data)
    return None if a == b else f"outputs differ ({path})"


def _random_case(seed, data, errors):
    sc, bufs = S.random_scenario(seed, data=data, allow_errors=errors)
    return S.write_scenario(sc, bufs, tempfile.mkdtemp(prefix=f"oracle{seed}_"))


@pytest.fixture(scope="module")
def random_results():
    cases = []
    for i in range(N_RANDOM):
        cases.append(("tree", i, i % 3 == 0))
        cases.append(("trace", 1000 + i, i % 4 == 0))
    paths = [_random_case(seed, data, err) for data, seed, err in cases]
    with ThreadPoolExecutor(max(1, min(8, os.cpu_count() or 1))) as ex:
        return dict(zip([f"{d}-{s}" for d, s, _e in cases], ex.map(compare, paths)))


def test_random_scenarios_tree(random_results):
    bad = {k: v for k, v in random_results.items() if k.startswith("tree") and v}
    assert not bad


def test_random_scenarios_trace(random_results):
    bad = {k: v for k, v in random_results.items() if k.startswith("trace") and v}
    assert not bad


def _case(blocks, mode="default", data="tree", nw=2, names=((0, "a"), (1, "ev"), (2, "b")), parents=(), bs=1024,
          cpu=()):
    scratch = scratch_size(nw, bs)
    buf = build_buffer([build_block(i, 3 + i, nw, bs, w, scratch=scratch) for i, w in enumerate(blocks)], scratch)
    sc = {"mode": mode, "libproton_mode": "cuda:" + str(interpret_mode(mode)), "data": data,
          "kernels": {"100": {"name": "kern", "num_warps": nw, "scratch": scratch, "names": [list(x) for x in names],
                              "parents": [list(x) for x in parents]}},
          "launches": [{"fid": 100, "buffer": "l.bin", "cpu_scopes": list(cpu)}]}
    return S.write_scenario(sc, {"l.bin": buf}, tempfile.mkdtemp(prefix="oracle_case_"))


TS = "default:optimizations=time_shift"
CASES = {
    "nested": ([{0: [(0, 0, 100), (0, 2, 150), (1, 2, 200), (1, 0, 300)], 1: [(0, 0, 90), (1, 0, 95)]}], {}),
    "time shift": ([{0: [(0, 0, 100), (0, 2, 150), (1, 2, 200), (1, 0, 300)]}], {"mode": TS, "data": "trace"}),
    "tiny values wrap in the time shift": ([{0: [(0, 0, 1), (0, 2, 2), (1, 2, 3), (1, 0, 4)]}],
                                           {"mode": TS, "data": "trace"}),
    "async across warps": ([{0: [(0, 0, 100), (0, 1, 150, A), (1, 0, 200)], 1: [(1, 1, 300, A)]}],
                           {"mode": TS, "data": "trace"}),
    "async only warps": ([{0: [(0, 1, 150, A)], 1: [(1, 1, 300, A)]}], {"mode": TS, "data": "trace"}),
    "async small values": ([{0: [(0, 0, 1), (0, 1, 2, A), (1, 0, 3)], 1: [(1, 1, 4, A)]}],
                           {"mode": TS, "data": "trace"}),
    "async link order": ([{1: [(0, 1, 100, A), (1, 1, 150, A)], 0: [(0, 1, 120, A), (1, 1, 300, A)]}],
                         {"data": "trace"}),
    "async tree order": ([{0: [(0, 2, 100, A), (0, 1, 110, A), (1, 1, 150, A)], 1: [(1, 2, 300, A)]}], {}),
    "several CTAs and SMs": ([{0: [(0, 0, 100), (1, 0, 200)]}, {0: [(0, 0, 50), (1, 0, 80)], 1: [(0, 2, 60),
                                                                                             (1, 2, 70)]},
                              {1: [(0, 0, 500), (1, 0, 900)]}], {"data": "trace"}),
    "overlapping scopes get lines": ([{0: [(0, 0, 100), (0, 2, 150), (1, 0, 200), (1, 2, 300)]}],
                                     {"data": "trace"}),
    "cpu scopes above the kernel": ([{0: [(0, 0, 100), (1, 0, 200)]}], {"cpu": ("outer", "inner")}),
    "cpu scopes in the trace call stack": ([{0: [(0, 2, 100), (1, 2, 200)]}],
                                           {"cpu": ("outer",), "data": "trace", "parents": ((2, 0),)}),
    "clock overflow": ([{0: [(0, 0, 300), (1, 0, 100)]}], {}),
}


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_hatchet_msgpack(seed):
    msgpack = pytest.importorskip("msgpack")
    sc, bufs = S.random_scenario(seed, data="tree")
    sc["format"] = "hatchet_msgpack"
    path = S.write_scenario(sc, bufs, tempfile.mkdtemp())
    o_out, o_err, _ = S.run_oracle(path)
    u_out, u_err, _ = S.run_ours_subprocess(path)
    assert o_err == u_err and o_err is None
    a, b = msgpack.unpackb(o_out), msgpack.unpackb(u_out)
    # ROOT as 3.9 packs it: cycle zeros as (unsigned) integers, not doubles
    assert a[0]["metrics"] == {"cycles": 0, "normalized_cycles": 0}
    assert all(type(v) is int for v in b[0]["metrics"].values())
    a[1], b[1] = sorted(a[1]), sorted(b[1])
    assert a == b


@pytest.mark.parametrize("name", sorted(CASES))
def test_targeted_cases(name):
    blocks, kw = CASES[name]
    assert compare(_case(blocks, **kw)) is None


@pytest.mark.parametrize("fmt", ["hatchet", "hatchet_msgpack"])
@pytest.mark.parametrize("cpu", [(), ("outer",)])
def test_root_zeros(fmt, cpu):
    """3.9 writes ``cycles: 0, normalized_cycles: 0`` (integers) at ROOT, in both tree formats."""
    if fmt == "hatchet_msgpack":
        msgpack = pytest.importorskip("msgpack")
        load = msgpack.unpackb
    else:
        load = json.loads
    path = _case([{0: [(0, 0, 100), (1, 0, 200)]}], cpu=cpu)
    with open(path) as f:
        sc = json.load(f)
    sc["format"] = fmt
    with open(path, "w") as f:
        json.dump(sc, f)
    o_out, o_err, _s = S.run_oracle(path)
    u_out, u_err, _s2 = S.run_ours_subprocess(path)
    assert o_err is None and u_err is None
    a, b = load(o_out)[0]["metrics"], load(u_out)[0]["metrics"]
    assert a == b == {"cycles": 0, "normalized_cycles": 0}
    assert [type(v) for v in a.values()] == [type(v) for v in b.values()] == [int, int]


PY36 = os.environ.get("PROTON_CTYPES_TRITON36_PYTHON")


@pytest.mark.skipif(not PY36, reason="set PROTON_CTYPES_TRITON36_PYTHON to an interpreter with triton 3.6")
@pytest.mark.parametrize("data", ["tree", "trace"])
def test_against_libproton_36(data):
    def sort(n):
        n["children"] = sorted((sort(c) for c in n["children"]), key=lambda c: c["frame"]["name"])
        return n

    bad = []
    for seed in range(12):
        sc, bufs = S.random_scenario(2000 + seed, data=data, allow_async=False)
        path = S.write_scenario(sc, bufs, tempfile.mkdtemp())
        o_out, o_err, _ = S.run_oracle(path, python=PY36)
        u_out, u_err, _ = S.run_ours_subprocess(path)
        if o_err and "Invalid preamble" in o_err:
            continue  # 3.6 raises, 3.9 skips the CTA
        if o_err or u_err:
            if (o_err or "").replace("[PROTON] ", "") != (u_err or "").replace("[PROTON] ", ""):
                bad.append((seed, o_err, u_err))
            continue
        if not o_out or '"displayTimeUnit":"us"' in o_out:
            continue
        a, b = json.loads(o_out), json.loads(u_out)
        if data == "tree":
            a[0]["metrics"] = b[0]["metrics"] = {}
            ok = sort(a[0]) == sort(b[0])
        else:
            for e in b["traceEvents"]:
                e["args"].pop("Init Time (ns)", None)
                e["args"].pop("Post Final Time (ns)", None)
            ok = a == b
        if not ok:
            bad.append((seed, path))
    assert not bad
