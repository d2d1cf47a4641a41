"""What the scoped-ncu and compiler recording shows (scripts/gpu/ncu_scope_compiler.sh): read the stores it wrote,
print the "done when" facts.

    python scripts/gpu/ncu_scope_compiler_summary.py OUT

Writes OUT/issue15-summary.json (the facts below, for tests/test_ncu_scope_compiler_recorded.py), compacts the
stores (16 KiB DuckDB blocks, :mod:`argus_lab.store.compact`) and prints:

1. autotune.duckdb, request 2 (ncu, ``--scope 'matmul; instances=1:'``): every kernel ncu replayed, by region path
   and instance, the instance matches, the counters of every measured instance, and the compiler table (which
   configuration ran in the measured instances);
2. autotune.duckdb, request 1 (no scope): the heterogeneity of the first instance;
3. compiled.duckdb: the compiler facts and SASS mix of each Triton kernel of the compiled module, and whether
   every launched Triton kernel was linked to a binary;
4. model.duckdb: the kernels ncu replayed outside every region (must be none) against the timing run's, and the
   kernel names as the report shows them next to torch.profiler's (OUT/profiler_names.json).
"""

from __future__ import annotations

import json
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import argus_lab
from argus_lab.report.names import demangle, demangler
from argus_lab.store import Store
from argus_lab.store.compact import compact


def _requests(store: Store) -> list[list[str]]:
    """The run ids of each request, oldest request first."""
    rows = store.rows(
        "SELECT r.request_id, list(r.run_id ORDER BY r.plan_index) FROM runs r JOIN requests q USING (request_id) "
        "GROUP BY r.request_id, q.created_ns ORDER BY q.created_ns"
    )
    return [list(r[1]) for r in rows]


def _section(title: str, out: dict[str, Any], key: str, fn: Callable[[], dict[str, Any]]) -> None:
    print(f"\n=== {title}")
    try:
        out[key] = fn()
    except Exception as exc:  # one case failing never hides the others
        traceback.print_exc(limit=3)
        out[key] = {"error": f"{type(exc).__name__}: {exc}"}


def autotune_ncu(folder: Path) -> dict[str, Any]:
    store = Store(folder / "autotune.duckdb")
    runs = _requests(store)[-1]
    report = argus_lab.Report(store, runs)
    ncu_runs = [r.run_id for r in report.runs if "ncu" in r.backends]
    replayed = store.rows(
        "SELECT path, instance_index, count(*) FROM ncu_kernels WHERE run_id IN (SELECT unnest(?::VARCHAR[])) "
        "GROUP BY ALL ORDER BY ALL",
        [ncu_runs],
    )
    classes = store.rows(
        "SELECT class, count(*) FROM attributions WHERE run_id IN (SELECT unnest(?::VARCHAR[])) "
        "AND evidence = 'ncu_kernel' GROUP BY ALL ORDER BY ALL",
        [ncu_runs],
    )
    per_instance = store.rows(
        "SELECT i.instance_index, v.signal, v.inclusive FROM instance_values v JOIN region_instances i "
        "USING (run_id, instance_id) WHERE v.run_id IN (SELECT unnest(?::VARCHAR[])) AND v.signal LIKE 'hw:%' "
        "AND i.path = 'matmul' ORDER BY 1, 2",
        [runs],
    )
    print("ncu replayed (path, instance index, kernels):", replayed)
    print("ncu kernel attribution classes:", classes)
    print("counters per matmul instance:")
    for idx, sig, val in per_instance:
        print(f"  #{idx} {sig} = {val}")
    print("\n".join(report.matching_lines()))
    print(report.compiler_table())
    return {
        "runs": runs,
        "replayed": [list(r) for r in replayed],
        "classes": dict(classes),
        "counters": [list(r) for r in per_instance],
        "matching": report.matching_lines(),
        "compiler": [
            {"config": c.config, "ran_in": c.ran_in, "measured": c.measured, "registers": c.registers}
            for c in report.compiler
            if c.source == "triton"
        ],
    }


def autotune_first_instance(folder: Path) -> dict[str, Any]:
    store = Store(folder / "autotune.duckdb")
    runs = _requests(store)[0]
    report = argus_lab.Report(store, runs)
    print("\n".join(report.heterogeneity()) or "(no heterogeneity reported)")
    return {
        "runs": runs,
        "heterogeneity": report.heterogeneity(),
        "groups": [{"indexes": g.indexes, "kernels": g.kernels, "majority": g.majority} for g in report.groups],
    }


def compiled(folder: Path) -> dict[str, Any]:
    store = Store(folder / "compiled.duckdb")
    runs = _requests(store)[-1]
    report = argus_lab.Report(store, runs)
    print(report.compiler_table())
    triton = [c for c in report.compiler if c.source == "triton"]
    launched = store.rows(
        "SELECT DISTINCT name FROM kernels WHERE run_id IN (SELECT unnest(?::VARCHAR[])) AND name LIKE 'triton_%'",
        [runs],
    )
    linked = store.rows(
        "SELECT DISTINCT f.name FROM attributions a JOIN kernel_facts f ON a.evidence_id = 'bin:' || f.name || ':' || "
        "f.binary_hash AND f.run_id = a.run_id WHERE a.run_id IN (SELECT unnest(?::VARCHAR[])) "
        "AND a.evidence = 'compiler' AND a.instance_id IS NOT NULL",
        [runs],
    )
    print(f"launched Triton kernels: {len(launched)}, linked to a binary: {len(linked)}")
    print("\n".join(report.heterogeneity()))
    prov = _provenance(store, runs, "compiler")
    for p in prov:  # what the collector found and skipped (dead weak proxies and the like)
        print(f"compiler provenance: found_by={p.get('found_by')} skipped={p.get('skipped')}")
    for r in report.runs:
        print(f"run {r.run_id}: {r.status}{' - ' + r.cause if r.cause else ''}")
    return {
        "runs": runs,
        "status": {r.run_id: [r.status, r.cause] for r in report.runs},
        "compiler_provenance": prov,
        "launched_triton": sorted(r[0] for r in launched),
        "linked": sorted(r[0] for r in linked),
        "facts": [
            {
                "name": c.name,
                "registers": c.registers,
                "spill_words": c.spill_words,
                "shared_bytes": c.shared_bytes,
                "num_warps": c.num_warps,
                "num_stages": c.num_stages,
                "sass_instructions": c.sass_instructions,
                "sass_mix": c.sass_mix,
                "origin": c.origin,
                "ran_in": c.ran_in,
            }
            for c in triton
        ],
        "heterogeneity": report.heterogeneity(),
    }


def model(folder: Path) -> dict[str, Any]:
    store = Store(folder / "model.duckdb")
    runs = _requests(store)[-1]
    report = argus_lab.Report(store, runs)
    ncu_runs = [r.run_id for r in report.runs if "ncu" in r.backends]
    timing = [r.run_id for r in report.runs if "cupti" in r.backends]
    outside = store.rows(
        "SELECT count(*) FROM ncu_kernels WHERE run_id IN (SELECT unnest(?::VARCHAR[])) AND coalesce(path, '') = ''",
        [ncu_runs],
    )[0][0]
    replayed = store.rows("SELECT count(*) FROM ncu_kernels WHERE run_id IN (SELECT unnest(?::VARCHAR[]))", [ncu_runs])[
        0
    ][0]
    measured = store.rows(
        "SELECT count(*) FROM kernels k JOIN region_instances i USING (run_id, instance_id) "
        "WHERE k.run_id IN (SELECT unnest(?::VARCHAR[])) AND NOT i.warmup AND k.kind = 'kernel'",
        [timing],
    )[0][0]
    before = store.rows(
        "SELECT count(*) FROM kernels k WHERE k.run_id IN (SELECT unnest(?::VARCHAR[])) AND k.instance_id IS NULL",
        [timing],
    )[0][0]
    print(
        f"ncu replayed {replayed} kernels, {outside} outside every region; the timing run's measured instances "
        f"launched {measured}"
    )
    names = sorted({k.name for k in report.kernels})
    prof_path = folder / "profiler_names.json"
    prof = json.loads(prof_path.read_text())["kernels"] if prof_path.exists() else []
    ours = {demangle(n) for n in names}
    print(
        f"demangler: {demangler()}; kernel names: {len(names)}, of them as torch.profiler names them: "
        f"{len(ours & set(prof))} of {len(prof)}"
    )
    for k in report.kernels[:12]:
        print(f"  {k.display_name}")
    print("\n".join(report.matching_lines()))
    print("\n".join(report.heterogeneity()))
    scope_states = {r: _scope_state(folder / "model.duckdb.runs" / r) for r in ncu_runs}
    for r in report.runs:
        print(f"run {r.run_id}: {r.status}{' - ' + r.cause if r.cause else ''}")
    for r, state in scope_states.items():  # what the ncu child's scope gate saw (NVTX on, in/out ranges opened)
        print(f"ncu run {r}: scope ranges {state}")
    return {
        "runs": runs,
        "status": {r.run_id: [r.status, r.cause] for r in report.runs},
        "scope_states": scope_states,
        "replayed": replayed,
        "outside": outside,
        "measured_kernels": measured,
        "kernels_outside_regions_in_timing_run": before,
        "names": names,
        "demangled": sorted(ours),
        "profiler_names": prof,
        "demangler": demangler(),
        "matching": report.matching_lines(),
    }


def _provenance(store: Store, runs: list[str], backend: str) -> list[dict[str, Any]]:
    """The settings recorded in the provenance of ``backend`` for these runs."""
    rows = store.rows(
        "SELECT settings FROM provenance WHERE run_id IN (SELECT unnest(?::VARCHAR[])) AND backend = ?", [runs, backend]
    )
    out = []
    for (settings,) in rows:
        try:
            value = json.loads(settings) if isinstance(settings, str) else settings
        except ValueError:
            value = {"raw": str(settings)}
        out.append(value if isinstance(value, dict) else {"value": value})
    return out


def _scope_state(run_folder: Path) -> dict[str, Any] | None:
    """The ncu child's nvtx-scope.json (argus_lab.run.nvtx_scope.STATE_FILE), None when it wrote none."""
    try:
        value = json.loads((run_folder / "nvtx-scope.json").read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python scripts/gpu/ncu_scope_compiler_summary.py OUT", file=sys.stderr)
        return 2
    folder = Path(argv[0])
    out: dict[str, Any] = {}
    _section("1. autotuned matmul, counters with instances=1:", out, "autotune_ncu", lambda: autotune_ncu(folder))
    _section("2. autotuned matmul, the first instance", out, "autotune_first", lambda: autotune_first_instance(folder))
    _section("3. torch.compile'd MLP: Triton facts and SASS mix", out, "compiled", lambda: compiled(folder))
    _section("4. model built before its first region: ncu and names", out, "model", lambda: model(folder))
    (folder / "issue15-summary.json").write_text(json.dumps(out, indent=1, default=str))
    for name in ("autotune.duckdb", "compiled.duckdb", "model.duckdb"):  # 16 KiB blocks: small enough to keep
        if (folder / name).exists():
            try:
                done = compact(folder / name)
                print(f"compacted {name}: {done.bytes_before:,} -> {done.bytes:,} bytes")
            except Exception as exc:  # an uncompacted store is still evidence (the shell gzips a large one)
                print(f"could not compact {name}: {exc}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
