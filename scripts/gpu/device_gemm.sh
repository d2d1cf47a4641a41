#!/usr/bin/env bash
# Issue 18 on the H200: the persistent GEMM of examples/gpu/persistent_gemm.py measured through argus_lab with
# gpu.time (clean variant) and dev.* (instrumented variant) under one host region, into one DuckDB store.
#
#   PYTHONPATH=/tmp/argus-site:$PWD scripts/gpu/device_gemm.sh OUT        (from the repository root; wheels installed)
#   ARGUS_PYTHON=.venv/bin/python scripts/gpu/device_gemm.sh OUT --dry-run  (no GPU: the CPU parts, SYNTHETIC kernels)
#
# HARD LIMIT 60 s wall: the Python part has its own 50 s watchdog and runs under `timeout 56`; whatever was
# stored before a timeout stays in the store.  Writes OUT/issue18/: device_gemm_h200.duckdb (the recorded run,
# for tests/data/gpu/device/), report.txt, report.json, summary.json, issue18.log.  Prints a short summary.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: scripts/gpu/device_gemm.sh OUT}
DEST="$OUT/issue18"
mkdir -p "$DEST"
source scripts/gpu/env.sh  # $PY, the carried wheels, PYTHONPATH
export ARGUS_NATIVE_CACHE="${ARGUS_NATIVE_CACHE:-/tmp/argus-native-cache}"
timeout -k 2 56 "$PY" scripts/gpu/device_gemm_record.py "$DEST" "${@:2}" 2>&1 | tee "$DEST/issue18.log"
status=${PIPESTATUS[0]}
ls -la "$DEST"
echo "== issue18 finished with status $status"
exit "$status"
