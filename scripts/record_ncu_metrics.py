"""Record the Nsight Compute metric names of a chip, for the planner's check of ``hw:`` signals (a typo gets a
did-you-mean before anything runs).

    python scripts/record_ncu_metrics.py argus_lab/data/ncu_metrics_gh100.json [--chip GH100] [--libcupti PATH]
                                         [--ncu PATH]

Two sources, each recorded with what produced it:

* ``base_metrics``: the base metrics (counters, ratios, throughputs) CUPTI's profiler host API schedules on the chip
  (``cuptiProfilerHostGetBaseMetrics``), the PerfWorks metrics ncu collects; the host API needs no GPU, only a
  libcupti of CUDA 12.6 or newer (``--libcupti``, else the first one ``backends.cupti.profiler_host`` finds that
  answers);
* ``ncu_metrics``: names ncu adds of its own (launch statistics ``launch__*``, device attributes, ...), read from the
  section files of the ncu installation (``<ncu>/sections/*.section``: every ``Name: "..."``), where ncu is found.

A full metric name is a base name with a rollup (``.sum``, ``.avg``, ``.max``, ``.min``) and optional submetrics
(``.pct_of_peak_sustained_elapsed``, ``.per_second`` ...); ncu's own names may have none.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime as dt
import glob
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from argus_lab.backends.cupti import profiler_host as ph  # noqa: E402

METRIC_TYPES = {0: "counter", 1: "ratio", 2: "throughput"}  # CUpti_MetricType


class _BaseMetrics(ctypes.Structure):
    """``CUpti_Profiler_Host_GetBaseMetrics_Params`` (cupti_profiler_host.h, CUPTI 12.6+)."""

    _fields_ = [
        ("structSize", ctypes.c_size_t),
        ("pPriv", ctypes.c_void_p),
        ("pHostObject", ctypes.c_void_p),
        ("metricType", ctypes.c_int),
        ("ppMetricNames", ctypes.POINTER(ctypes.c_char_p)),
        ("numMetrics", ctypes.c_size_t),
    ]


def base_metrics(cupti: ph.Cupti, chip: str) -> dict[str, list[str]]:
    """Base metric names by type; names CUPTI lists under a metric group (``LTS.TriageCompute.lts__...``) are kept by
    their own name."""
    init = ph._Init(ctypes.sizeof(ph._Init), None, ph.RANGE_PROFILER, chip.encode(), None, None)
    cupti._check("cuptiProfilerHostInitialize", cupti.lib.cuptiProfilerHostInitialize(ctypes.byref(init)))
    out: dict[str, list[str]] = {}
    try:
        for code, kind in METRIC_TYPES.items():
            p = _BaseMetrics(ctypes.sizeof(_BaseMetrics), None, init.pHostObject, code, None, 0)
            cupti._check("cuptiProfilerHostGetBaseMetrics", cupti.lib.cuptiProfilerHostGetBaseMetrics(ctypes.byref(p)))
            names = {(p.ppMetricNames[i] or b"").decode().rsplit(".", 1)[-1] for i in range(p.numMetrics)}
            out[kind] = sorted(n for n in names if n)
    finally:
        cupti.lib.cuptiProfilerHostDeinitialize(
            ctypes.byref(ph._Deinit(ctypes.sizeof(ph._Deinit), None, init.pHostObject))
        )
    return out


def open_cupti(path: str | None) -> ph.Cupti:
    tried = []
    for candidate in [path] if path else [*ph.candidates(), *sorted(glob.glob("/usr/local/cuda*/lib*/libcupti.so*"))]:
        try:
            cupti = ph.Cupti(candidate)
            cupti.supported_chips()
            return cupti
        except (OSError, ph.HostApiError) as exc:
            tried.append(f"{candidate}: {exc}")
    sys.exit("no libcupti with a working profiler host API:\n  " + "\n  ".join(tried))


def ncu_section_metrics(ncu: str | None) -> tuple[list[str], str, str]:
    """(metric names in ncu's section files, the ncu binary, its version); empty without ncu."""
    exe = ncu or shutil.which("ncu") or next(iter(sorted(glob.glob("/usr/local/cuda*/bin/ncu"))), None)
    if not exe:
        return [], "", ""
    real = os.path.realpath(exe)
    version = subprocess.run([exe, "--version"], capture_output=True, text=True, check=False).stdout.strip()
    roots = [Path(real).parent, *Path(real).parents[:3]]
    files = sorted({f for r in roots for f in r.glob("**/sections/*.section")})
    names: set[str] = set()
    for f in files:
        names.update(re.findall(r'Name:\s*"([a-z][a-z0-9_]*__[a-z0-9_.]+)"', f.read_text(errors="replace")))
    return sorted(names), real, version.splitlines()[-1] if version else ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--chip", default="GH100")
    ap.add_argument("--libcupti", default=None)
    ap.add_argument("--ncu", default=None)
    args = ap.parse_args()
    cupti = open_cupti(args.libcupti)
    base = base_metrics(cupti, args.chip)
    section, ncu, ncu_version = ncu_section_metrics(args.ncu)
    record = {
        "chip": args.chip,
        "command": " ".join(["python", *sys.argv]),
        "recorded_at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "libcupti": cupti.path,
        "cupti_version": cupti.version if hasattr(cupti.lib, "cuptiGetVersion") else None,
        "ncu": ncu,
        "ncu_version": ncu_version,
        "base_metrics": base,
        "ncu_metrics": section,
        "note": "base metrics from CUPTI's profiler host API (no GPU needed); ncu_metrics from the section files of "
        "the ncu installation, empty where ncu was not found",
    }
    args.out.write_text(json.dumps(record, indent=1) + "\n")
    print(f"{args.out}: {sum(len(v) for v in base.values())} base metrics ({cupti.path}), {len(section)} from ncu's "
          f"sections ({ncu or 'ncu not found'})")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
