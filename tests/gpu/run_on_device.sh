#!/bin/bash
# One device run: GPU tests (vs real Proton), the hook diagnostic, then the overhead benchmark.
# Usage on the device machine, from the repository root:
#   bash tests/gpu/run_on_device.sh [ROUNDS]
# env: GPU_TESTS, GPU_TESTS_TIMEOUT, SKIP_PROFILE, IMPLS, REPS, BENCH_ARGS, BENCH_TIMEOUT,
#      DIAG_IMPLS, DIAG_CASES, DIAG_ROUNDS, DIAG_TIMEOUT
# Everything it writes goes to $OUT (at most 8 files).
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
ROUNDS=${1:-3}
{
  date -Is; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c 'import sys, torch, triton, numpy; print(sys.version.split()[0], torch.__version__, triton.__version__, numpy.__version__)'
} > "$OUT/env.txt" 2>&1
export PROTON_CTYPES_GPU_REPORT="$OUT/backend_report.jsonl" PROTON_CTYPES_GPU_OUT=/tmp/gpu_scenarios
mkdir -p /tmp/gpu_scenarios
timeout ${GPU_TESTS_TIMEOUT:-220} python3 -m pytest ${GPU_TESTS:-tests/gpu} -v -rs -p no:cacheprovider > "$OUT/gpu_tests.txt" 2>&1
echo "gpu tests rc=$?" >> "$OUT/gpu_tests.txt"
if [ -z "${SKIP_PROFILE:-}" ]; then
  timeout 80 python3 tests/gpu/profile_hook.py > "$OUT/profile_hook.txt" 2>&1
  echo "profile_hook rc=$?" >> "$OUT/profile_hook.txt"
fi
IMPLS=${IMPLS:-bare,proton,proton_ctypes,torch.profiler}
timeout ${BENCH_TIMEOUT:-300} python3 bench/overhead.py --rounds "$ROUNDS" --reps ${REPS:-2} --impls "$IMPLS" ${BENCH_ARGS:-} \
  --json "$OUT/overhead-h200.json" > "$OUT/bench.txt" 2> "$OUT/bench.log"
echo "bench rc=$?" >> "$OUT/bench.log"
if [ -n "${DIAG_IMPLS:-}" ]; then
  timeout ${DIAG_TIMEOUT:-120} python3 bench/overhead.py --rounds "${DIAG_ROUNDS:-$ROUNDS}" --reps ${REPS:-2} \
    --impls "$DIAG_IMPLS" ${BENCH_ARGS:-} --cases "${DIAG_CASES:-one scope}" --json "$OUT/overhead-diag-h200.json" >> "$OUT/bench.txt" 2>> "$OUT/bench.log"
  echo "diag rc=$?" >> "$OUT/bench.log"
fi
tail -n 30 "$OUT/gpu_tests.txt"; head -n 12 "$OUT/profile_hook.txt" 2>/dev/null; cat "$OUT/bench.txt"; tail -n 5 "$OUT/bench.log"
