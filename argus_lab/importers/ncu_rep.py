"""Nsight Compute reports (``.ncu-rep``) -> ncu kernels with their NVTX region instances, as one run.

The report is read by :mod:`argus_lab.backends.ncu_parse` (``ncu_report``, in a separate process: it crashes in a
process that loaded cupti-python), together with the full NVTX push/pop stack of every profiled kernel.  Each
stack level becomes a region instance: its path, and its instance index from the range's payload when the range
carried one (argus regions under ncu push their instance index) or else counted from re-entries of the path in
profiling order, as ``ncu_parse`` counts them for the innermost range.  Kernels become ``ncu_kernels`` rows and
their metrics ``hw:<metric>`` rows; the join matches them to this run's own instances by path and instance index
(``exact`` with a payload, ``ordinal`` when inferred), exactly as it does for an ncu run without a timing run.

ncu replays kernels and reports no timestamps: the imported instances have no start or end time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from argus_lab.backends.ncu import parse as ncu_parse
from argus_lab.errors import BackendUnavailableError, ImportFormatError
from argus_lab.importers import ncu_file
from argus_lab.importers.common import (
    ImportedTrace,
    SourceInfo,
    artifact_rows,
    file_digest,
    provenance_rows,
    region_rows,
)

MODULE = "nvtx"
"""The module of regions imported from NVTX ranges (part of their identity)."""

Stack = list[tuple[str, int | None]]

CONTEXT_PREFIXES = ("device__attribute", "c2clink__", "nvlink__", "profiler__", "numa__", "pmsampling:")
"""Metrics describing the device or the profiler rather than a kernel: left out unless asked for by name."""


def read(
    path: str | Path, run_id: str, *, domain: str | None = None, metrics: Sequence[str] = (), timeout_s: float = 300.0
) -> ImportedTrace:
    """Read an ``.ncu-rep`` as the evidence of run ``run_id``.

    ``domain``: the NVTX domain whose ranges are regions (default ``argus``; when the report has no range in it,
    the only domain that has ranges, e.g. the default domain of ``torch.cuda.nvtx``).  ``metrics``: the metrics to
    keep (default: every metric the report holds).
    """
    p = Path(path)
    framing = _framing(p)
    dump = _dump_isolated(p, metrics, timeout_s, framing)
    kernels = ncu_parse.from_json(dump["kernels"])
    if not metrics:
        kernels = [_kernel_metrics_only(k) for k in kernels]
    stacks: list[dict[str, Stack]] = [{d: [(n, pl) for n, pl in s] for d, s in k.items()} for k in dump["stacks"]]
    chosen = _choose_domain(stacks, domain)
    if chosen != ncu_parse.NVTX_DOMAIN and kernels:  # paths and instance indices of the chosen domain
        kernels = _repath(kernels, [s.get(chosen, []) for s in stacks])
    levels = [s.get(chosen, []) if chosen else [] for s in stacks]
    inst, parent_of, key_of = _instances(levels, kernels)
    names = [path.rsplit("/", 1)[-1] for path, _ in inst]
    ids, region_cols = region_rows(names, MODULE)
    run_ids = [run_id] * len(inst)
    instances: dict[str, list[Any]] = {
        "run_id": run_ids,
        "instance_id": list(range(1, len(inst) + 1)),
        "region_id": [ids[n] for n in names],
        "path": [path for path, _ in inst],
        "instance_index": [idx for _, idx in inst],
        "parent_instance_id": [parent_of[i] for i in range(len(inst))],
        "repetition": [0] * len(inst),
        "pid": [0] * len(inst),
        "thread_id": [0] * len(inst),
        "start_ns": [None] * len(inst),
        "end_ns": [None] * len(inst),
        "cpu_ns": [-1] * len(inst),
        "error": [""] * len(inst),
        "warmup": [False] * len(inst),
        "rank": [0] * len(inst),
        "thread_name": [""] * len(inst),
    }
    sha, size = file_digest(p)
    version = str(dump.get("version") or "")
    source = SourceInfo(str(p.resolve()), "ncu", "Nsight Compute", sha, size, f"ncu report {version}".strip())
    prov_id = f"{run_id}:ncu"
    inferred = sum(1 for k in kernels if k.instance_inferred)
    settings = {
        "nvtx_domain": chosen,
        "domains": sorted({d for s in stacks for d in s}),
        "kernels_profiled": len(kernels),
        "instance_index_inferred": inferred,
        "paths": sorted({k.path for k in kernels}),
        "metrics": sorted({m for k in kernels for m in k.metrics}),
        "unplaced_kernels": sum(1 for k in key_of if k is None),
    }
    notes = []
    if not chosen:
        notes.append("the report has no NVTX push/pop range (profile with `ncu --nvtx`): no kernel is in a region")
    if inferred:
        notes.append(
            f"{inferred} kernel(s) had no instance index in their NVTX range: inferred from path changes (ordinal)"
        )
    damage = list(framing.problems)
    if framing.results_declared and framing.results_declared != len(kernels):  # 0: no block header was recognised
        damage.append(
            f"its blocks declare {framing.results_declared} profiling result(s), the reader returned {len(kernels)}"
        )
    negative = sorted(k.name for k in kernels if _negative_duration(k))
    if negative:
        damage.append(
            f"{len(negative)} kernel(s) have a negative gpu__time_duration (e.g. {negative[0]!r}): values out of range"
        )
    settings["file_framing"] = {
        "messages": framing.messages, "results_declared": framing.results_declared, "problems": list(damage)
    }  # fmt: skip
    tables: dict[str, dict[str, list[Any]]] = {
        "regions": region_cols,
        "region_instances": instances,
        "ncu_kernels": ncu_parse.kernel_rows(kernels, run_id),
        "metrics": ncu_parse.metric_rows(kernels, run_id, prov_id),
        "provenance": provenance_rows(
            run_id, source, "ncu", settings, "none (counter replay; ncu durations are counter context)"
        ),
        "artifacts": artifact_rows(run_id, source, f"Nsight Compute report, {len(kernels)} kernels"),
    }
    import pyarrow as pa

    from argus_lab.model.columns import jsonable_columns

    arrow = {name: pa.table(jsonable_columns(cols)) for name, cols in tables.items()}
    arrow["region_instances"] = pa.table(
        {
            **{k: v for k, v in instances.items() if k not in ("start_ns", "end_ns", "thread_id")},
            "thread_id": pa.array(instances["thread_id"], pa.uint64()),
            "start_ns": pa.array(instances["start_ns"], pa.int64()),
            "end_ns": pa.array(instances["end_ns"], pa.int64()),
        }
    )
    return ImportedTrace(
        run_id=run_id,
        source=source,
        tables=arrow,
        counts={"region instances": len(inst), "ncu kernels": len(kernels)},
        started_ns=0,
        ended_ns=0,
        notes=tuple(notes),
        settings=settings,
        damage=tuple(damage),
    )


DAMAGED_FIX = "copy the report again from where ncu wrote it, or profile again (`ncu --nvtx -o NAME ...`)"


def _framing(p: Path) -> ncu_file.Framing:
    """The report's framing; a file that is not a report at all is refused here, before the reader runs."""
    if not p.exists():
        msg = f"no Nsight Compute report at {str(p)!r}; pass the path of an .ncu-rep file"
        raise ImportFormatError(msg)
    framing = ncu_file.check(p)
    if framing.messages == 0:
        why = "; ".join(framing.problems) or "it is empty"
        msg = f"{str(p)!r} is not an Nsight Compute report: {why}; pass an .ncu-rep written by `ncu -o NAME ...`"
        raise ImportFormatError(msg)
    return framing


def _negative_duration(k: ncu_parse.NcuKernel) -> bool:
    value = k.metrics.get("gpu__time_duration.sum", (None, ""))[0]
    return isinstance(value, int | float) and value < 0


def _kernel_metrics_only(k: ncu_parse.NcuKernel) -> ncu_parse.NcuKernel:
    from dataclasses import replace

    kept = {m: v for m, v in k.metrics.items() if not m.startswith(CONTEXT_PREFIXES)}
    return replace(k, metrics=kept)


DEFAULT_DOMAIN_NAMES = ("", "default", "<default>", "(default)", "default domain", "nvtx default domain")
"""Names the default NVTX domain (ranges pushed without a domain, e.g. ``torch.cuda.nvtx``) may have in a report;
``domain="default"`` selects it whichever of them the report uses."""


def _choose_domain(stacks: list[dict[str, Stack]], wanted: str | None) -> str:
    have = {d for s in stacks for d, st in s.items() if st}
    if wanted is not None and wanted.lower() in DEFAULT_DOMAIN_NAMES:
        named = [d for d in have if d.lower() in DEFAULT_DOMAIN_NAMES]
        others = [d for d in have if d != ncu_parse.NVTX_DOMAIN]
        found = named or (others if len(others) == 1 else [])
        if not found:
            msg = f"the report has no NVTX range in the default domain; its domains with ranges: {sorted(have)}"
            raise ImportFormatError(msg)
        return found[0]
    if wanted is not None:
        if wanted not in have and have:
            msg = f"the report has no NVTX range in domain {wanted!r}; its domains with ranges: {sorted(have)}"
            raise ImportFormatError(msg)
        return wanted
    if ncu_parse.NVTX_DOMAIN in have or not have:
        return ncu_parse.NVTX_DOMAIN if have else ""
    if len(have) == 1:
        return next(iter(have))
    msg = f"the report has NVTX ranges in several domains {sorted(have)}; choose one (domain=...)"
    raise ImportFormatError(msg)


def _repath(kernels: list[ncu_parse.NcuKernel], stacks: list[Stack]) -> list[ncu_parse.NcuKernel]:
    """Paths, instance indices and ordinals of another domain (the reader computed them for ``argus``)."""
    from dataclasses import replace

    out = []
    indexer = ncu_parse.InstanceIndexer()
    for k, st in zip(kernels, stacks, strict=True):
        path = "/".join(n.replace("/", "\u2215") for n, _ in st)
        idx, inf, ordinal = indexer.next(path, st[-1][1] if st else None)
        out.append(replace(k, path=path, instance_index=idx, instance_inferred=inf, ordinal=ordinal))
    return out


def _instances(
    levels: list[Stack], kernels: list[ncu_parse.NcuKernel]
) -> tuple[list[tuple[str, int]], dict[int, int], list[int | None]]:
    """Distinct (path, instance index) of every stack level, parents (1-based ids, 0 = top) and each kernel's
    innermost instance position."""
    order: dict[tuple[str, int], int] = {}
    parent: dict[int, int] = {}
    prev_keys: list[tuple[str, int]] = []
    counters: dict[str, int] = {}
    kernel_inst: list[int | None] = []
    for st, k in zip(levels, kernels, strict=True):
        keys: list[tuple[str, int]] = []
        path = ""
        for depth, (name, payload) in enumerate(st):
            path = f"{path}/{name.replace('/', chr(0x2215))}" if path else name.replace("/", "\u2215")
            if depth == len(st) - 1:
                idx = k.instance_index
            elif payload is not None:
                idx = payload
            else:  # re-entered when the previous kernel was not under the same enclosing instances
                same = len(prev_keys) > depth and prev_keys[depth][0] == path and keys == prev_keys[:depth]
                idx = prev_keys[depth][1] if same else counters.get(path, -1) + 1
            counters[path] = max(counters.get(path, -1), idx)
            key = (path, idx)
            if key not in order:
                order[key] = len(order)
                parent[order[key]] = (order[keys[-1]] + 1) if keys else 0
            keys.append(key)
        prev_keys = keys
        kernel_inst.append(order[keys[-1]] if keys else None)
    return list(order), parent, kernel_inst


def _dump_isolated(p: Path, metrics: Sequence[str], timeout_s: float, framing: ncu_file.Framing) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "argus_lab.importers.ncu_rep", str(p)]
    if metrics:
        cmd += ["--metrics", ",".join(metrics)]
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[3])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH", "")]))
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired as exc:
        msg = f"reading {str(p)!r} took longer than {timeout_s:.0f} s; pass a larger timeout_s"
        raise BackendUnavailableError(msg) from exc
    if res.returncode != 0:
        lines = (res.stderr or res.stdout).strip().splitlines()
        said = lines[-1].strip() if lines else f"exit status {res.returncode}"  # the error, not the reader's traceback
        if framing.problems:
            msg = (
                f"{str(p)!r} is damaged ({'; '.join(framing.problems)}): the reader stopped with {said}; {DAMAGED_FIX}"
            )
            raise ImportFormatError(msg)
        kind, _, text = said.partition(": ")
        if kind.endswith("BackendUnavailableError"):  # ncu_report is missing: the reader says how to install it
            raise BackendUnavailableError(text)
        msg = f"{str(p)!r} could not be read as an Nsight Compute report ({said}); {DAMAGED_FIX}"
        raise ImportFormatError(msg)
    out: dict[str, Any] = json.loads(res.stdout)
    return out


def dump(path: str, metrics: Sequence[str]) -> dict[str, Any]:
    """Kernels (``ncu_parse.to_json``) and each kernel's NVTX stack in every domain (run in a fresh process)."""
    kernels = ncu_parse.read_report(path, metrics)
    ncu_report = ncu_parse.import_ncu_report()
    ctx = ncu_report.load_report(str(path))
    stacks: list[dict[str, Stack]] = []
    for ri in range(ctx.num_ranges()):
        rng = ctx.range_by_idx(ri)
        for ai in range(rng.num_actions()):
            action = rng.action_by_idx(ai)
            stacks.append({d: ncu_parse._nvtx_stack(action, d) for d in _domains(action)})
    version = ""
    try:
        version = str(ctx.range_by_idx(0).action_by_idx(0).metric_by_name("report:version").value())
    except (AttributeError, RuntimeError, TypeError, ValueError):
        version = ""
    return {"kernels": ncu_parse.to_json(kernels), "stacks": stacks, "version": version}


def _domains(action: Any) -> list[str]:
    try:
        state = action.nvtx_state()
    except (RuntimeError, AttributeError):
        return []
    if state is None:
        return []
    out = []
    for did in state.domains():
        dom = state.domain_by_id(did)
        if dom is not None:
            out.append(str(dom.name()))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m argus_lab.importers.ncu_rep REPORT [--metrics a,b]``: kernels and NVTX stacks as JSON."""
    import argparse

    ap = argparse.ArgumentParser(description="print the kernels of an .ncu-rep with their NVTX stacks as JSON")
    ap.add_argument("report")
    ap.add_argument("--metrics", default="")
    args = ap.parse_args(argv)
    json.dump(dump(args.report, [m for m in args.metrics.split(",") if m]), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
