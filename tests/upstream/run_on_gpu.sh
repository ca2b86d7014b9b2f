#!/usr/bin/env bash
# Run Proton's upstream tests (test_api/test_profile/test_cmd/test_viewer) on a GPU machine
# against proton_ctypes and against the real triton.profiler, and compare.
#
#   bash tests/upstream/run_on_gpu.sh OUTDIR [run.py options, e.g. --files test_api.py]
#
# Needs the upstream test folder at .upstream/third_party/proton/test (git-ignored: carry it,
# e.g. carry=[".upstream/third_party"]).  The viewer's frame API (test_viewer.py, and
# viewer.get_raw_metrics in test_profile.py) needs pandas<3 + llnl-hatchet: when this
# Python lacks them, they are installed offline into .upstream/pydeps from the wheels in
# PROTON_UPSTREAM_WHEELS (default .upstream/wheels-cpXY for this Python; make it on the CPU
# machine with `run.py --download-wheels .upstream/wheels-cp312 --for-python 3.12`, ~38 MB,
# and carry it too).
# Writes OUTDIR/{ours,real}.xml (junit), {ours,real}.json (summaries), results-{ours,real}.json
# (the run's record: tests/upstream/results/h200.json is results-ours.json), {ours,real}.txt
# (pytest output + summary), compare.txt.  Per-run limit: PROTON_UPSTREAM_RUN_TIMEOUT s (270);
# PROTON_UPSTREAM_IMPLS picks the runs (default "ours real").
set -u
out=${1:?usage: run_on_gpu.sh OUTDIR [run.py options]}
shift
cd "$(dirname "$0")/../.."
mkdir -p "$out"
py=${PYTHON:-python}
limit=${PROTON_UPSTREAM_RUN_TIMEOUT:-270}

pyver=$("$py" -c 'import sys; print("%d%d" % sys.version_info[:2])')
wheels=${PROTON_UPSTREAM_WHEELS:-.upstream/wheels-cp$pyver}
if ! "$py" -c "import pandas, hatchet" 2>/dev/null && [ ! -d .upstream/pydeps ] && [ -d "$wheels" ]; then
  "$py" tests/upstream/run.py --setup-deps --wheels "$wheels" > "$out/setup-deps.txt" 2>&1 \
    || echo "setup-deps failed: see $out/setup-deps.txt"
fi

"$py" -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'triton', triton.__version__)" \
  > "$out/env.txt" 2>&1
nvidia-smi -L >> "$out/env.txt" 2>&1 || true

for impl in ${PROTON_UPSTREAM_IMPLS:-ours real}; do
  "$py" tests/upstream/run.py --impl "$impl" --timeout "$limit" \
    --junit "$out/$impl.xml" --summary "$out/$impl.json" --results "$out/results-$impl.json" "$@" > "$out/$impl.txt" 2>&1
  echo "$impl: pytest exit $?"
  sed -n '/^\[\(ours\|real\)/,$p' "$out/$impl.txt" | head -3
done
if [ -f "$out/real.json" ] && [ -f "$out/ours.json" ]; then
  "$py" tests/upstream/run.py --compare "$out/real.json" "$out/ours.json" > "$out/compare.txt" 2>&1
  sed -n '/^real passes/,/^both fail/p' "$out/compare.txt"
fi
