"""Reading Nsight Compute reports (``.ncu-rep``) through ``ncu_report`` into per-kernel metric rows.

Pure reading, no GPU: CI runs it on reports recorded on the H200 (``tests/data/ncu/``).  Each profiled
kernel (an ncu *action*) becomes one row with its mangled/demangled name, the NVTX region path of the
``argus`` domain (``outer/inner``), the instance index of the innermost region (the NVTX payload when the
region pushed one, otherwise inferred from changes of the path) and the kernel's ordinal within that
instance — the key the ordinal join uses to match ncu's replayed kernels to the timing run.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from argus_lab.backends.rows import empty_metrics
from argus_lab.errors import BackendUnavailableError

NVTX_DOMAIN = "argus"
NCU_ROOTS = ("/opt/nvidia/nsight-compute", "/usr/local/cuda/nsight-compute")


@dataclass(frozen=True)
class NcuKernel:
    """One profiled kernel of a report."""

    range_index: int
    action_index: int
    name: str
    mangled: str
    demangled: str
    path: str
    instance_index: int
    instance_inferred: bool
    ordinal: int
    metrics: dict[str, tuple[float | str | None, str]] = field(default_factory=dict)


def import_ncu_report() -> Any:
    """Import ``ncu_report`` (the PyPI wheel, or the reader shipped in an Nsight Compute install)."""
    try:
        return importlib.import_module("ncu_report")
    except ImportError:
        pass
    for root in NCU_ROOTS:
        if not os.path.isdir(root):
            continue
        for ver in sorted(os.listdir(root), reverse=True):
            extras = os.path.join(root, ver, "extras", "python")
            if os.path.isfile(os.path.join(extras, "ncu_report.py")):
                sys.path.insert(0, extras)
                try:
                    return importlib.import_module("ncu_report")
                except ImportError:
                    sys.path.remove(extras)
    msg = (
        "cannot read .ncu-rep reports: the ncu_report module is missing; install it with "
        "`pip install ncu-report==2025.3.1` (match the ncu version that wrote the report)"
    )
    raise BackendUnavailableError(msg)


def _value(metric: Any) -> float | str | None:
    if metric is None:
        return None
    try:
        v = metric.value()
    except (RuntimeError, ValueError, TypeError):
        return None
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, int | float):
        return float(v)
    return None if v is None else str(v)


def _nvtx_stack(action: Any, domain_name: str) -> list[tuple[str, int | None]]:
    """(range name, payload or None) of the domain's push/pop stack, outermost first."""
    try:
        state = action.nvtx_state()
    except (RuntimeError, AttributeError):
        return []
    if state is None:
        return []
    for did in state.domains():
        dom = state.domain_by_id(did)
        if dom is None or dom.name() != domain_name:
            continue
        names = list(dom.push_pop_ranges())
        out: list[tuple[str, int | None]] = []
        for i, name in enumerate(names):
            payload: int | None = None
            try:
                rng = dom.push_pop_range(i)
                unknown = getattr(rng, "PayloadType_PAYLOAD_UNKNOWN", None)
                if rng is not None and rng.payload_type() != unknown:
                    payload = int(rng.payload_as_uint64())
            except (RuntimeError, AttributeError, TypeError, ValueError):
                payload = None
            out.append((str(name), payload))
        return out
    return []


class InstanceIndexer:
    """The instance index and kernel ordinal of each profiled kernel, in report order.  An NVTX payload is the
    instance index; without one the index is inferred: each new run of kernels under a path is its next instance."""

    def __init__(self) -> None:
        self._prev: str | None = None
        self._inferred: dict[str, int] = {}
        self._ordinal: dict[tuple[str, int], int] = {}

    def next(self, path: str, payload: int | None) -> tuple[int, bool, int]:
        """``(instance index, inferred, ordinal within that instance)`` of the next kernel, under ``path``."""
        if payload is not None:
            index, inferred = payload, False
        else:
            if path != self._prev:
                self._inferred[path] = self._inferred.get(path, -1) + 1
            index, inferred = self._inferred.get(path, 0), True
        self._prev = path
        key = (path, index)
        self._ordinal[key] = self._ordinal.get(key, -1) + 1
        return index, inferred, self._ordinal[key]


def read_report(path: str | Path, metrics: Sequence[str] = (), domain: str = NVTX_DOMAIN) -> list[NcuKernel]:
    """The kernels of an ``.ncu-rep``, in profiling order, with the requested metrics (all when empty).

    Call it in a process that has not loaded torch or cupti-python (``ncu_report`` crashes there); otherwise use
    :func:`read_report_isolated`.
    """
    ncu_report = import_ncu_report()
    p = Path(path)
    if not p.exists():
        msg = f"no Nsight Compute report at {str(p)!r}; the ncu run produced nothing (see its log for the cause)"
        raise FileNotFoundError(msg)
    ctx = ncu_report.load_report(str(p))
    if ctx.num_ranges() == 0:
        msg = f"{str(p)!r} holds no profiling results: it is not a report ncu wrote, or ncu profiled nothing"
        raise ValueError(msg)
    out: list[NcuKernel] = []
    indexer = InstanceIndexer()
    for ri in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(ri)
        for ai in range(rng.num_actions()):
            a = rng.action_by_idx(ai)
            stack = _nvtx_stack(a, domain)
            rpath = "/".join(n for n, _ in stack)
            index, inferred, ordinal = indexer.next(rpath, stack[-1][1] if stack else None)
            names = list(metrics) if metrics else list(a.metric_names())
            values: dict[str, tuple[float | str | None, str]] = {}
            for m in names:
                metric = a.metric_by_name(m)
                unit = ""
                if metric is not None:
                    try:
                        unit = str(metric.unit())
                    except (RuntimeError, AttributeError):
                        unit = ""
                values[m] = (_value(metric), unit)
            out.append(
                NcuKernel(
                    range_index=ri,
                    action_index=ai,
                    name=str(a.name()),
                    mangled=str(a.name(a.NameBase_MANGLED)),
                    demangled=str(a.name(a.NameBase_DEMANGLED)),
                    path=rpath,
                    instance_index=index,
                    instance_inferred=inferred,
                    ordinal=ordinal,
                    metrics=values,
                )
            )
    return out


def metric_rows(kernels: Sequence[NcuKernel], run_id: str, provenance_id: str = "") -> dict[str, list[Any]]:
    """Rows of the ``metrics`` table: one per (kernel, numeric metric), signal ``hw:<metric>``.

    ``instance_id`` stays NULL (ncu runs in another process: the join matches these rows to timing-run
    instances by ``kernel_key`` = ``ncu/<path>/<instance index>/<ordinal>/<mangled name>``, class ordinal).
    """
    out: dict[str, list[Any]] = empty_metrics()
    for k in kernels:
        key = kernel_key(k)
        for m, (v, unit) in k.metrics.items():
            if not isinstance(v, float):
                continue
            out["run_id"].append(run_id)
            out["instance_id"].append(None)
            out["kernel_key"].append(key)
            out["signal"].append(f"hw:{m}")
            out["value"].append(v)
            out["unit"].append(unit)
            out["backend"].append("ncu")
            out["provenance_id"].append(provenance_id)
    return out


def kernel_key(k: NcuKernel) -> str:
    """The ordinal-join key of an ncu kernel: ``ncu/<path>/<instance index>/<ordinal>/<mangled name>``."""
    return f"ncu/{k.path}/{k.instance_index}/{k.ordinal}/{k.mangled}"


def kernel_rows(kernels: Sequence[NcuKernel], run_id: str) -> dict[str, list[Any]]:
    """A compact per-kernel table (path, instance index, ordinal, names) for views and the join."""
    return {
        "run_id": [run_id] * len(kernels),
        "kernel_key": [kernel_key(k) for k in kernels],
        "path": [k.path for k in kernels],
        "instance_index": [k.instance_index for k in kernels],
        "instance_inferred": [k.instance_inferred for k in kernels],
        "ordinal": [k.ordinal for k in kernels],
        "name": [k.mangled for k in kernels],
        "demangled": [k.demangled for k in kernels],
    }


def to_json(kernels: Sequence[NcuKernel]) -> list[dict[str, Any]]:
    """Kernels as JSON-ready dicts (inverse: :func:`from_json`)."""
    return [
        {
            "range_index": k.range_index,
            "action_index": k.action_index,
            "name": k.name,
            "mangled": k.mangled,
            "demangled": k.demangled,
            "path": k.path,
            "instance_index": k.instance_index,
            "instance_inferred": k.instance_inferred,
            "ordinal": k.ordinal,
            "metrics": {m: list(v) for m, v in k.metrics.items()},
        }
        for k in kernels
    ]


def from_json(data: Sequence[dict[str, Any]]) -> list[NcuKernel]:
    """Kernels from :func:`to_json` output."""
    return [
        NcuKernel(
            **{k: v for k, v in d.items() if k != "metrics"},
            metrics={m: (v[0], str(v[1])) for m, v in d["metrics"].items()},
        )
        for d in data
    ]


def read_report_isolated(
    path: str | Path, metrics: Sequence[str] = (), domain: str = NVTX_DOMAIN, timeout_s: float = 300.0
) -> list[NcuKernel]:
    """:func:`read_report` in a fresh Python process.

    ``ncu_report`` crashes (SIGSEGV in ``IMetric.unit``) inside a process that has loaded cupti-python (seen on the
    H200 with torch, and on a CPU machine with cupti-python alone), which is the case in the process that ran the
    timing run; a separate process avoids that and turns any crash of the reader into an error message.
    """
    import subprocess

    cmd = [sys.executable, "-m", "argus_lab.backends.ncu.parse", str(path), "--domain", domain]
    if metrics:
        cmd += ["--metrics", ",".join(metrics)]
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[3])  # the folder holding argus_lab
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH", "")]))
    res = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=timeout_s, env=env)
    if res.returncode != 0:
        tail = "\n".join((res.stderr or res.stdout).strip().splitlines()[-6:])
        msg = f"reading the Nsight Compute report {str(path)!r} failed (exit status {res.returncode}):\n{tail}"
        raise BackendUnavailableError(msg)
    import json

    return from_json(json.loads(res.stdout))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m argus_lab.backends.ncu.parse REPORT [--metrics a,b] [--domain argus]``: kernels as JSON."""
    import argparse
    import json

    p = argparse.ArgumentParser(description="print the kernels of an .ncu-rep as JSON")
    p.add_argument("report")
    p.add_argument("--metrics", default="")
    p.add_argument("--domain", default=NVTX_DOMAIN)
    args = p.parse_args(argv)
    metrics = [m for m in args.metrics.split(",") if m]
    json.dump(to_json(read_report(args.report, metrics, args.domain)), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
