#!/usr/bin/env bash
# Issue 15 on the H200, in ONE device call, HARD LIMIT 90 s wall (the script stops itself by 87 s; the first
# recording took 66 s):
#   scripts/gpu/ncu_scope_compiler.sh OUT
# run from the repository root with the carried wheels installed (PYTHONPATH=/tmp/argus-site:$PWD; python
# /opt/torch/.venv/bin/python3 unless ARGUS_PYTHON says otherwise).  It records, through `argus-lab run`
# (python -m argus_lab.faces.cli), three workloads of examples/gpu/ into small DuckDB stores under OUT:
#   autotune.duckdb  examples/gpu/autotuned_matmul.py, step (@triton.autotune, 4 configs), two requests:
#                    1. gpu.time, gpu.kernels, compile.* with no scope (instance 0 autotunes: heterogeneity);
#                    2. the same + 3 ncu counters with --scope 'matmul; instances=1:' (ncu must replay instances
#                       1-3 only, each matched to the timing run, and nothing else)
#   compiled.duckdb  compiled_mlp:step (torch.compile'd MLP): gpu.time, gpu.kernels, compile.*
#                    (Triton facts and SASS mix of Inductor's kernels, each launch linked to its binary)
#   model.duckdb     model_before_region:step (model built at import, before any region): gpu.time
#                    + 3 ncu counters with no scope (ncu must replay only kernels inside `decode` instances)
# plus OUT/profiler_names.json (torch.profiler's kernel names of the same decode step), OUT/ncu_env.log (whether an
# environment variable set to an empty value reaches a process ncu starts), one log per step, the ncu children's
# OUT/*.duckdb.runs/<run>/nvtx-scope.json (what their scope gate saw), and
# OUT/issue15-summary.json + the printed summary (scripts/gpu/ncu_scope_compiler_summary.py).  Every file is kept < 8 MB
# (a larger one is gzipped; .ncu-rep files of cuBLAS kernels are removed).  The compile case runs alongside the
# first (timing-only) step; the ncu steps run alone.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: scripts/gpu/ncu_scope_compiler.sh OUT}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)  # absolute: the workloads run from examples/gpu
T0=$(date +%s)
exec > >(tee -a "$OUT/issue15.log") 2>&1
source scripts/gpu/env.sh  # $PY, the carried wheels, PYTHONPATH
export TRITON_PRINT_AUTOTUNING=1 PYTHONUNBUFFERED=1
DEADLINE=$((T0 + 80))    # the summary and the size checks need the last seconds
left() { echo $((DEADLINE - $(date +%s))); }
# the workloads are modules of examples/gpu run as `module:function` (one instance per repetition, built at import),
# from that folder so that their names cannot be shadowed by another package called `examples`
CLI=(env -C examples/gpu "$PY" -m argus_lab.faces.cli run)

step() {  # step NAME BUDGET_S CMD...: run with a timeout that never passes the deadline; log to OUT/NAME.log
  local name=$1 budget=$2 l
  shift 2
  l=$(left)
  [ "$budget" -gt "$l" ] && budget=$l
  if [ "$budget" -lt 5 ]; then echo "[$name] skipped: $l s left"; return 124; fi
  local t=$(date +%s)
  timeout -k 2 "$budget" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  echo "[$name] exit $rc after $(($(date +%s) - t)) s (budget $budget s)"
  return $rc
}

echo "== issue15 $(date -u +%FT%TZ) python=$PY"
"$PY" -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" 2>&1 | tail -1

# compile case and torch.profiler names in the background (no ncu while they run)
step compiled 55 "${CLI[@]}" compiled_mlp:step --store "$OUT/compiled.duckdb" --repeat 3 --warmup 0 \
  --signals gpu.time,gpu.kernels,compile.registers,compile.spills,compile.shared,compile.num_warps,compile.num_stages,compile.sass_instructions &
BG_COMPILED=$!
step profiler 25 "$PY" examples/gpu/model_before_region.py --profiler "$OUT/profiler_names.json" &
BG_PROFILER=$!

step autotune_timing 25 "${CLI[@]}" autotuned_matmul:step --store "$OUT/autotune.duckdb" --repeat 4 \
  --warmup 0 --signals gpu.time,gpu.kernels,compile.registers,compile.spills,compile.sass_instructions

# does an environment variable set to an empty value reach a process ncu starts? (the first recording's model case
# had ARGUS_NVTX_SCOPE= and profiled nothing; a process without CUDA: ncu profiles nothing and touches no GPU)
NCU=${ARGUS_NCU:-/usr/local/cuda/bin/ncu}
if [ -x "$NCU" ]; then
  step ncu_env 10 env ARGUS_PROBE_EMPTY= ARGUS_PROBE_SET=1 "$NCU" --target-processes all "$PY" -c \
    "import os; print('ncu_env: empty', repr(os.environ.get('ARGUS_PROBE_EMPTY')), 'set', repr(os.environ.get('ARGUS_PROBE_SET')))"
  grep -h '^ncu_env:' "$OUT/ncu_env.log"
fi

# the ncu steps run alone on the GPU: wait for the background steps (at most until 45 s have passed)
while kill -0 "$BG_COMPILED" 2>/dev/null || kill -0 "$BG_PROFILER" 2>/dev/null; do
  [ $(($(date +%s) - T0)) -ge 45 ] && { echo "background steps still running at 45 s: going on"; break; }
  sleep 1
done

NCU_SIG=hw:dram__bytes_read.sum,hw:smsp__inst_executed.sum,hw:launch__grid_size
# the model case first: its ncu run is the one the first recording lost (the autotune case's is in tests/data)
step model_ncu 25 "${CLI[@]}" model_before_region:step --store "$OUT/model.duckdb" --repeat 2 \
  --warmup 1 --signals "gpu.time,gpu.kernels,$NCU_SIG"
step autotune_ncu 25 "${CLI[@]}" autotuned_matmul:step --store "$OUT/autotune.duckdb" --repeat 4 \
  --warmup 0 --scope 'matmul; instances=1:' --signals "gpu.time,gpu.kernels,compile.registers,compile.sass_instructions,$NCU_SIG"
wait "$BG_COMPILED" 2>/dev/null
wait "$BG_PROFILER" 2>/dev/null

DEADLINE=$((T0 + 86))
step summary 7 "$PY" scripts/gpu/ncu_scope_compiler_summary.py "$OUT"
cat "$OUT/summary.log" 2>/dev/null

# keep every file < 8 MB: cuBLAS .ncu-rep files go, anything else that large is gzipped
find "$OUT" -name '*.ncu-rep' -size +7M -print -delete 2>/dev/null
find "$OUT" -type f -size +7M ! -name '*.gz' -print -exec gzip -f {} \; 2>/dev/null
echo "== issue15 done in $(($(date +%s) - T0)) s; files:"
find "$OUT" -maxdepth 1 -type f -printf '%s\t%p\n' | sort -k2
