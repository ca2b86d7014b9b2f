#!/bin/bash
# One device run: CPU tests, GPU tests (vs real Proton), then the overhead benchmark.
# Usage on the device machine, from the repository root:  bash tests/gpu/run_on_device.sh [ROUNDS]
# Everything it writes goes to $OUT (at most 8 files).
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
ROUNDS=${1:-3}
{
  date -Is; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c 'import sys, torch, triton, numpy; print(sys.version.split()[0], torch.__version__, triton.__version__, numpy.__version__)'
  grep -o '/[^ ]*libcupti[^ ]*' /proc/self/maps | sort -u
} > "$OUT/env.txt" 2>&1
timeout 45 python3 -m pytest tests -q -k cupti -p no:cacheprovider > "$OUT/cpu_tests.txt" 2>&1
echo "cpu tests rc=$?" >> "$OUT/cpu_tests.txt"
export PROTON_CTYPES_GPU_REPORT="$OUT/backend_report.jsonl" PROTON_CTYPES_GPU_OUT=/tmp/gpu_scenarios
mkdir -p /tmp/gpu_scenarios
timeout 150 python3 -m pytest tests/gpu -v -rs -p no:cacheprovider > "$OUT/gpu_tests.txt" 2>&1
echo "gpu tests rc=$?" >> "$OUT/gpu_tests.txt"
tar czf "$OUT/scenarios.tar.gz" -C /tmp gpu_scenarios 2>/dev/null
IMPLS=${IMPLS:-bare,proton,proton_ctypes,torch.profiler}
timeout 330 python3 bench/overhead.py --rounds "$ROUNDS" --reps 2 --impls "$IMPLS" --json "$OUT/overhead-h200.json" \
  > "$OUT/bench.txt" 2> "$OUT/bench.log"
echo "bench rc=$?" >> "$OUT/bench.log"
tail -n 40 "$OUT/gpu_tests.txt"; cat "$OUT/bench.txt"; tail -n 5 "$OUT/bench.log"
