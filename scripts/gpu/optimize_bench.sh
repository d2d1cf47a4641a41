#!/usr/bin/env bash
# Issue 21 on the H200 (one GPU or two): timing-only against evidence-guided search of persistent GEMM and attention
# configurations, the same budget of measured candidates each.  HARD LIMIT: --limit seconds of wall time in total
# (default 200; the driver stops starting candidates 4 s before its deadline, kills its workers 6 s after it, writes
# the table; `timeout` ends it 9 s after its deadline, and the merge and file checks below take at most 9 s more).
#
#   scripts/gpu/optimize_bench.sh OUT                                  # all 24 configurations, budget 8 (fewer if late)
#   scripts/gpu/optimize_bench.sh OUT --only 10-24 --budget 4 --limit 240   # the continuation of the first run
#
# (from the repository root; PYTHONPATH=/tmp/argus-site:$PWD with the carried wheels installed there.)
# Options (or variables): --only SPEC (ISSUE21_ONLY; configurations by number, bench/optimize_configs.py),
# --budget N (ISSUE21_BUDGET; measured candidates per search, never fewer than 4), --limit S (ISSUE21_LIMIT),
# --walk N (ISSUE21_WALK; the configuration recorded for notebooks/optimize.ipynb; default with --only: 13, else 1).
#
# bench/optimize_bench.py: one worker process per GPU (CUDA_VISIBLE_DEVICES), each with a pool of CPU processes that
# compile the candidates for sm_90 ahead of the GPU into Triton's cache (/tmp/argus-issue21/triton), every candidate
# measured through argus_lab.optimize.Session (timing run of 10 launches after 2 warm-ups with CUPTI and the compiler
# backend, the first output checked against torch, one instrumented launch for the device phases).  With --only the
# walk configuration runs first and GEMM and attention alternate after it, so a budget that ends early leaves both
# kinds measured.  Writes OUT/issue21.log, OUT/optimize.{json,md} (the table: finished configurations counted,
# the others listed as stopped or not started), OUT/results/worker<i>.jsonl (one line per configuration, as it
# finishes) and worker<i>-candidates.jsonl (one line per candidate), OUT/logs/, and the recorded evidence of the
# walk configuration in OUT/evidence/ (optimize_walk.json, optimize_walk.duckdb.gz packed by
# bench/optimize_evidence.py to its own runs, compacted, raw device intervals trimmed to < 5 MB, optimize_walk.pack.json
# saying what was kept, the .runs/ folder).  The worker stores stay outside OUT (the result files are the
# benchmark's evidence).  With --only and the first run's results in tests/data/gpu/optimize/run1, OUT/merged/ gets
# the table of both runs (bench/optimize_bench.py OUT/merged --merge tests/data/gpu/optimize/run1 OUT).
# CPU dry run: ISSUE21_DEVICE=cpu ISSUE21_TINY=1 scripts/gpu/optimize_bench.sh /tmp/i21 (compiles, skips every measurement).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: scripts/gpu/optimize_bench.sh OUT [--only 10-24] [--budget 4] [--limit 240] [--walk 13]}
shift
ONLY=${ISSUE21_ONLY:-}
BUDGET_N=${ISSUE21_BUDGET:-}
TOTAL=${ISSUE21_LIMIT:-200}
WALK=${ISSUE21_WALK:-}
while [ $# -gt 0 ]; do
  case "$1" in
    --only) ONLY=${2:?--only needs configuration numbers, e.g. --only 10-24}; shift 2 ;;
    --budget) BUDGET_N=${2:?--budget needs a number, e.g. --budget 4}; shift 2 ;;
    --limit) TOTAL=${2:?--limit needs seconds, e.g. --limit 240}; shift 2 ;;
    --walk) WALK=${2:?--walk needs a configuration number, e.g. --walk 13}; shift 2 ;;
    *) echo "optimize_bench.sh: unknown option $1 (known: --only SPEC, --budget N, --limit S, --walk N)" >&2; exit 2 ;;
  esac
done
mkdir -p "$OUT"
T0=$(date +%s)
exec > >(tee -a "$OUT/issue21.log") 2>&1
source scripts/gpu/env.sh  # $PY, the carried wheels, PYTHONPATH
DEVICE=${ISSUE21_DEVICE:-cuda}
CACHE=${ARGUS_I21_CACHE:-/tmp/argus-issue21}
EXTRA=()
if [ -n "${ISSUE21_TINY:-}" ]; then
  EXTRA+=(--tiny --budget "${BUDGET_N:-3}")
elif [ -n "$BUDGET_N" ]; then
  EXTRA+=(--budget "$BUDGET_N")
fi
if [ -n "$ONLY" ] && [ -z "${ISSUE21_TINY:-}" ]; then
  EXTRA+=(--only "$ONLY" --walk "${WALK:-13}")
elif [ -n "$WALK" ]; then
  EXTRA+=(--walk "$WALK")
fi
GPUS=$(timeout 10 nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
[ "${GPUS:-0}" -ge 1 ] || GPUS=1
[ "$GPUS" -gt 2 ] && GPUS=2
NPROC=$(nproc 2>/dev/null || echo 4)
PROCS=$(( (NPROC - GPUS) / GPUS ))
[ "$PROCS" -lt 1 ] && PROCS=1
[ "$PROCS" -gt 15 ] && PROCS=15
echo "== issue21 $(date -u +%FT%TZ) python=$PY device=$DEVICE gpus=$GPUS compile procs/gpu=$PROCS limit=${TOTAL}s out=$OUT ${EXTRA[*]}"
timeout 10 nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
  --format=csv 2>&1 | head -4 || true
# What is left of the limit: 9 s for the merge and the file checks (4 + 2 x 2 + find, at most); the driver's
# deadline ends 6 s (its kill grace) + 3 s (the table) before `timeout` ends it.
LIMIT=$(( TOTAL - 9 - ($(date +%s) - T0) ))
BUDGET=$(( LIMIT - 9 ))
echo "== driver deadline ${BUDGET} s, hard limit ${LIMIT} s"
status=0
timeout -k 3 "$LIMIT" "$PY" bench/optimize_bench.py "$OUT" --device "$DEVICE" --gpus "$GPUS" --budget-s "$BUDGET" \
  --compile-procs "$PROCS" --cache "$CACHE" --worker-store "$CACHE/stores" "${EXTRA[@]}" || status=$?
echo "== optimize_bench exit status $status after $(( $(date +%s) - T0 )) s"
if [ -n "$ONLY" ] && [ -d tests/data/gpu/optimize/run1/results ]; then
  echo "== merged with the first run (tests/data/gpu/optimize/run1): $OUT/merged/optimize.md"
  timeout -k 1 4 "$PY" bench/optimize_bench.py "$OUT/merged" --merge tests/data/gpu/optimize/run1 "$OUT" | tail -8
fi
# a walk store left raw by a kill: gzipped (and removed below if still over 7 MB); lock files go
for f in "$OUT"/evidence/*.duckdb "$OUT"/evidence/*.duckdb.wal; do
  [ -f "$f" ] && timeout 2 gzip -f -1 "$f"
done
rm -f "$OUT"/evidence/*.lock "$OUT"/stores/*.lock
find "$OUT" -type f -size +7M -print -delete 2>/dev/null | sed 's/^/removed (over 7 MB): /'
echo "== files"
du -sh "$OUT"/* 2>/dev/null
ls -l "$OUT"/evidence 2>/dev/null
echo "== issue21 done in $(( $(date +%s) - T0 )) s"
exit $status
