#!/usr/bin/env bash
# Phase-A probe of the low-perturbation timing run on the H200 (issue 13), about 4 minutes:
#   bash scripts/gpu_probe_timing.sh OUT
# 1. installs the carried wheels (.whl/: cupti-python, nvtx, duckdb) into /tmp/argus-site, as scripts/gpu-check does;
# 2. checks the C compiler and Python headers, and builds the native launch extension into OUT/native-cache;
# 3. runs bench/timing_overhead.py --short: the correctness checks (attribution classes of PyTorch, cuBLAS, Triton
#    and Inductor kernels; gpu.time vs CUDA events) and one round of the overhead benchmark (loop, decode step).
# Writes OUT/probe.log, OUT/timing-overhead.{json,txt}, OUT/logs/*; prints a summary.  Every step has a timeout.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-${OUT:-/tmp/argus-probe-timing}}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/probe.log") 2>&1
PY=${ARGUS_PYTHON:-}
if [ -z "$PY" ]; then
  if [ -x /opt/torch/.venv/bin/python3 ]; then PY=/opt/torch/.venv/bin/python3; else PY=$(command -v python3); fi
fi
SITE=/tmp/argus-site
echo "== gpu_probe_timing $(date -u +%FT%TZ) python=$PY out=$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv || true
if ls .whl/*.whl >/dev/null 2>&1; then
  timeout 120 "$PY" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" .whl/*.whl \
    || echo "wheel install failed"
fi
export PYTHONPATH="$SITE:$PWD${PYTHONPATH:+:$PYTHONPATH}"
export ARGUS_NATIVE_CACHE="$OUT/native-cache"
echo "== compiler and headers"
(command -v cc || command -v gcc) && (cc --version 2>/dev/null || gcc --version) | head -1
timeout 60 "$PY" - <<'EOF'
import sys, sysconfig, time
from pathlib import Path
inc = sysconfig.get_paths()["include"]
print("Python.h:", (Path(inc) / "Python.h").exists(), inc)
t0 = time.perf_counter()
from argus_lab.backends.cupti import native
b = native.build()
print("native build:", b.note, f"({time.perf_counter() - t0:.2f} s)")
if b.module is None:
    sys.exit(1)
from cupti import cupti
r, d = native.callback_ids(cupti)
print("launch callback ids: runtime", r, "driver", d)
EOF
echo "== build status $?"
status=0
timeout 235 "$PY" bench/timing_overhead.py "$OUT" --short || status=$?
echo "== timing_overhead exit status $status"
if [ -f "$OUT/timing-overhead.txt" ]; then
  echo "== summary"
  cat "$OUT/timing-overhead.txt"
fi
ls -la "$OUT"
exit $status
