"""Coverage: what a report's request asked for but did not get, or got only partly, and why; in one place.

Every sentence the Report, its text, its JSON and its views say about missing coverage comes from
:func:`sentences`: runs that did not finish ok, instances that raised, runs the join has not processed yet (with the
command that joins them), evidence that is not exactly attributed, instances that did not match the reference run,
rank lags that cannot be given and clock offsets that were not estimated.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from argus_lab.join.attribution_sql import JOIN_BACKEND_VERSION
from argus_lab.join.skew import SIGNALS as RANK_SIGNALS
from argus_lab.report.device import problems as device_problems

if TYPE_CHECKING:
    from argus_lab.report.report import Report
    from argus_lab.report.rows import ClockOffsetRow, MatchRow, ProvenanceRow, RankRow, RunRow

NOT_EXACT = ("unattributed", "ambiguous", "mismatch")
"""Attribution classes whose share of some evidence is reported as missing coverage."""


def sentences(report: Report) -> list[str]:
    """Every coverage sentence of ``report``, most fundamental first."""
    out = runs(report.runs)
    out.extend(f"{path}: {n} instance(s) raised: {err}" for path, n, err in report.errors)
    if report.pending:
        out.append(join_pending(str(report.store.path), report.pending))
    out.extend(stale_join(str(report.store.path), report.provenance))
    out.extend(report.notes)
    for a in report.attribution:
        for cls in NOT_EXACT:
            if a.shares.get(cls, 0.0) > 0:
                out.append(f"{a.evidence} evidence ({a.signals}): {100 * a.shares[cls]:.1f}% {cls}")
    out.extend(device_problems(report.store, list(report.run_ids)))
    out.extend(o.note for o in report.device_overhead if o.note)
    out.extend(matches(report.matches))
    out.extend(ranks([(r.run_id, r.signals) for r in report.runs], report.ranks, report.clock_offsets))
    return out


def runs(rows: Sequence[RunRow]) -> list[str]:
    """Runs that did not finish ok, with the first line of their cause."""
    out = []
    for r in rows:
        if r.status != "ok":
            first = r.cause.splitlines()[0] if r.cause else r.status
            out.append(f"run {r.plan_index} ({', '.join(r.signals)}): {r.status}: {first}")
    return out


def join_pending(store: str, run_ids: Sequence[str]) -> str:
    """The runs whose evidence the join has not attributed yet, and how to join them (a Report never writes)."""
    ids = " ".join(f"--run {r}" for r in run_ids)
    return (
        f"the join has not run on {len(run_ids)} run(s) ({', '.join(run_ids)}): their evidence is stored but not "
        f"attributed to region instances yet, so the report shows no values for them; join them with "
        f"`argus-lab join --store {store} {ids}` (Python: argus_lab.join.attribute_request(store, run_ids)), "
        "then read the report again"
    )


def stale_join(store: str, provenance: Sequence[ProvenanceRow]) -> list[str]:
    """The runs whose derived values come from an older join than this one (other aggregation rules), and how to
    join them again; empty when every run was joined by today's rules."""
    old: dict[str, list[str]] = {}
    for p in provenance:
        if p.backend == "join" and (p.backend_version or "") != JOIN_BACKEND_VERSION:
            old.setdefault(p.backend_version or "an unversioned join", []).append(p.run_id)
    if not old:
        return []
    which = "; ".join(f"{v} for {len(r)} run(s) ({', '.join(r)})" for v, r in sorted(old.items()))
    return [
        f"values from an older join: these runs were joined by {which}, this is {JOIN_BACKEND_VERSION}, whose "
        "rules differ (e.g. how a percentage or a launch attribute combines over kernels), so the values shown are "
        f"the older rules'; join them again with `argus-lab join --store {store} --all` (Python: "
        "argus_lab.join.attribute_request(store, run_ids)), then read the report again"
    ]


def parent_cycles(provenance: Sequence[ProvenanceRow]) -> list[str]:
    """Runs whose stored parent links formed a cycle (the join took those instances as top level)."""
    out = []
    for p in provenance:
        cyc = p.settings.get("parent_cycles") if p.backend == "join" else None
        if cyc:
            out.append(
                f"run {p.run_id}: {cyc['instances']} region instance(s) (e.g. ids {cyc['ids']}, paths "
                f"{', '.join(cyc['paths'])}) name parents that are their own descendants: the stored rows form a "
                "cycle, so the join took them as top-level instances (their inclusive values hold no nested "
                "instance); the store was damaged or merged wrongly: measure again into a new store"
            )
    return out


OTHER_CLIENT_EFFECT = (
    "what it did on the H200 (tests/data/gpu/threads, profiler_before): a cuBLAS GEMM read gpu.time 11.1-11.2 µs "
    "in such a process against 5.3 µs measured in a fresh one (2.1x); CUDA events of the same GEMM after the "
    "measurement were no slower than before it; the process is left as argus_lab found it (that client keeps "
    "CUPTI, so argus_lab does not detach it)"
)
"""The recorded effect of another CUPTI client on the numbers, said beside its warning."""


def other_cupti_clients(provenance: Sequence[ProvenanceRow]) -> list[str]:
    """Timing runs that found another CUPTI client in their process: what it does to the numbers (the recorded
    figure) and the fix."""
    return [
        f"run {p.run_id}: {p.settings['other_cupti_client']}; {OTHER_CLIENT_EFFECT}"
        for p in provenance
        if p.backend == "cupti" and p.settings.get("other_cupti_client")
    ]


def matches(rows: Sequence[MatchRow]) -> list[str]:
    """Instances that did not match the reference run (and which instances of the same path did)."""
    out = []
    matched = {(r.run_id, r.example_path): r for r in rows if r.status == "match"}
    for r in rows:
        if r.status == "match":
            continue
        which = f" ({_instances(r.indexes)})" if r.indexes else ""
        ok = matched.get((r.run_id, r.example_path))
        kept = f"; {_instances(ok.indexes)} match and keep their evidence" if ok is not None and ok.indexes else ""
        out.append(
            f"run {r.run_id}: {r.instances} instance(s) {r.status}{which} against run {r.ref_run_id}"
            + (f", e.g. {r.example_path}: {r.difference}" if r.difference else f" ({r.example_path})")
            + kept
        )
    return out


def _instances(indexes: str) -> str:
    return f"instance {indexes}" if indexes.isdigit() else f"instances {indexes}"


def match_lines(rows: Sequence[MatchRow]) -> list[str]:
    """One line per (run, region path): which instances matched the reference run and which did not."""
    by: dict[tuple[str, str, str], list[MatchRow]] = {}
    for r in rows:
        by.setdefault((r.run_id, r.ref_run_id, r.example_path), []).append(r)
    out = []
    for (run, ref, path), group in by.items():
        parts = []
        for r in sorted(group, key=lambda m: (m.status != "match", m.status)):
            what = _instances(r.indexes) if r.indexes else f"{r.instances} instance(s)"
            parts.append(f"{what} {r.status}" + (f" ({r.difference})" if r.difference else ""))
        out.append(f"run {run} against {ref}: {path}: " + "; ".join(parts))
    return out


def ranks(
    requested: Sequence[tuple[str, tuple[str, ...]]], rows: Sequence[RankRow], offsets: Sequence[ClockOffsetRow]
) -> list[str]:
    """Rank lags that were asked for but cannot be given, and clock offsets that were not estimated.

    ``requested`` holds (run id, signals) of each run.
    """
    out = []
    asked = sorted({s for _, sigs in requested for s in sigs if s in RANK_SIGNALS})
    if asked and not rows:
        out.append(
            f"{', '.join(asked)}: no run of this report has more than one rank; launch the workload on several "
            "ranks, e.g. `--launch 'torchrun --nproc-per-node 2'` (Python: launch='torchrun --nproc-per-node 2')"
        )
    for o in offsets:
        if o.status == "not estimated":
            out.append(
                f"run {o.run_id} rank {o.rank}: clock offset not estimated ({o.phase} the workload): {o.reason}; "
                "its rank lags use its clock as it is (exact on one host, not across hosts)"
            )
    return out


__all__ = ["NOT_EXACT", "join_pending", "match_lines", "matches", "parent_cycles", "ranks", "runs", "sentences"]
