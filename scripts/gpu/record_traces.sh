#!/usr/bin/env bash
# Issue 19: record a Kineto trace, an .ncu-rep and an Nsight Systems export on the H200 (tests/data/traces/).
#   scripts/gpu/record_traces.sh OUT
# Run from the repository root after the wheels are in /tmp/argus-site; HARD LIMIT 90 s wall for everything.
# Every file left in OUT is < 8 MB; no .qdstrm is left; OUT/summary.json says what each step did (nsys errors
# with the tool's own text).  Copy OUT/{kineto_gpt2.json.gz,ncu_regions.ncu-rep,nsys_regions.sqlite*,
# nsys_regions.nsys-rep,summary.json,*.log} to tests/data/traces/.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-${OUT:-/tmp/argus-issue19}}
mkdir -p "$OUT"
source scripts/gpu/env.sh  # $PY, the carried wheels, PYTHONPATH
T0=$(date +%s)
# 75 s for the recordings (their own timeouts), killed at 82 s whatever happens, 8 s left for the cleanup below
timeout -k 2 80 "$PY" scripts/record_traces.py "$OUT" --budget 72 > "$OUT/record.log" 2>&1
rc=$?
[ $rc -eq 124 ] || [ $rc -eq 137 ] && echo "record_traces.py was killed at the time limit (exit $rc)"
# nothing of a killed run may stay behind: raw nsys streams, files of 8 MB or more
find "$OUT" -maxdepth 1 -name '*.qdstrm' -print -delete
find "$OUT" -maxdepth 1 -type f -size +8191k -print -delete
echo "== issue19 done in $(( $(date +%s) - T0 )) s (record_traces.py exit $rc); files:"
ls -l "$OUT"
if [ -f "$OUT/summary.json" ]; then
  "$PY" - "$OUT/summary.json" <<'PYEOF'
import json, sys
s = json.load(open(sys.argv[1]))
for step in ("kineto", "ncu", "nsys"):
    v = s.get(step, "not run")
    if isinstance(v, dict):
        v = {k: (x if not isinstance(x, str) else x[-600:]) for k, x in v.items() if k not in ("cmd", "importer_looked_in")}
    print(f"{step}: {json.dumps(v, default=str)[:1500]}")
print("unfinished:", s.get("unfinished"), "dropped:", s.get("dropped"))
PYEOF
else
  echo "no summary.json; last lines of record.log:"; tail -n 20 "$OUT/record.log"
fi
exit 0
