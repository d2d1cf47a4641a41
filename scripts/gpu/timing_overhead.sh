#!/usr/bin/env bash
# Issue 13 on the H200: what the timing run costs against no tool and Proton, with the floor it cannot go under,
# and whether it stays correct.  HARD LIMIT: 150 s of wall time in total by default (ISSUE13_LIMIT_S or the second
# argument sets it): the benchmark stops starting processes at its budget and kills a process past its deadline;
# `timeout` ends everything 2 s before the limit at the latest.
#
#   scripts/gpu/timing_overhead.sh OUT [LIMIT_S]   (from the repository root; PYTHONPATH=/tmp/argus-site:$PWD with the wheels)
#
# 1. environment: nvidia-smi, the native extension built into OUT/native-cache;
# 2. correctness (one process, <= 30 s): gpu.time and gpu.span against CUDA events without a tool on regions of
#    >= 1 ms (within 2 %), then attribution of PyTorch, cuBLAS, Triton and Inductor kernels (every one exact, in its
#    region), both read from the store argus_lab.measure wrote;
# 3. overhead: the launch-bound loop and the Llama decode step, A B A B ... A blocks inside each tool's process,
#    2 processes each (ISSUE13_PROCS) for none / argus (the timing run as measure runs it: boundary probes,
#    region boundaries in C) / cupti-kernels (the floor: CUPTI's kernel records alone) / proton; then, while the
#    budget lasts, argus-clock (the same timing run with CUPTI's clock instead of probes), cupti-kernels+clock (the
#    floor + latency timestamps), nvtx and torch.profiler.  Other tools of bench/timing_overhead.py
#    (argus-probes, argus-launch-callbacks, argus-python-boundaries, argus-driver-callbacks, argus-markers,
#    cupti-kernels+callbacks, cupti-kernels+probes, ...) through ISSUE13_REQUIRED / ISSUE13_EXTRAS.  Each argus process ends with
#    one argus_lab.measure of the decode step between two no-tool blocks (host.wall against the step, the adjacent
#    no-tool blocks and a CPU probe).
# Writes OUT/issue13.log, OUT/timing-overhead.{txt,json} (rewritten after every process), OUT/checks.json,
# OUT/procs/*.json (one per process, rewritten after every block pair), OUT/logs/*.log, OUT/stores/*.duckdb.gz.
# CPU dry run: ISSUE13_DEVICE=cpu ISSUE13_TINY=1 scripts/gpu/timing_overhead.sh /tmp/i13 (GPU tools and checks skipped).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: scripts/gpu/timing_overhead.sh OUT [LIMIT_S]}
HARD=${2:-${ISSUE13_LIMIT_S:-150}}
mkdir -p "$OUT"
T0=$(date +%s)
exec > >(tee -a "$OUT/issue13.log") 2>&1
source scripts/gpu/env.sh  # $PY, the carried wheels, PYTHONPATH
export ARGUS_NATIVE_CACHE="$OUT/native-cache"
DEVICE=${ISSUE13_DEVICE:-cuda}
EXTRA=()
[ -n "${ISSUE13_TINY:-}" ] && EXTRA+=(--tiny)
echo "== issue13 $(date -u +%FT%TZ) python=$PY device=$DEVICE out=$OUT PYTHONPATH=$PYTHONPATH"
timeout 10 nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
  --format=csv 2>&1 | head -3 || true
status=0
# What is left of the hard limit: the benchmark's budget ends 14 s before `timeout` would stop it (a process is
# killed 10 s past its deadline, at the latest 5 s past the budget; the final table is written right after).
LIMIT=$(( HARD - 4 - ($(date +%s) - T0) ))
BUDGET=$(( LIMIT - 14 ))
CHECKS_S=$(( HARD >= 150 ? 30 : HARD / 5 ))
# ISSUE13_REQUIRED / ISSUE13_EXTRAS / ISSUE13_PROCS override the tools (required ones first, ISSUE13_PROCS processes
# each, then the extras while the budget lasts) and the processes per tool.
REQUIRED=${ISSUE13_REQUIRED:-none,argus,cupti-kernels,proton}
EXTRAS=${ISSUE13_EXTRAS:-argus-clock,cupti-kernels+clock,nvtx,torch.profiler}
PROCS=${ISSUE13_PROCS:-2}
echo "== hard limit ${HARD} s: benchmark budget ${BUDGET} s, timeout ${LIMIT} s, checks ${CHECKS_S} s"
timeout -k 2 "$LIMIT" "$PY" bench/timing_overhead.py "$OUT" --device "$DEVICE" "${EXTRA[@]}" \
  --budget-s "$BUDGET" --checks events,attribution --checks-s "$CHECKS_S" --procs "$PROCS" --pairs 6 --reps 5 --warm 2 \
  --child-s 12 --tools "$REQUIRED,$EXTRAS" --required "$REQUIRED" || status=$?
echo "== timing_overhead exit status $status after $(( $(date +%s) - T0 )) s"
if [ -f "$OUT/timing-overhead.txt" ]; then
  echo "== summary"
  cat "$OUT/timing-overhead.txt"
fi
find "$OUT" -type f -size +7M -print -delete 2>/dev/null | sed 's/^/removed (over 7 MB): /'
echo "== issue13 done in $(( $(date +%s) - T0 )) s"
exit $status
