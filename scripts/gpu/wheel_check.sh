#!/usr/bin/env bash
# Issue 20 on the H200, as a user gets argus_lab: run once from the repository root, within 100 s wall:
#   scripts/gpu/wheel_check.sh OUT
# Needs (carried): dist/argus_lab-*.whl (built on the CPU machine with the JupyterLab extension inside) and the
# wheels the H200 image lacks in .whl/ (duckdb, nvtx, cupti-python 13.0.1); optionally .whl/pm/ (cupti-python 13.4.0
# + nvidia-cuda-cupti 13.4.92) for the version-mismatch step.  Steps:
#   1. a fresh venv that sees torch's environment (/opt/torch/.venv, through a .pth file), the wheel installed with
#      `pip install --no-index --find-links .whl dist/argus_lab-*.whl` (pip resolves the dependencies);
#   2. from /tmp (no repository on the path): `argus-lab doctor`;
#   3. live pass counts (CUPTI profiler host API) against ncu's profiler__replayer_passes for 4 metric sets, in the
#      background while 4. runs;
#   4. `argus-lab run` end to end on a small torch workload: timing, 2 counters, compiler facts, clocks;
#   5. if time is left and .whl/pm is there: cupti-python 13.4 + nvidia-cuda-cupti 13.4.92 installed over it (what
#      pip picks with an index), and the doctor's CUPTI lines naming the mismatch with torch's pin.
# Writes 4 files: OUT/issue20.log (everything printed: pip's resolution, the doctor, the plan and report of the run,
# the pass table, the mismatch lines), OUT/doctor.txt, OUT/results.json ({doctor, passes, e2e, mismatch_doctor})
# and OUT/e2e.duckdb.gz (the end-to-end store).  Environment overrides (for the CPU dry run):
# ARGUS_TORCH_PYTHON, ARGUS_WHEELS, ARGUS_U20_WORK, ARGUS_U20_BUDGET (seconds, default 95).
set -uo pipefail
OUT=${1:?usage: scripts/gpu/wheel_check.sh OUT}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
REPO=$(cd "$(dirname "$0")/../.." && pwd)
TORCH_PY=${ARGUS_TORCH_PYTHON:-/opt/torch/.venv/bin/python3}
WHEELS=${ARGUS_WHEELS:-$REPO/.whl}
WORK=${ARGUS_U20_WORK:-/tmp/argus-u20}
BUDGET=${ARGUS_U20_BUDGET:-95}
T0=$(date +%s)
# as a user: nothing of the repository or of a side folder on the path (gpu-check's PYTHONPATH would hide what pip
# has to install), no user site
unset PYTHONPATH
export PYTHONNOUSERSITE=1
exec > >(tee "$OUT/issue20.log") 2>&1
el() { echo $(( $(date +%s) - T0 )); }
left() { echo $(( BUDGET - $(el) )); }
step() { echo; echo "== [$(el) s] $*"; }
cap() { local want=$1 l; l=$(left); [ "$l" -lt "$want" ] && want=$l; [ "$want" -lt 1 ] && want=1; echo "$want"; }
status=0

step "issue 20: wheel as a user installs it; torch python $TORCH_PY; wheels $WHEELS"
WHL=$(ls "$REPO"/dist/argus_lab-*.whl 2>/dev/null | head -1)
[ -n "$WHL" ] || { echo "no dist/argus_lab-*.whl: build it on the CPU machine (see docs/gpu-backends.md)"; exit 2; }
ls -la "$WHL" "$WHEELS"/*.whl 2>/dev/null
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw --format=csv,noheader 2>/dev/null || true

step "1. fresh venv seeing torch's site-packages; pip install --no-index --find-links $WHEELS $(basename "$WHL")"
rm -rf "$WORK" && mkdir -p "$WORK/x"
VENV="$WORK/venv"
# no ensurepip (seconds): torch's pip installs into the venv with --python (pip >= 22.3), which runs it under the
# venv's interpreter, so it resolves against what that interpreter sees
timeout "$(cap 20)" "$TORCH_PY" -m venv --system-site-packages --without-pip "$VENV" || { echo "venv failed"; exit 2; }
VPY="$VENV/bin/python"
TORCH_SITE=$("$TORCH_PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
VSITE=$("$VPY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "import site; site.addsitedir('$TORCH_SITE')" > "$VSITE/_argus_torch_env.pth"  # its own .pth files too
echo "venv $VENV sees $TORCH_SITE"
if "$TORCH_PY" -m pip --python "$VPY" --version >/dev/null 2>&1; then
  PIP=("$TORCH_PY" -m pip --python "$VPY")
else  # an older pip: give the venv its own
  timeout "$(cap 30)" "$VPY" -m ensurepip -q >/dev/null 2>&1 || { echo "ensurepip failed"; exit 2; }
  PIP=("$VPY" -m pip)
fi
echo "pip: ${PIP[*]} ($("${PIP[@]}" --version 2>/dev/null))"
timeout "$(cap 60)" "${PIP[@]}" install --no-index --no-cache-dir --disable-pip-version-check --find-links "$WHEELS" "$WHL" \
  2>&1 | grep -v "^Requirement already satisfied" || true
if ! "$VPY" -c "import argus_lab" 2>/dev/null; then echo "the wheel did not install (pip's output above)"; exit 1; fi
"$VPY" - <<'EOF'
import importlib.metadata as md
for d in ("argus_lab", "torch", "triton", "cupti-python", "nvidia-cuda-cupti", "cuda-bindings", "duckdb", "nvtx",
          "nvidia-ml-py", "pyarrow", "numpy", "ncu-report", "polars", "jupyterlab"):
    try:
        dist = md.distribution(d)
        print(f"  {d:<18} {dist.version:<14} {dist.locate_file('')}")
    except md.PackageNotFoundError:
        print(f"  {d:<18} (not installed)")
EOF
ARGUS="$VENV/bin/argus-lab"
export XDG_CACHE_HOME="$WORK/cache" PYTHONUNBUFFERED=1

step "2. argus-lab doctor (from $WORK/x)"
cd "$WORK/x"
timeout "$(cap 40)" "$ARGUS" doctor --save "$WORK/doctor.json" | tee "$OUT/doctor.txt"
echo "(doctor exit status ${PIPESTATUS[0]})"

step "3. live pass counts vs ncu (background) and 4. argus-lab run end to end"
timeout "$(cap 45)" "$VPY" "$REPO/scripts/gpu/wheel_check.py" passes "$WORK/passes.json" --jobs 4 --timeout 40 \
  > "$WORK/passes.txt" 2>&1 &
PASSES_PID=$!
cp "$REPO/examples/gpu/nested_torch.py" "$WORK/x/work.py"
SIGNALS="host.wall,gpu.time,hw:dram__bytes_read.sum,hw:sm__throughput.avg.pct_of_peak_sustained_elapsed"
SIGNALS="$SIGNALS,compile.registers,sys.sm_clock"
timeout "$(cap 60)" "$ARGUS" run work.py --signals "$SIGNALS" --repeat 2 --warmup 1 --store "$WORK/x/e2e.duckdb" \
  > "$WORK/e2e.txt" 2>&1
echo "argus-lab run exit status $?"
cat "$WORK/e2e.txt"
timeout "$(cap 20)" "$VPY" "$REPO/scripts/gpu/wheel_check.py" check "$WORK/x/e2e.duckdb" "$WORK/e2e.json" \
  ${SIGNALS//,/ } || status=1
gzip -c "$WORK/x/e2e.duckdb" > "$OUT/e2e.duckdb.gz" 2>/dev/null || true
wait "$PASSES_PID"
echo "live pass counts vs ncu (exit status $?):"
cat "$WORK/passes.txt"
grep -q '"all_equal": true' "$WORK/passes.json" 2>/dev/null || status=1

PM=""
for d in "$WHEELS/pm" "$REPO/.whlpm"; do ls "$d"/cupti_python-13.4*.whl >/dev/null 2>&1 && PM=$d && break; done
if [ -n "$PM" ] && [ "$(left)" -gt 20 ]; then
  step "5. what pip picks with an index: cupti-python 13.4 + nvidia-cuda-cupti 13.4.92 over torch's pin"
  timeout "$(cap 25)" "${PIP[@]}" install --no-index --no-cache-dir --disable-pip-version-check --no-deps \
    "$PM"/cupti_python-13.4*.whl "$PM"/nvidia_cuda_cupti-13.4*.whl 2>&1 | tail -2
  timeout "$(cap 30)" "$ARGUS" doctor --save "$WORK/mismatch.json" > "$WORK/mismatch.txt" 2>&1
  grep -E -A1 "CUPTI|libcupti|PM sampling" "$WORK/mismatch.txt" | grep -v '^--$' | head -30
else
  echo "(step 5 skipped: $( [ -n "$PM" ] && echo "$(left) s left" || echo "no .whl/pm wheels"))"
fi

"$VPY" - "$WORK" "$OUT/results.json" <<'EOF'
import json, sys
from pathlib import Path
work, out = Path(sys.argv[1]), Path(sys.argv[2])
res = {}
for key, name in (("doctor", "doctor.json"), ("passes", "passes.json"), ("e2e", "e2e.json"), ("mismatch_doctor", "mismatch.json")):
    try:
        res[key] = json.loads((work / name).read_text())
    except (OSError, ValueError) as exc:
        res[key] = {"missing": str(exc)}
out.write_text(json.dumps(res, indent=1) + "\n")
EOF
step "issue 20 done in $(el) s, status $status"
ls -la "$OUT"
exit $status
