"""Instrumentation modes: Proton's grammar and errors, and what each option becomes.

Where real Proton 3.9 can be loaded host-only (the oracle of tests/oracle), every string
is also run through its ``_interpret_mode`` and the results compared.
"""
import json
import os
import subprocess
import sys
import warnings

import pytest

from proton_ctypes import mode as modes
from proton_ctypes.backends.instrumentation.modes import (check_supported, interpret_mode,
                                                          sampling_uids, triton_enum)

DEFAULT_STR = ("default:metric_type=METRIC_TYPE.CYCLE:sampling_strategy=SAMPLING_STRATEGY.NONE:sampling_options="
               ":granularity=GRANULARITY.WARP:buffer_strategy=BUFFER_STRATEGY.CIRCULAR:buffer_type=BUFFER_TYPE.SHARED"
               ":buffer_size=0:optimizations=")

CASES = [
    None, "", "default", "mma", "default:buffer_size=4096", "default:optimizations=time_shift,clock32",
    "default:optimizations=time_shift, sched_stores", "mma:granularity=warp_group_2:buffer_type=global",
    "default:sampling_strategy=selective:sampling_options=0,2", "default:buffer_strategy=flush",
    "default:metric_type=cycle:optimizations=sched_barriers", "default:k=v=w",
    # errors
    "default:oops", "nope", "nope:buffer_size=1", "default:metric_type=time", "default:buffer_type=local",
    "default:buffer_strategy=ring", "default:granularity=block", "default:sampling_strategy=all",
    "default:optimizations=fast", "nope:optimizations=fast", "default:buffer_size=big", "default:metric_type=",
    "default:optimizations=time_shift,", "default:granularity=warp:oops",
]


def ours(s):
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return "ok", str(interpret_mode(s))
    except Exception as e:
        return type(e).__name__, str(e)


def test_defaults_and_names():
    assert str(interpret_mode(None)) == DEFAULT_STR
    assert str(interpret_mode("")) == DEFAULT_STR
    assert str(interpret_mode("mma")) == "mma" + DEFAULT_STR[len("default"):]
    m = modes.Default(buffer_size=64)
    assert interpret_mode(m) is m


@pytest.mark.parametrize("text,err", [
    ("default:oops", "Malformed instrumentation option: 'oops'"),
    ("nope", "Unknown mode: nope"),
    ("nope:buffer_size=1", "Unknown mode: nope:buffer_size=1"),
    ("default:metric_type=time", "Unknown metric_type: time"),
    ("default:buffer_type=local", "Unknown buffer_type: local"),
    ("default:buffer_strategy=ring", "Unknown buffer_strategy: ring"),
    ("default:granularity=block", "Unknown granularity: block"),
    ("default:sampling_strategy=all", "Unknown sampling_strategy: all"),
    ("default:optimizations=fast", "Unknown optimization: fast"),
    ("nope:optimizations=fast", "Unknown optimization: fast"),
    ("default:metric_type=", "Unknown metric_type: "),
    ("default:optimizations=time_shift,", "Unknown optimization: "),
    ("default:buffer_size=big", "invalid literal for int() with base 10: 'big'"),
])
def test_errors(text, err):
    with pytest.raises(ValueError) as ei:
        interpret_mode(text)
    assert str(ei.value) == err


def test_options_reach_the_object():
    m = interpret_mode("mma:granularity=warp_group_2:buffer_type=global:buffer_size=8192:"
                       "sampling_strategy=selective:sampling_options=1,3:optimizations=clock32,sched_stores")
    assert m.name == "mma"
    assert str(m.granularity) == "GRANULARITY.WARP_GROUP_2"
    assert str(m.buffer_type) == "BUFFER_TYPE.GLOBAL" and m.buffer_size == 8192
    assert str(m.sampling_strategy) == "SAMPLING_STRATEGY.SELECTIVE" and m.sampling_options == "1,3"
    assert [str(o) for o in m.optimizations] == ["clock32", "sched_stores"]


def test_unknown_keys_are_ignored_like_proton_but_warned():
    with pytest.warns(UserWarning, match="k are not known to Proton"):
        m = interpret_mode("default:k=v")
    assert str(m) == DEFAULT_STR


def test_granularity_other_than_warp_is_refused_with_protons_message():
    check_supported(interpret_mode("default:granularity=warp"), "nvidia")
    with pytest.raises(ValueError, match=r"^\[PROTON\] Only warp granularity is supported for now"):
        check_supported(interpret_mode("default:granularity=cta"), "nvidia")


def test_sched_barriers_has_no_effect_on_nvidia_and_says_so():
    with pytest.warns(UserWarning, match="sched_barriers"):
        check_supported(interpret_mode("default:optimizations=sched_barriers"), "nvidia")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_supported(interpret_mode("default:optimizations=sched_barriers"), "amd")


def test_sampling_uids_and_protons_index_error():
    assert sampling_uids("", 4) == [0, 1, 2, 3]
    assert sampling_uids(" 1, 3 ,", 4) == [1, 3]
    with pytest.raises(IndexError) as ei:
        sampling_uids("0,5", 2)
    assert str(ei.value) == ("[PROTON] Invalid sampling warp id: 5. We have 2 warps in total. Please check the "
                             "proton sampling options.")


def test_triton_enums_by_name():
    tp = pytest.importorskip("triton._C.libtriton").proton
    m = interpret_mode("default:granularity=warp_8:buffer_strategy=flush:buffer_type=global")
    assert triton_enum(tp.GRANULARITY, m.granularity) == tp.GRANULARITY.WARP_8
    assert triton_enum(tp.BUFFER_STRATEGY, m.buffer_strategy) == tp.BUFFER_STRATEGY.FLUSH
    assert triton_enum(tp.BUFFER_TYPE, m.buffer_type) == tp.BUFFER_TYPE.GLOBAL
    assert triton_enum(tp.METRIC_TYPE, m.metric_type) == tp.METRIC_TYPE.CYCLE
    assert triton_enum(tp.SAMPLING_STRATEGY, m.sampling_strategy) == tp.SAMPLING_STRATEGY.NONE


_ORACLE = r'''
import json, sys
sys.path.insert(0, sys.argv[1])
from oracle.real_proton import load
load()
from triton.profiler.hooks.instrumentation import _interpret_mode
out = []
for s in json.loads(sys.argv[2]):
    try:
        out.append(["ok", str(_interpret_mode(s))])
    except Exception as e:
        out.append([type(e).__name__, str(e)])
print(json.dumps(out))
'''


def test_same_results_as_protons_interpret_mode():
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        r = subprocess.run([sys.executable, "-c", _ORACLE, here, json.dumps(CASES)], capture_output=True, text=True,
                           timeout=120)
    except Exception as e:  # pragma: no cover
        pytest.skip(f"oracle not runnable: {e}")
    if r.returncode != 0:
        pytest.skip(f"real Proton not loadable here: {r.stderr[-300:]}")
    theirs = [tuple(x) for x in json.loads(r.stdout.strip().splitlines()[-1])]
    assert [ours(s) for s in CASES] == theirs
