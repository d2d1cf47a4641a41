"""Export: runs of a store as a Perfetto-readable trace, as Parquet files, or as a standalone HTML report.

One function, :func:`export`, behind ``argus-lab export``, ``%argus export`` and the JupyterLab panel's export
button (the server's ``GET argus-lab/export``).  The format is given, or read from the output's name:

* ``perfetto``: ``*.json`` or ``*.json.gz``, Chrome-trace JSON that ui.perfetto.dev, Perfetto's trace processor and
  chrome://tracing open (:func:`argus_lab.views.perfetto.write_trace`; every run of the report in one file);
* ``parquet``: a folder (a name without a suffix, or ``*.parquet``), one Parquet file per table of the store,
  only the report's rows (:func:`argus_lab.views.perfetto.write_parquet`);
* ``html``: ``*.html``, the report as one page that opens offline (:func:`argus_lab.views.html_file.export`).

Without run ids it exports the runs of the store's *latest request that measured something*: a request whose
every run was skipped (GPU signals on a machine without a GPU) is passed over, and the export says so in a note
naming the skipped request, its runs and why they were skipped, and how to export it anyway (``--run RUN_ID``).
When every request was skipped, the latest one is exported, with the same note.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from argus_lab.errors import ExportError
from argus_lab.store import Store
from argus_lab.views.exporters import EXPORTERS

FORMATS: tuple[str, ...] = tuple(EXPORTERS)
"""The export formats."""


@dataclass(frozen=True)
class ExportResult:
    """What an export wrote."""

    path: Path
    format: str
    run_ids: tuple[str, ...]
    files: tuple[Path, ...]
    counts: dict[str, int] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    """What the reader should know about the runs chosen (a newer request that measured nothing, passed over)."""

    def text(self) -> str:
        """One line for a terminal or a notebook, then a line per note."""
        size = sum(f.stat().st_size for f in self.files if f.exists())
        hint = EXPORTERS[self.format].hint
        what = f"{len(self.files)} {hint}" if EXPORTERS[self.format].folder else hint
        runs = ", ".join(self.run_ids) if len(self.run_ids) <= 3 else f"{len(self.run_ids)} runs"
        return "\n".join(
            [f"wrote {self.path} ({size / 1e6:.1f} MB, {self.format}, {runs}); {what}"]
            + [f"note: {n}" for n in self.notes]
        )


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
    choice = choose_runs(st, run_ids)
    runs, notes = choice.run_ids, choice.notes
    check_target(path, kind)  # before the (long) export: one message naming the problem and the fix
    written = EXPORTERS[kind].write(st, runs, path, title)
    return ExportResult(written.path, kind, runs, written.files, written.counts, notes)


def check_target(path: Path, kind: str) -> None:
    """Refuse a target that an export of ``kind`` cannot write (:mod:`argus_lab.views.target`), before the export."""
    from argus_lab.views.target import check_file, check_folder

    exporter = EXPORTERS[kind]
    (check_folder if exporter.folder else check_file)(path, exporter.example)


@dataclass(frozen=True)
class RunChoice:
    """The runs an export takes, and what the reader should know about the choice."""

    run_ids: tuple[str, ...]
    notes: tuple[str, ...] = ()


def resolve_runs(store: Store, run_ids: Sequence[str] | None) -> tuple[str, ...]:
    """``run_ids`` checked against the store, or the runs of its latest request that measured something."""
    return choose_runs(store, run_ids).run_ids


def choose_runs(store: Store, run_ids: Sequence[str] | None) -> RunChoice:
    """``run_ids`` checked against the store; without them, the runs of the latest request that measured something,
    with a note for each newer request that was skipped (see the module docstring)."""
    from argus_lab.report import runs as queries

    if run_ids:
        queries.check_known(store, run_ids, ExportError)
        return RunChoice(tuple(dict.fromkeys(run_ids)))
    requests = store.records(queries.REQUESTS_NEWEST_FIRST)  # a missing store says so (StoreError)
    if not requests:
        msg = f"the store {store.path} has no runs to export; measure or import something first"
        raise ExportError(msg)
    measured = next((q for q in requests if any(s != "skipped" for s in q["statuses"])), None)
    chosen = measured or requests[0]
    passed_over = requests[: requests.index(chosen)] if measured else [chosen]
    notes = tuple(_skipped_note(q, measured) for q in passed_over)
    return RunChoice(tuple(chosen["run_ids"]), notes)


def _skipped_note(request: dict[str, Any], measured: dict[str, Any] | None) -> str:
    """A request whose every run was skipped: what it asked, why it was skipped, what was exported instead."""
    ids = list(request["run_ids"])
    asked = "; ".join(x for x in (request["workload"], request["text"]) if x)
    why = "; ".join(request["causes"] or []) or "no cause recorded"
    runs = f"run {ids[0]} was" if len(ids) == 1 else f"runs {', '.join(ids)} were"
    head = f"request {request['request_id']} ({asked}) measured nothing: {runs} skipped ({why}). "
    if measured is None:
        return head + "No request of this store measured anything, so this one is exported: its report says why."
    pick = " ".join(f"--run {r}" for r in ids)
    return (
        head + f"Exported the latest request that measured something instead: {measured['request_id']} "
        f"(run(s) {', '.join(measured['run_ids'])}). To export the skipped one anyway, name its runs: {pick} "
        "(run_ids= in Python)"
    )


__all__ = [
    "FORMATS",
    "ExportError",
    "ExportResult",
    "RunChoice",
    "check_target",
    "choose_runs",
    "export",
    "format_of",
    "resolve_runs",
]


DOWNLOAD_SUFFIX = {"perfetto": "json", "html": "html", "parquet": "zip"}
"""The suffix of each format's file sent as one download (Parquet: a zip of the folder of one file per table)."""


@dataclass(frozen=True)
class DownloadFile:
    """An export written as one file in a temporary folder of its own (the caller removes ``folder``)."""

    path: Path
    folder: Path


def export_download(store: str | Store | None, run_ids: Sequence[str], fmt: str) -> DownloadFile:
    """``run_ids`` of ``store`` exported by :func:`export` as one file to send (the server's ``GET export``): a
    Perfetto trace, an HTML report or the Parquet folder zipped, in a new temporary folder."""
    folder = Path(tempfile.mkdtemp(prefix="argus-export-"))
    try:
        if fmt == "parquet":
            export(store, folder / "tables", fmt="parquet", run_ids=list(run_ids))
            archive = shutil.make_archive(str(folder / "tables"), "zip", folder / "tables")
            return DownloadFile(Path(archive), folder)
        written = export(store, folder / f"export.{DOWNLOAD_SUFFIX[fmt]}", fmt=fmt, run_ids=list(run_ids))
        return DownloadFile(written.path, folder)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
