#!/usr/bin/env bash
# Issue 17 on two H200s (kind nvidia-h200-x2): the profile-guided overlap study, five settings, hard limit 270 s.
#   PYTHONPATH=/tmp/argus-site:$PWD scripts/gpu/two_gpu_study.sh OUT
# (run from the repository root after the carried wheels are installed into /tmp/argus-site).  Writes
# OUT/pgo/pgo.json (the study), OUT/pgo/pgo.md (its table, scripts/render_pgo.py), OUT/pgo/stores/*.duckdb
# (compacted argus evidence, one store per setting), OUT/pgo/plain/suite.json (plain steps/s), OUT/pgo/info/,
# OUT/pgo/logs/ and OUT/issue17.log.  NCCL's NVLink SHARP stays off (NCCL_NVLS_ENABLE=0).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:?usage: scripts/gpu/two_gpu_study.sh OUT}
mkdir -p "$OUT/pgo"
source scripts/gpu/env.sh  # $PY, the carried wheels, PYTHONPATH
export NCCL_NVLS_ENABLE=0 PYTHONUNBUFFERED=1
LIMIT=${ISSUE17_LIMIT:-270}
exec > >(tee -a "$OUT/issue17.log") 2>&1
echo "== issue17 $(date -u +%FT%TZ) python=$PY limit=${LIMIT}s"
nvidia-smi --query-gpu=index,name,driver_version,clocks.sm,temperature.gpu --format=csv,noheader || true
# the study enforces the limit itself (every launch is killed with its process group at limit - 10 s);
# timeout is the last guard, 15 s later
timeout -k 5 $((LIMIT + 15)) "$PY" scripts/pgo_study.py "$OUT/pgo" --limit "$LIMIT" "${@:2}"
status=$?
"$PY" scripts/render_pgo.py "$OUT/pgo/pgo.json" > "$OUT/pgo/pgo.md" 2>&1 && cat "$OUT/pgo/pgo.md"
du -sh "$OUT/pgo"/stores/* 2>/dev/null || true
find "$OUT" -type f -size +8M -printf 'over 8 MB: %p %s\n'
echo "== issue17 finished with status $status"
exit $status
