#!/usr/bin/env bash
# The TinyLlama decode megakernel on the H200: correctness against transformers, ms/token against PyTorch, the
# device regions of a step. Run from the repository root on the GPU machine:
#
#   OUT=/tmp/out scripts/gpu/decode_check.sh                     # default stages, hard limit DECODE_LIMIT_S (220 s)
#   DECODE_STAGES=setup,check,mk_time DECODE_LIMIT_S=120 OUT=/tmp/out scripts/gpu/decode_check.sh
#   DECODE_TESTS=1 ...                                           # also the @pytest.mark.gpu decode test first
#   DECODE_STAGES=warm,setup,check,optimize DECODE_OPT_BUDGET=6 ... # argus_lab.optimize: both searches, one budget
#
# Installs the carried wheels (.whl/*.whl: cupti-python, duckdb, nvtx ... for the `measure` stage) into
# /tmp/argus-site like scripts/gpu-check. Writes OUT/decode/decode_bench.json after every stage (so a timeout keeps
# what was done), OUT/decode/decode_check.log, and with the measure stage the stores decode_megakernel_{v1,best}_h200.duckdb.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/argus-decode}
DEST="$OUT/decode"
mkdir -p "$DEST"
source scripts/gpu/env.sh  # $PY, the carried wheels, PYTHONPATH
exec > >(tee -a "$DEST/decode_check.log") 2>&1
echo "== decode_check $(date -u +%FT%TZ) python=$PY"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv || true
export TRITON_CACHE_DIR=${TRITON_CACHE_DIR:-/tmp/triton-cache-decode}
LIMIT=${DECODE_LIMIT_S:-220}
STAGES=${DECODE_STAGES:-warm,setup,check,mk_time,probe,floor,sweep,baselines,measure,hf}
status=0
if [ "${DECODE_TESTS:-0}" = 1 ]; then
  timeout -k 5 120 "$PY" -m pytest -q -m gpu -p no:cacheprovider tests/gpu/test_decode_megakernel_gpu.py || status=1
fi
timeout -k 5 "$LIMIT" "$PY" bench/decode_bench.py "$DEST" --stages "$STAGES" \
  --steps "${DECODE_STEPS:-48}" --repeats "${DECODE_REPEATS:-5}" --sweep-budget "${DECODE_SWEEP_S:-45}" \
  --compile-cap "${DECODE_COMPILE_CAP_S:-150}" --opt-budget "${DECODE_OPT_BUDGET:-6}" \
  --compile-workers "${DECODE_COMPILE_WORKERS:-12}" --limit "$LIMIT" || status=$?
ls -la "$DEST"
# everything in one file (the device tool brings back a few files only): stores gzipped inside
tar czf "$OUT/decode_evidence.tgz" -C "$DEST" --exclude='*.lock' --exclude='*.wal' . && ls -la "$OUT/decode_evidence.tgz"
echo "== decode_check finished with status $status"
exit "$status"
