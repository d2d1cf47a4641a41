"""Read-only look-ups over one evidence store, answered as JSON-ready dicts for the REST handlers.

Values come from the same tables and queries as the :class:`~argus_lab.report.Report`: the join's
``instance_values`` per instance, and the Report's own region, counter, kernel and compiler rows
(:mod:`argus_lab.report.rows`) for a region's summary, so the JupyterLab panel and the Report never disagree.
Every query is parameterized: request values (region paths, run and session ids) are bound, never spliced
into SQL.  Each function opens the store for the length of one call (a short shared-lock, read-only DuckDB
connection through :class:`~argus_lab.store.Store`), so a kernel that writes the store between two calls is
never blocked for long.  Row counts are bounded so that a large store cannot flood the browser.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from argus_lab.report.evidence import source_display

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from argus_lab.report.rows import CompilerRow, CounterRow, KernelRow, RegionRow
    from argus_lab.store import Store

MAX_ROWS = 500
MAX_RUNS = 20
TIME_SIGNALS = ("gpu.time", "host.wall")  # share-of-time signals, preferred first
_JSON_COLUMNS = frozenset({"settings", "env", "versions", "spec", "clocks", "origin"})


def _records(store: Store, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
    def fetch(con: Any) -> tuple[list[str], list[tuple[Any, ...]]]:
        cur = con.execute(sql, list(params))
        return [d[0] for d in cur.description or ()], cur.fetchall()

    names, rows = store.read(fetch)
    out = []
    for row in rows:
        rec = dict(zip(names, row, strict=True))
        for key in _JSON_COLUMNS.intersection(rec):
            rec[key] = _json(rec[key])
        out.append(rec)
    return out


def _json(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def _columns(store: Store, table: str) -> set[str]:
    """The columns a table of this store has (stores written by older versions lack the newer ones)."""
    return {
        r["column_name"]
        for r in _records(store, "SELECT column_name FROM information_schema.columns WHERE table_name = ?", [table])
    }


def sessions(store: Store) -> list[dict[str, Any]]:
    """Sessions, newest first, with their number of runs."""
    return _records(
        store,
        """
        SELECT s.session_id, s.created_ns, s.host, s.user_name, s.argus_version, s.cwd, s.label,
               (SELECT count(*) FROM runs r WHERE r.session_id = s.session_id) AS runs
        FROM sessions s ORDER BY s.created_ns DESC LIMIT ?
        """,
        [MAX_ROWS],
    )


_RUN_COLUMNS = """
    r.run_id, r.session_id, r.request_id, r.plan_id, r.plan_index, r.variant, r.backends, r.signals, r.status,
    r.cause, r.repetitions, r.warmup, r.reps_done, r.started_ns, r.ended_ns,
    (r.ended_ns - r.started_ns) / 1e9 AS seconds, r.reason, q.text AS request
"""


def runs(store: Store, session: str | None = None) -> list[dict[str, Any]]:
    """Runs, newest first (optionally of one session), with status, the request they served and a ``title``: what
    they measured as people name it (``cell [5] of quickstart.ipynb``, ``examples/nested.py``, ``step()``)."""
    where = "WHERE r.session_id = ?" if session else ""
    params: list[Any] = [session] if session else []
    origin = "r.origin" if "origin" in _columns(store, "runs") else "NULL AS origin"  # stores older than the column
    found = _records(
        store,
        f"SELECT {_RUN_COLUMNS}, r.workload, {origin}, s.cwd AS session_cwd FROM runs r "
        "LEFT JOIN requests q ON q.request_id = r.request_id LEFT JOIN sessions s ON s.session_id = r.session_id "
        f"{where} ORDER BY r.started_ns DESC, r.plan_index DESC LIMIT ?",
        [*params, MAX_ROWS],
    )
    for rec in found:
        rec["title"] = run_title(rec["workload"] or "", rec.pop("session_cwd") or "")
    return found


def run_title(workload: str, cwd: str = "") -> str:
    """A run's workload as a short title: a script (or an imported trace) by its path relative to the session's
    folder (the project), a callable by its name, a notebook cell by its cell label (stored as the workload); the
    rest as stored."""
    base = cwd.rstrip("/") + "/" if cwd else ""

    def relative(path: str) -> str:
        return path[len(base) :] if base and path.startswith(base) else path.rsplit("/", 1)[-1]

    if workload.startswith("python "):
        script, _, args = workload[len("python ") :].partition(" ")
        return f"{relative(script)} {args}".strip()
    if workload.startswith("/"):  # an imported trace: its file
        return f"imported {relative(workload)}"
    module, sep, name = workload.partition(":")
    if sep and module.replace(".", "").replace("_", "").isalnum() and " " not in name:
        short = name.rsplit(".", 1)[-1]
        where = "" if module == "__main__" else f" in {module}"
        return f"a lambda{where}" if short == "<lambda>" else f"{short}(){where}"
    return workload or "(workload not recorded)"


def run_detail(store: Store, run_id: str) -> dict[str, Any] | None:
    """One run with its provenance, the plan and request it belonged to, its sibling runs and artifacts."""
    origin = "r.origin" if "origin" in _columns(store, "runs") else "NULL AS origin"  # stores older than the column
    found = _records(
        store,
        f"SELECT {_RUN_COLUMNS}, r.settings, r.workload, r.command, r.env, r.versions, r.host, r.pid, {origin} "
        "FROM runs r LEFT JOIN requests q ON q.request_id = r.request_id WHERE r.run_id = ?",
        [run_id],
    )
    if not found:
        return None
    run: dict[str, Any] = found[0]
    cwd = _records(store, "SELECT cwd FROM sessions WHERE session_id = ?", [run["session_id"]])
    run["title"] = run_title(run["workload"] or "", (cwd[0]["cwd"] or "") if cwd else "")
    plan = _records(store, "SELECT plan_id, text, spec FROM plans WHERE plan_id = ?", [run["plan_id"]])
    request = _records(
        store, "SELECT request_id, text, spec, created_ns FROM requests WHERE request_id = ?", [run["request_id"]]
    )
    siblings = _records(
        store,
        "SELECT run_id, plan_index, status, backends, signals, reason FROM runs WHERE plan_id = ? ORDER BY plan_index",
        [run["plan_id"]],
    )
    return {
        "run": run,
        "provenance": _records(
            store,
            "SELECT provenance_id, backend, backend_version, settings, clocks, timestamps FROM provenance "
            "WHERE run_id = ? ORDER BY backend",
            [run_id],
        ),
        "plan": plan[0] if plan else None,
        "request": request[0] if request else None,
        "plan_runs": siblings,
        "artifacts": _records(
            store, "SELECT kind, path, sha256, bytes, note FROM artifacts WHERE run_id = ? ORDER BY kind", [run_id]
        ),
    }


_PATH_TOTALS = """
WITH inst AS (
    SELECT i.run_id, i.path, coalesce(i.parent_instance_id, 0) = 0 AS is_root, v.signal, v.inclusive AS value,
           coalesce(i.warmup, false) AS warm,
           coalesce((i.run_id, i.instance_id) IN (SELECT run_id, instance_id FROM _r_minor), false) AS minor
    FROM region_instances i
    JOIN instance_values v ON v.run_id = i.run_id AND v.instance_id = i.instance_id
    WHERE v.signal IN (SELECT unnest(?::VARCHAR[])) AND v.inclusive IS NOT NULL
)
SELECT inst.run_id, inst.path, inst.signal, sum(inst.value) FILTER (WHERE NOT warm AND NOT minor) AS total,
       count(*) FILTER (WHERE NOT warm AND NOT minor) AS n, count(*) FILTER (WHERE warm) AS warmup,
       quantile_cont(inst.value, 0.5) FILTER (WHERE NOT warm AND NOT minor) AS median,
       quantile_cont(inst.value, 0.25) FILTER (WHERE NOT warm AND NOT minor) AS p25,
       quantile_cont(inst.value, 0.75) FILTER (WHERE NOT warm AND NOT minor) AS p75,
       any_value(r.started_ns) AS started_ns,
       (SELECT sum(value) FROM inst j WHERE j.run_id = inst.run_id AND j.signal = inst.signal AND j.is_root
                                        AND NOT j.warm) AS root
FROM inst JOIN runs r ON r.run_id = inst.run_id
GROUP BY inst.run_id, inst.path, inst.signal
"""


def _path_totals(store: Store) -> list[dict[str, Any]]:
    """:data:`_PATH_TOTALS` over the main kernel-sequence group of each path (``_r_minor``: the instances of the
    other groups, as the Report leaves them out of its statistics)."""
    from argus_lab.report.rows import minor_instances

    def fetch(con: Any) -> list[dict[str, Any]]:
        runs = [r[0] for r in con.execute("SELECT run_id FROM runs").fetchall()]
        minor_instances(con, runs)
        cur = con.execute(_PATH_TOTALS, [list(TIME_SIGNALS)])
        names = [d[0] for d in cur.description or ()]
        return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    out: list[dict[str, Any]] = store.read(fetch)
    return out


def regions(store: Store, session: str | None = None) -> list[dict[str, Any]]:
    """Every region path seen, with its numbers from the latest run that timed it, as the report of that run shows
    them (runs are never pooled: a path measured by unrelated workloads would mix them).

    ``instances``, ``warmup`` and ``median`` are that run's measured instances of the path's main kernel-sequence
    group (the Report's statistics), its warm-up instances (kept apart) and the median of their time (``gpu.time``
    where the run measured it, else ``host.wall``); ``share`` is their summed time over that of the run's top-level
    instances; ``all_instances`` and ``runs`` count every run of the store (warm-up included); ``p25`` and ``p75``
    the quartiles of that time; ``parent_share`` its summed time over that of its parent path in the same run (None
    at the top level).  ``mean`` (the same run's mean) stays for older clients.
    """
    where = "WHERE r.session_id = ?" if session else ""
    params: list[Any] = [session] if session else []
    seen = _records(
        store,
        f"""
        SELECT i.path, any_value(g.name) AS name, any_value(g.kind) AS kind, any_value(g.file) AS file,
               any_value(g.line) AS line, count(*) AS all_instances, count(DISTINCT i.run_id) AS runs,
               max(r.started_ns) AS last_ns, any_value(s.cwd) AS cwd
        FROM region_instances i JOIN runs r ON r.run_id = i.run_id
        LEFT JOIN regions g ON g.region_id = i.region_id
        LEFT JOIN sessions s ON s.session_id = r.session_id
        {where} GROUP BY i.path ORDER BY i.path LIMIT ?
        """,
        [*params, MAX_ROWS],
    )
    totals = _path_totals(store)
    total_of = {(t["run_id"], t["path"], t["signal"]): t["total"] for t in totals}
    best: dict[str, tuple[int, int, dict[str, Any]]] = {}
    for t in totals:
        if not t["n"]:
            continue
        rank = (t["started_ns"] or 0, -TIME_SIGNALS.index(t["signal"]))
        if t["path"] not in best or rank > best[t["path"]][:2]:
            best[t["path"]] = (*rank, t)
    for rec in seen:
        # where it was declared as the report says it: relative to the run's folder, an IPython input as such
        rec["file"] = source_display(str(rec["file"] or ""), str(rec.pop("cwd") or "")) or None
        hit = best.get(rec["path"])
        top = hit[2] if hit else None
        rec["share"] = (top["total"] / top["root"]) if top and top["root"] else None
        rec["share_signal"] = top["signal"] if top else None
        rec["share_run"] = top["run_id"] if top else None
        rec["instances"] = int(top["n"]) if top else 0
        rec["warmup"] = int(top["warmup"]) if top else 0
        rec["median"] = top["median"] if top else None
        rec["mean"] = (top["total"] / top["n"]) if top and top["n"] else None
        rec["p25"] = top["p25"] if top else None
        rec["p75"] = top["p75"] if top else None
        parent = rec["path"].rpartition("/")[0]
        above = total_of.get((top["run_id"], parent, top["signal"])) if top and parent else None
        rec["parent"] = parent or None
        rec["parent_share"] = (top["total"] / above) if top and above else None
    return seen


def region_detail(store: Store, path: str, run_id: str | None = None) -> dict[str, Any] | None:
    """A region's drill-down: per-signal summary, instances, kernels, counters, facts and attribution classes.

    Each summary and counter row says how its signal combines (``agg``, ``combined``); each kernel row carries its
    counters and whether it belongs to the main kernel-sequence group (``main_group``); ``groups`` lists the path's
    instance groups where its instances ran different kernel sequences (the main group's statistics are shown).

    The summary, counters, kernels and facts of each run are the Report's rows of that run (its request's scope
    applied), restricted to the region; per-instance values are the join's inclusive values.  At most
    :data:`MAX_RUNS` runs (the newest) are summarised.
    """
    from argus_lab.report import rows as rt

    run_clause = "AND i.run_id = ?" if run_id else ""
    rp: list[Any] = [path, run_id] if run_id else [path]
    inst_filter = f"i.path = ? {run_clause}"
    have = _columns(store, "region_instances")
    thread_name = "i.thread_name" if "thread_name" in have else "NULL AS thread_name"  # older stores lack it
    instances = _records(
        store,
        f"""
        SELECT i.run_id, i.instance_id, i.instance_index, i.parent_instance_id, i.repetition, i.warmup,
               i.pid, coalesce(i.rank, 0) AS rank, {thread_name}, i.end_ns - i.start_ns AS duration_ns,
               CASE WHEN i.cpu_ns >= 0 THEN i.cpu_ns END AS cpu_ns,
               i.error
        FROM region_instances i JOIN runs r ON r.run_id = i.run_id
        WHERE {inst_filter} ORDER BY r.started_ns DESC, i.instance_id LIMIT ?
        """,
        [*rp, MAX_ROWS],
    )
    if not instances:
        return None
    values = _records(
        store,
        f"""
        SELECT v.run_id, v.instance_id, v.signal, v.inclusive AS value, v.unit FROM instance_values v
        JOIN region_instances i ON i.run_id = v.run_id AND i.instance_id = v.instance_id
        WHERE {inst_filter} LIMIT ?
        """,
        [*rp, MAX_ROWS * 8],
    )
    by_instance: dict[tuple[str, int], dict[str, float]] = {}
    for v in values:
        by_instance.setdefault((v["run_id"], v["instance_id"]), {})[v["signal"]] = v["value"]
    for inst in instances:
        inst["values"] = by_instance.get((inst["run_id"], inst["instance_id"]), {})
    runs = list(dict.fromkeys(i["run_id"] for i in instances))[:MAX_RUNS]
    summary: list[dict[str, Any]] = []
    counters: list[dict[str, Any]] = []
    kernels: list[dict[str, Any]] = []
    facts: list[dict[str, Any]] = []
    groups: list[dict[str, Any]] = []
    # the kernels of every run shown, read together as a Report over them reads them: an ncu run's counters reach the
    # timing run's kernels by (path, ordinal, name), also when the replay was a request of its own
    _, all_scope = rt.read_scopes(store, runs)
    # the path's rows alone, folded per run and kernel name as DuckDB hands them over (a long run's table is never
    # held whole)
    every_kernel = rt.fold_kernels(store, runs, lambda rows: _kernels_by_run(path, rows), all_scope, path=path)
    for run in runs:
        _, scope = rt.read_scopes(store, [run])
        found = rt.read_summary(store, [run], scope)
        summary += [_summary_row(run, r) for r in found.regions if r.path == path]
        counters += [_counter_row(run, c) for c in found.counters if c.path == path]
        ran = every_kernel.get(run, [])
        kernels += ran
        groups += [
            {
                "run_id": run,
                "group": g.group,
                "majority": g.majority,
                "instances": g.instances,
                "indexes": g.indexes,
                "kernels": g.kernels,
                "note": g.note,
            }
            for g in rt.read_groups(store, [run], scope)
            if g.path == path
        ]
        names = {k["name"] for k in ran}
        facts += [f for c in rt.read_compiler(store, [run]) if c.name in names for f in _fact_rows(c)]
    kernels.sort(key=lambda k: (not k["main_group"], -k["total_ns"]))
    attributions = _records(
        store,
        f"""
        SELECT a.class, a.evidence, count(*) AS n, avg(a.weight) AS mean_weight, any_value(a.reason) AS reason
        FROM attributions a JOIN region_instances i ON i.run_id = a.run_id AND i.instance_id = a.instance_id
        WHERE {inst_filter} GROUP BY a.class, a.evidence ORDER BY a.class, a.evidence
        """,
        rp,
    )
    return {
        "path": path,
        "run_id": run_id,
        "summary": summary,
        "instances": instances,
        "kernels": kernels[:MAX_ROWS],
        "counters": counters,
        "facts": facts[:MAX_ROWS],
        "groups": groups,
        "attributions": attributions,
        "truncated": len(instances) >= MAX_ROWS,
    }


def _summary_row(run_id: str, r: RegionRow) -> dict[str, Any]:
    """A Report region row of one run, as the panel shows it, with how the signal combines (``agg``; ``combined``
    in the report's words)."""
    return {
        **_combined(r.agg),
        "run_id": run_id,
        "signal": r.signal,
        "n": r.n,
        "instances": r.instances,
        "median": r.median,
        "p25": r.p25,
        "p75": r.p75,
        "min": r.min,
        "max": r.max,
        "exclusive_median": r.exclusive_median,
        "unit": r.unit,
        "attribution": r.attribution,
        "backend": r.backend,
    }


def _combined(agg: str) -> dict[str, Any]:
    """How a value combines over kernels and instances: the catalog's rule and the words the report uses for it."""
    from argus_lab.plan.catalog import AGGREGATION_TEXT

    return {"agg": agg, "combined": AGGREGATION_TEXT.get(agg, agg)}


def _counter_row(run_id: str, c: CounterRow) -> dict[str, Any]:
    """A Report counter row of one run, as the panel shows it: a per-kernel fact (a launch attribute) carries its
    range over the region's kernels (``kernel_range``), as the report prints it."""
    from argus_lab.report.rows import describe

    return {
        **_combined(c.agg),
        "kernel_range": list(c.kernel_range) if c.kernel_range is not None else None,
        "run_id": run_id,
        "signal": c.signal,
        "n": c.instances,
        "median": c.median,
        "p25": c.p25,
        "p75": c.p75,
        "exclusive_median": c.exclusive_median,
        "unit": c.unit,
        "attribution": describe(c.shares),
    }


def _kernels_by_run(path: str, rows: Iterable[KernelRow]) -> dict[str, list[dict[str, Any]]]:
    """The Report's kernel rows of ``path`` (every ordinal and class), summed per run, kernel name and instance group,
    taking the rows one at a time: ``main_group`` is false for the launches of instances outside the path's main
    kernel-sequence group (a first call that autotuned), which the panel shows apart, collapsed, as the report does.
    ``counters`` are the ncu counters joined to the kernel by ordinal (``{signal: [median over its ordinals,
    unit]}``)."""
    by: dict[tuple[str, str, bool], dict[str, Any]] = {}
    for k in rows:
        if k.path == path:
            _add_kernel(by.setdefault((k.run_id, k.name, k.main_group), {}), k)
    out: dict[str, list[dict[str, Any]]] = {}
    for (run, _, _), e in by.items():
        out.setdefault(run, []).append(_finished(e))
    return out


def _add_kernel(e: dict[str, Any], k: KernelRow) -> None:
    """One kernel row added to the panel's row of its kernel name and instance group (``e``, empty at first)."""
    if not e:
        e.update(
            {
                "run_id": k.run_id,
                "name": k.name,
                "display_name": k.display_name or k.name,
                "launches": 0,
                "total_ns": 0.0,
                "registers": k.registers,
                "main_group": k.main_group,
                "counters": {},
                "grid": k.grid,
                "block": k.block,
                "classes": k.classes,
            }
        )
    e["launches"] += k.launches
    e["total_ns"] += k.total_ns
    for signal, (value, unit) in k.counters.items():
        e["counters"].setdefault(signal, []).append((value, unit))
    if k.classes not in e["classes"].split(","):
        e["classes"] += "," + k.classes


def _finished(e: dict[str, Any]) -> dict[str, Any]:
    """A panel kernel row with its mean duration and the median of each counter over its ordinals."""
    e["mean_ns"] = e["total_ns"] / e["launches"] if e["launches"] else None
    e["counters"] = {s: [_median([v for v, _ in vs]), vs[0][1]] for s, vs in sorted(e["counters"].items())}
    return e


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


FACT_SIGNALS = (
    ("compile.registers", "registers", "register/thread"),
    ("compile.spills", "spill_words", "word/thread"),
    ("compile.shared", "shared_bytes", "byte"),
    ("compile.num_warps", "num_warps", "count"),
    ("compile.num_stages", "num_stages", "count"),
    ("compile.sass_instructions", "sass_instructions", "count"),
)
"""The Report's compiler columns as the catalog's ``compile.*`` signals: (signal, column, unit)."""


def _fact_rows(c: CompilerRow) -> list[dict[str, Any]]:
    """A Report compiler row as (kernel, source, signal, value, unit) rows."""
    return [
        {
            "kernel_key": c.name,
            "display_name": c.display_name or c.name,
            "binary_hash": c.binary_hash,
            "source": c.source,
            "signal": sig,
            "value": float(v),
            "unit": unit,
            "run_id": c.run_id,
        }
        for sig, col, unit in FACT_SIGNALS
        if (v := getattr(c, col)) is not None
    ]
