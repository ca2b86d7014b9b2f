#!/bin/bash
# Which earlier tests of Proton's suite make its test_pcsampling fail under proton_ctypes, and
# whether detaching CUPTI at every stop (PROTON_CTYPES_CUPTI_FINALIZE=1) changes it.
# Found on the H100: it is neither; the fills get a PC sample by chance, in fresh sessions too
# (tests/gpu/probe_pc_tiny.py).  On the device machine, from the repository root, with
# .upstream/third_party and .upstream/wheels-cp312 carried:
#   bash tests/gpu/pcsampling_bisect.sh          -> $OUT/pcb-*.jsonl (PC-sampler ranges per run)
#   PCB_RUNS="all all-detached" bash tests/gpu/pcsampling_bisect.sh       (only these runs, in this order)
# Each run: the suite's test_api.py and test_profile.py with a -k selection that always ends in
# test_pcsampling (so it runs last, after the selected tests, as in the suite's order).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export PYTHONPATH="$PWD/tests/gpu:$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTEST_PLUGINS=pc_trace_plugin
LIMIT=${PCB_LIMIT:-150}

one() {  # NAME FINALIZE(1 or "") K-EXPRESSION
  local name=$1 policy=$2 expr=$3 dir=/tmp/pcb/$1
  PROTON_CTYPES_PC_TRACE="$OUT/pcb-$name.jsonl" PROTON_CTYPES_CUPTI_FINALIZE=$policy \
    PROTON_UPSTREAM_IMPLS=ours PROTON_UPSTREAM_RUN_TIMEOUT=$LIMIT timeout $((LIMIT + 30)) \
    bash tests/upstream/run_on_gpu.sh "$dir" --files test_api.py test_profile.py -- -k "$expr" \
    --basetemp=/tmp/pcb-bt-$name > "/tmp/pcb-$name.log" 2>&1
  python3 - "$name" "$policy" "$dir/ours.json" <<'PY'
import json, sys
name, policy, path = sys.argv[1:]
try:
    s = json.load(open(path))
except (OSError, ValueError) as e:
    print(f"{name:10s} finalize={policy or '-':10s} no summary ({e})"); sys.exit()
pcs = {t: v["outcome"] for t, v in s["tests"].items() if "test_pcsampling" in t}
print(f"{name:10s} finalize={policy or '-':10s} {s['counts']}  test_pcsampling: {pcs}")
PY
}

ALL="test_api or test_torch or test_triton or test_cudagraph or test_metrics or test_scope_backward or \
test_cpu_timed_scope or test_get_data or test_clear_data or test_data_is or test_hook or test_pcsampling"
for run in ${PCB_RUNS:-all all-detached alone api torch graphs data hooks}; do
  case $run in
    all) one all "" "$ALL" ;;
    all-detached) one all-detached 1 "$ALL" ;;
    alone) one alone "" "test_pcsampling" ;;
    api) one api "" "test_api or test_pcsampling" ;;
    torch) one torch "" "test_torch or test_triton or test_pcsampling" ;;
    graphs) one graphs "" "test_cudagraph or test_pcsampling" ;;
    data) one data "" "test_metrics or test_scope_backward or test_cpu_timed_scope or test_get_data or test_clear_data or test_data_is or test_pcsampling" ;;
    hooks) one hooks "" "test_hook or test_pcsampling" ;;
    *) echo "unknown run $run" ;;
  esac
done
