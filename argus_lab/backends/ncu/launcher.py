"""Nsight Compute launcher: runs the child-run command under ``ncu`` and reads the report.

The command carries the run's ``hw:`` metrics, the replay mode the planner chose, the NVTX include filter that
confines replay to the request's scope, and explicit ``--clock-control``/``--cache-control`` settings, which are
recorded as provenance because they change what the counters read (ncu's defaults lock base clocks and flush
caches before every pass).  Reading is in :mod:`argus_lab.backends.ncu.parse`.

The scope reaches ncu through the child's recorder: the launcher sets ``ARGUS_NVTX_SCOPE`` to the request's scope,
the recorder pairs each region range with an ``argus-scope`` range named ``in`` (instance in scope) or ``out``,
and the filter ``argus-scope@in/`` keeps only kernels launched inside an ``in`` range
(:mod:`argus_lab.run.nvtx_scope`): no kernel outside every in-scope instance is ever replayed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from argus_lab import config
from argus_lab.backends.ncu import parse as ncu_parse
from argus_lab.errors import BackendUnavailableError, WorkloadError
from argus_lab.plan.backends import BACKENDS
from argus_lab.plan.ncu_settings import SCOPE_INCLUDE
from argus_lab.regions import NVTX_SCOPE_ENV
from argus_lab.run.nvtx_scope import EVERY_REGION, STATE_FILE
from argus_lab.run.protocols import Columns, Evidence, RunContext

REPORT_NAME = "report.ncu-rep"
LOG_NAME = "ncu.log"
DEFAULT_SETTINGS: dict[str, Any] = {
    "replay_mode": "kernel",
    "clock_control": "base",
    "cache_control": "all",
    "graph_profiling": "node",
}
REPLAY_MODES = ("kernel", "application", "range", "app-range")
NCU_CANDIDATES = ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/2025.3.1/ncu")


def find_ncu(explicit: str | None = None) -> str:
    """The ``ncu`` executable, or :class:`BackendUnavailableError` with how to get it."""
    for cand in (explicit, config.value(config.ARGUS_NCU), shutil.which("ncu"), *NCU_CANDIDATES):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    msg = (
        "Nsight Compute (`ncu`) was not found on PATH, in /usr/local/cuda/bin or /opt/nvidia/nsight-compute; "
        "install Nsight Compute 2025.3+ (part of the CUDA toolkit) or point ARGUS_NCU at the ncu executable; "
        "hw:* signals need it"
    )
    raise BackendUnavailableError(msg)


def metrics_of(signals: Sequence[str]) -> list[str]:
    """The ncu metric names of the run's ``hw:`` signals, in order, without repeats."""
    out: list[str] = []
    for s in signals:
        if s.startswith("hw:") and s[3:] not in out:
            out.append(s[3:])
    return out


def nvtx_filters(settings: Mapping[str, Any]) -> list[str]:
    """``--nvtx-include`` expressions: ``settings['nvtx_include']``; with a ``scope`` setting (every plan's ncu
    run has one) at least the scope filter ``argus-scope@in/``; else built from ``settings['regions']``.

    A region path ``outer/inner`` becomes ``argus@outer/inner/`` (push/pop ranges end with ``/``).
    """
    given = settings.get("nvtx_include")
    if settings.get("scope") is not None:
        return [SCOPE_INCLUDE]
    if given:
        return [given] if isinstance(given, str) else list(given)
    out = []
    for path in settings.get("regions", ()) or ():
        p = str(path).strip("/")
        if p and p != "*":
            out.append(f"{ncu_parse.NVTX_DOMAIN}@{p}/")
    return out


class NcuLauncher:
    """The Nsight Compute backend (a :class:`~argus_lab.run.protocols.Launcher`)."""

    info = BACKENDS["ncu"]

    def __init__(self, ncu: str | None = None) -> None:
        self._ncu = ncu

    def settings(self, ctx: RunContext) -> dict[str, Any]:
        """The effective ncu settings of a run (defaults filled in)."""
        merged = dict(DEFAULT_SETTINGS)
        merged.update({k: v for k, v in ctx.settings.items() if v is not None})
        if merged["replay_mode"] not in REPLAY_MODES:
            msg = f"unknown ncu replay mode {merged['replay_mode']!r}; use one of {', '.join(REPLAY_MODES)}"
            raise ValueError(msg)
        return merged

    def command(self, ctx: RunContext, child: Sequence[str]) -> list[str]:
        s = self.settings(ctx)
        metrics = list(s.get("metrics") or metrics_of(ctx.signals))
        if not metrics:
            msg = "an ncu run needs at least one hw:<metric> signal, e.g. hw:dram__bytes_read.sum"
            raise ValueError(msg)
        scoped = s.get("scope") is not None
        cmd = [
            "env",
            "ARGUS_NVTX_PAYLOAD=1",  # region ranges carry their instance index (see ncu_parse)
            # scope ranges: what ncu may replay (never an empty value, which may not reach the workload; the child
            # reads the scope from its spec first)
            *([f"{NVTX_SCOPE_ENV}={str(s['scope']).strip() or EVERY_REGION}"] if scoped else []),
            find_ncu(self._ncu),
            "--metrics",
            ",".join(metrics),
            "--replay-mode",
            str(s["replay_mode"]),
            "--clock-control",
            str(s["clock_control"]),
            "--cache-control",
            str(s["cache_control"]),
            "--graph-profiling",
            str(s["graph_profiling"]),
            "--target-processes",
            "all",
            "--nvtx",
        ]
        for expr in nvtx_filters(s):
            cmd += ["--nvtx-include", expr]
        if s.get("kernel_name"):
            cmd += ["--kernel-name", str(s["kernel_name"])]
        if s.get("launch_count"):
            cmd += ["--launch-count", str(int(s["launch_count"]))]
        cmd += [
            "--export",
            str(Path(ctx.out_dir) / REPORT_NAME),
            "--force-overwrite",
            "--log-file",
            str(Path(ctx.out_dir) / LOG_NAME),
        ]
        return [*cmd, *child]

    def evidence(self, ctx: RunContext, instances: Columns) -> Evidence:
        out = Path(ctx.out_dir)
        report = out / REPORT_NAME
        log = (out / LOG_NAME).read_text(errors="replace") if (out / LOG_NAME).exists() else ""
        scope_state = read_scope_state(out)
        check_log(log, report, scope_state=scope_state)
        metrics = list(self.settings(ctx).get("metrics") or metrics_of(ctx.signals))
        kernels = ncu_parse.read_report_isolated(report, metrics)
        run_id = ctx.run_id
        prov_id = f"{run_id}:ncu"
        s = self.settings(ctx)
        data = report.read_bytes()
        return {
            "metrics": ncu_parse.metric_rows(kernels, run_id, prov_id),
            "ncu_kernels": ncu_parse.kernel_rows(kernels, run_id),
            "provenance": {
                "provenance_id": [prov_id],
                "run_id": [run_id],
                "backend": ["ncu"],
                "backend_version": [ncu_version(log)],
                "settings": [
                    {
                        **{k: s[k] for k in ("replay_mode", "clock_control", "cache_control", "graph_profiling")},
                        "metrics": metrics,
                        "nvtx_include": nvtx_filters(s),
                        "scope": s.get("scope"),
                        "kernels_profiled": len(kernels),
                        "paths": sorted({k.path for k in kernels}),
                        "scope_ranges": scope_state,
                    }
                ],
                "clocks": [{"clock_control": s["clock_control"]}],
                "timestamps": ["none (counter replay; ncu durations are counter context, not timing of record)"],
            },
            "artifacts": {
                "run_id": [run_id],
                "kind": ["ncu-rep"],
                "path": [str(report)],
                "sha256": [hashlib.sha256(data).hexdigest()],
                "bytes": [len(data)],
                "note": [f"Nsight Compute report, {len(kernels)} kernels"],
            },
        }


_PERM = re.compile(r"ERR_NVGPUCTRPERM")


def read_scope_state(folder: Path) -> dict[str, Any] | None:
    """What the child's NVTX scope gate saw (:data:`~argus_lab.run.nvtx_scope.STATE_FILE`), None when absent."""
    try:
        state = json.loads((Path(folder) / STATE_FILE).read_text())
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


def no_kernel_cause(state: Mapping[str, Any] | None) -> str:
    """Why an ncu run profiled no kernel, from what the child's scope gate saw."""
    if state is None:
        return (
            "no kernel was launched inside a region instance of the scope (check the scope's region paths and "
            "instance ranges against the regions the workload runs, e.g. with `argus-lab run SCRIPT --signals "
            "gpu.kernels`), or the workload launched none (the workload's process left no record of its NVTX "
            "scope ranges)"
        )
    nvtx = str(state.get("nvtx", ""))
    if nvtx.startswith("off"):
        return (
            f"NVTX was {nvtx} in the workload's process, so no region opened the `argus-scope` range ncu filters "
            "on; install the nvtx package where the workload runs (`pip install nvtx`) and leave ARGUS_NVTX unset"
        )
    if not state.get("scope_ranges"):
        return "the workload's process opened no `argus-scope` ranges (the scope gate was not switched on)"
    n_in, n_out = int(state.get("opened_in", 0)), int(state.get("opened_out", 0))
    scope = state.get("scope") or "(everything)"
    if n_in == 0:
        return (
            f"no region instance of the scope {scope!r} was entered ({n_out} out of scope: warm-up repetitions or "
            "instances the scope leaves out); check the scope's region paths and instance ranges against the "
            "regions the workload runs, e.g. with `argus-lab run SCRIPT --signals gpu.kernels`"
        )
    return (
        f"the workload entered {n_in} in-scope region instance(s) ({n_out} out of scope) but ncu profiled none of "
        "their kernels: they launched none, or launched them from another thread than the one that entered the region"
    )


def check_log(
    log: str, report: Path, returncode: int | None = None, scope_state: Mapping[str, Any] | None = None
) -> None:
    """Turn what ncu printed into a clear error when the run produced no usable report."""
    if _PERM.search(log):
        msg = (
            "ncu has no permission to read GPU performance counters (ERR_NVGPUCTRPERM); run as root, or allow "
            "counters for all users (`options nvidia NVreg_RestrictProfilingToAdminUsers=0` in "
            "/etc/modprobe.d, then reload the driver; see https://developer.nvidia.com/ERR_NVGPUCTRPERM)"
        )
        raise BackendUnavailableError(msg)
    if "No kernels were profiled" in log and not report.exists():
        msg = f"ncu profiled no kernel: {no_kernel_cause(scope_state)}"
        raise WorkloadError(msg)
    if not report.exists():
        tail = "\n".join(log.strip().splitlines()[-8:])
        code = f" (exit status {returncode})" if returncode is not None else ""
        msg = f"the workload failed under ncu{code} and no report was written; ncu's last lines:\n{tail}"
        raise WorkloadError(msg)


def ncu_version(log: str) -> str:
    """The ncu version from its log/banner ('' when unknown)."""
    m = re.search(r"Nsight Compute[^\n]*?(\d{4}\.\d+\.\d+(?:\.\d+)?)", log)
    return f"ncu {m.group(1)}" if m else "ncu"


def make() -> NcuLauncher:
    """The backend object (see :func:`argus_lab.run.loader.load_backend`)."""
    return NcuLauncher()
