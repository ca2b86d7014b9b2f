"""Profile buffers captured on the H200 (real Proton 3.6, triton 3.6) decoded on the CPU.

``tests/data/instrumentation/instr_h200.tar.gz`` comes from
``python tests/gpu/test_instrumentation_gpu.py --device-run OUT`` on the H200: per
configuration (a Triton matmul, an attention-like loop, a Gluon kernel with nested scopes;
default, global buffer + clock32, selective sampling + time shift with ``data="trace"``),
the raw buffer of each of three launches (``launchN.bin``, captured through Proton's
``enable_host_buffer``), the kernel's layout and scopes (``scenario.json``) and Proton's
own output for those launches (``proton.hatchet`` / ``proton.chrome_trace``).  proton_ctypes
must reproduce Proton's output from the buffers exactly (modulo what 3.6 and 3.9 write
differently: ROOT's zero metrics and 3.6's name-sorted children; the 3.9-only trace args).
When triton 3.9's libproton can be run host-only, the buffers are also decoded by it and
compared with ours without any allowance.
"""
import json
import os
import sys
import tarfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data", "instrumentation")
sys.path.insert(0, DATA)

import instr_scenarios as S  # noqa: E402
import instr_gpu as G  # noqa: E402

CONFIGS = [c[0] for c in G.CONFIGS]


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    root = tmp_path_factory.mktemp("h200")
    with tarfile.open(os.path.join(DATA, "instr_h200.tar.gz")) as tar:
        tar.extractall(root)
    return str(root)


def _config(captured, name):
    folder = os.path.join(captured, name)
    with open(os.path.join(folder, "scenario.json")) as f:
        sc = json.load(f)
    return folder, sc


@pytest.mark.parametrize("name", CONFIGS)
def test_buffers_decode_to_protons_output(captured, name):
    folder, sc = _config(captured, name)
    data = sc["data"]
    ours = G.replay(folder, sc["kernels"]["1"], None if sc["mode"] == "default" else sc["mode"], data)
    proton_out = os.path.join(folder, "proton" + (".hatchet" if data == "tree" else ".chrome_trace"))
    assert G.compare_exact(proton_out, ours, data) == []


@pytest.mark.parametrize("name", CONFIGS)
def test_buffers_decode_like_libproton_39(captured, name):
    folder, sc = _config(captured, name)
    why = S.oracle_mismatch()
    if why:
        pytest.skip(why)
    try:
        o_out, o_err, _ = S.run_oracle(os.path.join(folder, "scenario.json"))
    except Exception as e:
        pytest.skip(f"libproton 3.9 not runnable host-only here: {e}")
    u_out, u_err, _ = S.run_ours_subprocess(os.path.join(folder, "scenario.json"))
    assert o_err is None and u_err is None
    a, b = json.loads(o_out), json.loads(u_out)
    if sc["data"] == "tree":
        a[1] = sorted(a[1])
        b[1] = sorted(b[1])
    assert a == b


def test_the_captured_layouts_are_what_the_decoder_assumes(captured):
    summary = json.load(open(os.path.join(DATA, "instr_h200_summary.json")))
    assert summary["triton"].startswith("3.6")
    for name in CONFIGS:
        hdr = summary["configs"][name]["layout"]["host_header"]
        lay = summary["configs"][name]["layout"]
        assert hdr["scratch"] == lay["scratch"] and hdr["total_unit"] == lay["num_warps"]
        assert hdr["payload_size"] == hdr["block_num"] * hdr["scratch"]
    # Proton 3.6 refuses a string mode spelling the default granularity (we accept it)
    assert summary["proton_string_granularity_warp"] == "RuntimeError: Only warp granularity is supported for now"


def _payloads(captured, name):
    folder = os.path.join(captured, name)
    return [open(os.path.join(folder, f"launch{i}.bin"), "rb").read() for i in range(G.LAUNCHES)]


def test_first_launch_runs_cold_hence_medians_in_the_live_comparison(captured):
    """Why the live GPU comparison uses per-launch medians (see instr_gpu.py)."""
    summary = json.load(open(os.path.join(DATA, "instr_h200_summary.json")))
    lay = summary["configs"]["gluon_default"]["layout"]
    cyc = G.per_launch_cycles(_payloads(captured, "gluon_default"), lay)
    store = cyc["outer/store"]
    assert store[0] > 2.5 * store[1] and abs(store[1] - store[2]) < 0.05 * store[1]
    # compute-only scope: no cold effect
    inner = cyc["outer/inner"]
    assert max(inner) < 1.05 * min(inner)
    # our live run (three warm launches, summed in ours.hatchet) against Proton's median
    with open(os.path.join(captured, "gluon_default", "ours.hatchet")) as f:
        ours = json.load(f)[0]["children"][0]["children"][0]
    store_node = next(c for c in ours["children"] if c["frame"]["name"] == "store")
    assert abs(store_node["metrics"]["cycles"] / 3 / sorted(store)[1] - 1) < 0.05


@pytest.mark.parametrize("name", CONFIGS)
def test_live_comparison_of_a_run_with_itself(captured, name):
    folder, sc = _config(captured, name)
    summary = json.load(open(os.path.join(DATA, "instr_h200_summary.json")))
    lay = summary["configs"][name]["layout"]
    out = os.path.join(folder, "proton" + (".hatchet" if sc["data"] == "tree" else ".chrome_trace"))
    pays = _payloads(captured, name)
    probs, ratios = G.compare_live(out, out, sc["data"], pays, pays, lay)
    assert probs == [] and all(r["ratio"] == 1.0 for r in ratios.values())
