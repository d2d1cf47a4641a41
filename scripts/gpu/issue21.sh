#!/usr/bin/env bash
# Issue 21 on two H200s: timing-only against evidence-guided search of persistent GEMM and attention configurations,
# the same budget of measured candidates each.  HARD LIMIT: 200 s of wall time in total (the driver stops starting
# candidates at its deadline, kills its workers 6 s later, writes the table; `timeout` ends everything by 196 s).
#
#   scripts/gpu/issue21.sh OUT        (from the repository root; PYTHONPATH=/tmp/argus-site:$PWD with the wheels in)
#
# bench/optimize_bench.py: one worker process per GPU (CUDA_VISIBLE_DEVICES), each with a pool of CPU processes that
# compile the candidates for sm_90 ahead of the GPU into Triton's cache (/tmp/argus-issue21/triton), every candidate
# measured through argus_lab.optimize.Session (timing run of 10 launches after 2 warm-ups with CUPTI and the compiler
# backend, the first output checked against torch, one instrumented launch for the device phases) into one store
# per worker.  Writes OUT/issue21.log, OUT/optimize.{json,md} (the table), OUT/results/worker<i>.jsonl (one line per
# configuration, as it finishes) and worker<i>-candidates.jsonl (one line per candidate), OUT/logs/, the worker
# stores gzipped (OUT/stores/*.duckdb.gz), and the recorded evidence of one configuration for
# notebooks/optimize.ipynb in OUT/evidence/ (optimize_walk.duckdb.gz, its .runs/ folder, optimize_walk.json).
# CPU dry run: ISSUE21_DEVICE=cpu ISSUE21_TINY=1 scripts/gpu/issue21.sh /tmp/i21 (compiles, skips every measurement).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: scripts/gpu/issue21.sh OUT}
mkdir -p "$OUT"
T0=$(date +%s)
exec > >(tee -a "$OUT/issue21.log") 2>&1
PY=${ARGUS_PYTHON:-}
if [ -z "$PY" ]; then
  if [ -x /opt/torch/.venv/bin/python3 ]; then PY=/opt/torch/.venv/bin/python3; else PY=$(command -v python3); fi
fi
case ":${PYTHONPATH:-}:" in *":$PWD:"*) ;; *) export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" ;; esac
if [ -d /tmp/argus-site ]; then
  case ":$PYTHONPATH:" in *":/tmp/argus-site:"*) ;; *) export PYTHONPATH="/tmp/argus-site:$PYTHONPATH" ;; esac
fi
DEVICE=${ISSUE21_DEVICE:-cuda}
CACHE=${ARGUS_I21_CACHE:-/tmp/argus-issue21}
EXTRA=()
[ -n "${ISSUE21_TINY:-}" ] && EXTRA+=(--tiny --budget 3)
GPUS=$(timeout 10 nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
[ "${GPUS:-0}" -ge 1 ] || GPUS=1
[ "$GPUS" -gt 2 ] && GPUS=2
NPROC=$(nproc 2>/dev/null || echo 4)
PROCS=$(( (NPROC - GPUS) / GPUS ))
[ "$PROCS" -lt 1 ] && PROCS=1
[ "$PROCS" -gt 15 ] && PROCS=15
echo "== issue21 $(date -u +%FT%TZ) python=$PY device=$DEVICE gpus=$GPUS compile procs/gpu=$PROCS out=$OUT"
timeout 10 nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
  --format=csv 2>&1 | head -4 || true
# What is left of the 200 s: the driver's deadline ends 6 s (its kill grace) + 8 s (merge, gzip) before `timeout`.
LIMIT=$(( 196 - ($(date +%s) - T0) ))
BUDGET=$(( LIMIT - 14 ))
echo "== driver deadline ${BUDGET} s, hard limit ${LIMIT} s"
status=0
timeout -k 3 "$LIMIT" "$PY" bench/optimize_bench.py "$OUT" --device "$DEVICE" --gpus "$GPUS" --budget-s "$BUDGET" \
  --compile-procs "$PROCS" --cache "$CACHE" "${EXTRA[@]}" || status=$?
echo "== optimize_bench exit status $status after $(( $(date +%s) - T0 )) s"
# the driver gzips its stores (OUT/stores/*.duckdb.gz, OUT/evidence/optimize_walk.duckdb.gz); after a kill it did not
for f in "$OUT"/stores/*.duckdb "$OUT"/stores/*.duckdb.wal "$OUT"/evidence/*.duckdb "$OUT"/evidence/*.duckdb.wal; do
  [ -f "$f" ] && gzip -f "$f"
done
rm -f "$OUT"/stores/*.lock "$OUT"/evidence/*.lock
find "$OUT" -type f -size +7M -print -delete 2>/dev/null | sed 's/^/removed (over 7 MB): /'
echo "== files"
du -sh "$OUT"/* 2>/dev/null
echo "== issue21 done in $(( $(date +%s) - T0 )) s"
exit $status
