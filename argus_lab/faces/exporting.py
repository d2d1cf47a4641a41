"""Export: runs of a store as a Perfetto-readable trace, as Parquet files, or as a standalone HTML report.

One function, :func:`export`, behind ``argus-lab export``, ``%argus export`` and the JupyterLab panel's export
button (the server's ``GET argus-lab/export``).  The format is given, or read from the output's name:

* ``perfetto``: ``*.json`` or ``*.json.gz``, Chrome-trace JSON that ui.perfetto.dev, Perfetto's trace processor and
  chrome://tracing open (:func:`argus_lab.views.perfetto.write_trace`; every run of the report in one file);
* ``parquet``: a folder (a name without a suffix, or ``*.parquet``), one Parquet file per table of the store,
  only the report's rows (:func:`argus_lab.views.perfetto.write_parquet`);
* ``html``: ``*.html``, the report as one page that opens offline (:func:`argus_lab.views.html.export`).
"""

from __future__ import annotations

import gzip
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from argus_lab.errors import ArgusError
from argus_lab.store import Store

FORMATS: tuple[str, ...] = ("perfetto", "parquet", "html")
"""The export formats."""


class ExportError(ArgusError, ValueError):
    """An export that cannot be done as asked (the message says how to ask)."""


@dataclass(frozen=True)
class ExportResult:
    """What an export wrote."""

    path: Path
    format: str
    run_ids: tuple[str, ...]
    files: tuple[Path, ...]
    counts: dict[str, int] = field(default_factory=dict)

    def text(self) -> str:
        """One line for a terminal or a notebook."""
        size = sum(f.stat().st_size for f in self.files if f.exists())
        what = {
            "perfetto": "open it in https://ui.perfetto.dev (or chrome://tracing)",
            "parquet": f"{len(self.files)} Parquet file(s), one per table",
            "html": "it opens offline in any browser",
        }[self.format]
        runs = ", ".join(self.run_ids) if len(self.run_ids) <= 3 else f"{len(self.run_ids)} runs"
        return f"wrote {self.path} ({size / 1e6:.1f} MB, {self.format}, {runs}); {what}"


def format_of(out: str | Path, fmt: str | None = None) -> str:
    """The export format: ``fmt`` when given, else from ``out``'s name (see the module's docstring)."""
    if fmt:
        f = fmt.lower()
        if f in ("json", "chrome", "trace"):
            f = "perfetto"
        if f not in FORMATS:
            msg = f"unknown export format {fmt!r}; use one of {', '.join(FORMATS)} (e.g. --format perfetto)"
            raise ExportError(msg)
        return f
    name = Path(out).name.lower()
    if name.endswith((".json", ".json.gz")):
        return "perfetto"
    if name.endswith((".html", ".htm")):
        return "html"
    if name.endswith(".parquet") or "." not in name or Path(out).is_dir():
        return "parquet"
    msg = (
        f"cannot tell the export format from {str(out)!r}; name it *.json (Perfetto trace), *.html (report) or a "
        "folder (Parquet), or pass the format (--format perfetto|parquet|html)"
    )
    raise ExportError(msg)


def export(
    store: Store | str | Path | None,
    out: str | Path,
    *,
    fmt: str | None = None,
    run_ids: Sequence[str] | None = None,
    title: str = "",
) -> ExportResult:
    """Export ``run_ids`` of ``store`` (default: the runs of its latest request) to ``out``."""
    st = store if isinstance(store, Store) else Store(store)
    kind = format_of(out, fmt)
    path = Path(out)
    runs = resolve_runs(st, run_ids)
    if kind == "html":
        from argus_lab.report import Report
        from argus_lab.views.html import export as export_html

        written = export_html(Report(st, list(runs)), path, title=title)
        return ExportResult(written, kind, runs, (written,))
    if kind == "parquet":
        from argus_lab.views.perfetto import write_parquet

        files = write_parquet(st, path, runs)
        return ExportResult(path, kind, runs, tuple(files))
    from argus_lab.views.perfetto import write_trace

    if path.name.lower().endswith(".gz"):
        with tempfile.TemporaryDirectory(prefix="argus-export-") as tmp:
            plain = Path(tmp) / "trace.json"
            counts = write_trace(st, runs, plain)
            path.parent.mkdir(parents=True, exist_ok=True)
            with plain.open("rb") as src, gzip.open(path, "wb", 6) as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        counts = write_trace(st, runs, path)
    return ExportResult(path, kind, runs, (path,), counts)


def resolve_runs(store: Store, run_ids: Sequence[str] | None) -> tuple[str, ...]:
    """``run_ids`` checked against the store, or the runs of its latest request."""
    from argus_lab.store import queries

    if run_ids:
        known = {r[0] for r in store.rows("SELECT run_id FROM runs")}
        missing = [r for r in run_ids if r not in known]
        if missing:
            msg = (
                f"no run {missing[0]!r} in {store.path}; list its runs with `argus-lab show --all --store "
                f"{store.path}` (or `%argus runs`)"
            )
            raise ExportError(msg)
        return tuple(dict.fromkeys(run_ids))
    latest = store.rows(queries.LATEST_REQUEST)
    runs = tuple(r[0] for r in store.rows(queries.RUNS_OF_REQUEST, [latest[0][0]])) if latest else ()
    if not runs:
        msg = f"the store {store.path} has no runs to export; measure or import something first"
        raise ExportError(msg)
    return runs


__all__ = ["FORMATS", "ExportError", "ExportResult", "export", "format_of", "resolve_runs"]
