#!/bin/bash
# Device runs, one step or several per call: the GPU tests, Proton's own suite and the benchmarks.
# Usage on the device machine, from the repository root (each step writes under $OUT):
#   bash tests/gpu/run_on_device.sh [STEP ...]            (default: tests overhead)
# Steps (each under its own `timeout`; a step's extra options in <STEP>_ARGS, its limit in
# <STEP>_TIMEOUT seconds):
#   tests     pytest tests/gpu (vs real Proton)    -> gpu_tests.txt, backend_report.jsonl
#             GPU_TESTS: test paths (default tests/gpu)
#   upstream  Proton's suite against ours through tests/upstream/run.py (carry .upstream/third_party
#             and .upstream/wheels-cp312)           -> upstream.txt, upstream-h200.json (the run's
#             record: commit it as tests/upstream/results/h200.json), upstream-failures.txt (the
#             exception lines), upstream-failed-files.tgz (what the failing tests wrote);
#             UPSTREAM_IMPLS="ours real" also runs the suite against the real triton.profiler;
#             UPSTREAM_PC_TRACE=1 traces our PC sampler's ranges (tests/gpu/pc_trace_plugin.py)
#             -> pc-trace.jsonl
#   pcsampling  Proton's test_pcsampling alone, PCSAMPLING_RUNS (default 2) times under each of
#             UPSTREAM_IMPLS (default "ours real"), alternating: whether a failure of the full run is
#             CUPTI's chance (carry as for upstream)   -> pcsampling.txt (each run's summary line)
#   overhead  bench/overhead.py                      -> overhead-h200.json, overhead.txt
#   models    bench/models.py                        -> models-h200.json, models.txt
#             MODELS_CASES: its --cases, kept whole ("per phase|no scopes": names have spaces)
#   threads   bench/threads.py (THREADS: counts)     -> threads-h200.json, threads.txt
#   longrun   bench/longrun.py                       -> longrun-h200.json, longrun.txt
#   attribution bench/attribution.py (ATTRIBUTION_ARGS, e.g. "--model compiled --recipes
#             kernel_only,kernel_no_timestamps,api_deny")   -> attribution-h200.json, attribution.txt
#   apicost   bench/api_cost.py (CPU per call/launch/step; APICOST_ARGS, e.g. "--impls proton,proton_ctypes
#             --context python")                    -> api_cost-h200.json, api_cost.txt
#   probe     tests/gpu/$PROBE (default probe_latency_toggle.py: CUPTI latency timestamps switched on
#             mid-session; probe_buffers_per_thread.py: what launch positions assume;
#             probe_after_stop.py: a launch's cost after a session ended, CUPTI attached or
#             detached, and under Proton; probe_pc_start_delay.py: PC samples of a short fill
#             against a wait after each sampling range's start; probe_pc_first_range.py: PC
#             samples of each of two fills, with and without an empty range first;
#             probe_pc_counters.py: CUPTI's counters of each range around three fills, and the
#             fills' samples and times under both profilers) -> probe.json
#   pyspy     py-spy (wheel carried in .whl/) records PYSPY_CMD (default: the models bench's
#             context="python" case under proton_ctypes), native frames, every thread (PYSPY_FLAGS
#             replaces "--native --threads", e.g. "--gil --threads")
#             -> pyspy.txt (collapsed stacks; bench/pyspy_summary.py's groups of the main thread in
#             the output, only the stacks through PYSPY_WITHIN if set, e.g. longrun.py:241)
# PROTON_BENCH_OVERLAY=.upstream/proton39 (carried; `python bench/proton_overlay.py build <triton
# 3.9 wheel> .upstream/proton39`): every bench's "proton", and the suite's "real", is Proton 3.9
# over the installed triton 3.6.
# $OUT gives back at most 8 files: run few steps per call.  ROUNDS (default 3) for every bench.
set -u
export PYTHONUNBUFFERED=1
# the repository is not installed on the device machine: every step imports proton_ctypes from here
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
# absolute: the suite's processes run in a folder of their own
[ -n "${PROTON_BENCH_OVERLAY:-}" ] && export PROTON_BENCH_OVERLAY=$(realpath "$PROTON_BENCH_OVERLAY")
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
ROUNDS=${ROUNDS:-3}
STEPS=${*:-tests overhead}
{
  date -Is; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c 'import sys, torch, triton, numpy; print(sys.version.split()[0], torch.__version__, triton.__version__, numpy.__version__)'
} > "$OUT/env.txt" 2>&1

step_tests() {
  export PROTON_CTYPES_GPU_REPORT="$OUT/backend_report.jsonl" PROTON_CTYPES_GPU_OUT=/tmp/gpu_scenarios
  mkdir -p /tmp/gpu_scenarios
  timeout "${TESTS_TIMEOUT:-240}" python3 -m pytest ${GPU_TESTS:-tests/gpu} -v -rs -p no:cacheprovider \
    ${TESTS_ARGS:-} > "$OUT/gpu_tests.txt" 2>&1
  echo "gpu tests rc=$?" >> "$OUT/gpu_tests.txt"
  tail -n 25 "$OUT/gpu_tests.txt"
}

#: every file of Proton's suite: the record lists what cannot run here, with its reason
UPSTREAM_FILES="test_api.py test_profile.py test_cmd.py test_viewer.py test_lib.py test_instrumentation.py test_override.py"

step_upstream() {
  local dir=/tmp/upstream_run bt=/tmp/upstream_basetemp
  if [ "${UPSTREAM_PC_TRACE:-0}" = 1 ]; then
    export PROTON_CTYPES_PC_TRACE="$OUT/pc-trace.jsonl" PYTEST_PLUGINS=pc_trace_plugin
    export PYTHONPATH="$PWD/tests/gpu:$PYTHONPATH"
  fi
  PROTON_UPSTREAM_IMPLS=${UPSTREAM_IMPLS:-ours} PROTON_UPSTREAM_RUN_TIMEOUT=${UPSTREAM_TIMEOUT:-270} \
    bash tests/upstream/run_on_gpu.sh "$dir" ${UPSTREAM_ARGS:---files $UPSTREAM_FILES} -- --basetemp=$bt \
    > "$OUT/upstream.txt" 2>&1
  cp "$dir/results-ours.json" "$OUT/upstream-h200.json" 2>/dev/null
  sed -n '/^\[ours/,$p' "$dir/ours.txt" >> "$OUT/upstream.txt" 2>/dev/null
  # each failure's exception lines, and the files its test wrote (tmp_path under the basetemp)
  grep -h -B2 -A12 "^E  " "$dir"/*.txt >> "$OUT/upstream-failures.txt" 2>/dev/null
  python3 - "$dir/results-ours.json" "$bt" "$OUT/upstream-failed-files.tgz" <<'PY'
import json, os, sys, tarfile
results, basetemp, out = sys.argv[1:]
try:
    failures = json.load(open(results))["failures"]
except (OSError, ValueError, KeyError):
    sys.exit(0)
dirs = [os.path.join(basetemp, d) for d in sorted(os.listdir(basetemp)) if os.path.isdir(os.path.join(basetemp, d))
        and any(d.startswith(f.split("::")[-1].split("[")[0][:30]) for f in failures)] if os.path.isdir(basetemp) else []
if dirs:
    with tarfile.open(out, "w:gz") as tar:
        for d in dirs:
            tar.add(d, arcname=os.path.basename(d))
PY
  tail -n 40 "$OUT/upstream.txt"
}

step_pcsampling() {
  local i impl
  for i in $(seq "${PCSAMPLING_RUNS:-2}"); do
    for impl in ${UPSTREAM_IMPLS:-ours real}; do
      timeout "${PCSAMPLING_TIMEOUT:-90}" python3 tests/upstream/run.py --impl "$impl" --files test_profile.py \
        -- -k pcsampling > /tmp/pcsampling.log 2>&1
      echo "run $i $impl rc=$?: $(grep -E '^\[(ours|real)' /tmp/pcsampling.log | tail -n 1)" >> "$OUT/pcsampling.txt"
    done
  done
  cat "$OUT/pcsampling.txt"
}

bench_step() {  # NAME TIMEOUT COMMAND...: one benchmark, its JSON and its printed table
  local name=$1 limit=$2; shift 2
  timeout "$limit" "$@" --json "$OUT/$name-h200.json" > "$OUT/$name.txt" 2>&1
  echo "$name rc=$?" >> "$OUT/$name.txt"
  tail -n 40 "$OUT/$name.txt"
}

step_pyspy() {
  python3 -m pip install -q --no-index --no-deps --target /tmp/pyspy .whl/py_spy*.whl || return
  local cmd=${PYSPY_CMD:-python3 bench/models.py --worker proton_ctypes --cases python --chunks 2}
  # PYSPY_FLAGS: --native falls behind on the compile case and times out; "--gil --threads" does not.
  # The program's own output goes to /tmp/pyspy.log, printed below: a recording of only the main
  # thread's imports is a program that failed (bench/threads.py's worker with --churn 0 did)
  timeout "${PYSPY_TIMEOUT:-300}" /tmp/pyspy/bin/py-spy record -r 250 ${PYSPY_FLAGS:---native --threads} -f raw \
    -o "$OUT/pyspy.txt" -- $cmd > /tmp/pyspy.log 2>&1
  echo "pyspy rc=$?"; tail -n 5 /tmp/pyspy.log
  # where the launching thread's samples go (bench/pyspy_summary.py; PYSPY_WITHIN: a frame of the timed loop)
  python3 bench/pyspy_summary.py "$OUT/pyspy.txt" ${PYSPY_WITHIN:+--within "$PYSPY_WITHIN"}
}

for step in $STEPS; do
  echo "=== $step $(date +%T)"
  case $step in
    tests) step_tests ;;
    upstream) step_upstream ;;
    pcsampling) step_pcsampling ;;
    overhead) bench_step overhead "${OVERHEAD_TIMEOUT:-300}" python3 bench/overhead.py --rounds "$ROUNDS" --reps 2 ${OVERHEAD_ARGS:-} ;;
    models) bench_step models "${MODELS_TIMEOUT:-540}" python3 bench/models.py --rounds "$ROUNDS" \
              ${MODELS_CASES:+--cases "$MODELS_CASES"} ${MODELS_ARGS:-} ;;
    threads) bench_step threads "${THREADS_TIMEOUT:-540}" python3 bench/threads.py --threads "${THREADS:-4,8,16}" \
               --rounds "$ROUNDS" ${THREADS_ARGS:-} ;;
    pyspy) step_pyspy ;;
    probe) timeout "${PROBE_TIMEOUT:-120}" python3 "tests/gpu/${PROBE:-probe_latency_toggle.py}" > "$OUT/probe.json" 2>&1
           echo "probe rc=$?"; cat "$OUT/probe.json" ;;
    longrun) bench_step longrun "${LONGRUN_TIMEOUT:-540}" python3 bench/longrun.py ${LONGRUN_ARGS:-} ;;
    attribution) bench_step attribution "${ATTRIBUTION_TIMEOUT:-420}" python3 bench/attribution.py \
               --rounds "${ROUNDS}" ${ATTRIBUTION_ARGS:-} ;;
    apicost) bench_step api_cost "${APICOST_TIMEOUT:-420}" python3 bench/api_cost.py --rounds "$ROUNDS" ${APICOST_ARGS:-} ;;
    *) echo "unknown step $step (tests upstream overhead models threads longrun pyspy attribution apicost probe)"; exit 2 ;;
  esac
done
