"""The export formats behind one interface: each :class:`Exporter` writes runs of a store to a target.

``perfetto`` (Chrome-trace JSON, gzipped when the name ends in ``.gz``: :mod:`argus_lab.views.perfetto`),
``parquet`` (a folder of one Parquet file per table) and ``html`` (the report as one offline page:
:mod:`argus_lab.views.html_file`).  :mod:`argus_lab.app.exporting` picks the exporter by format and checks the target
first (``folder``, ``example``); each exporter writes under a temporary name and renames when whole.
"""

from __future__ import annotations

import gzip
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Sequence

    from argus_lab.store import Store


@dataclass(frozen=True)
class Written:
    """What one export wrote: the path it names, the files under it, and counts of what went in (traces)."""

    path: Path
    files: tuple[Path, ...]
    counts: dict[str, int] = field(default_factory=dict)


class Exporter(Protocol):
    """One export format."""

    @property
    def folder(self) -> bool:
        """Whether the target is a folder (else a file)."""
        ...

    @property
    def example(self) -> str:
        """A writable target, named in the message of a target that cannot be written."""
        ...

    @property
    def hint(self) -> str:
        """What to do with what was written (one clause, for the line an export prints)."""
        ...

    def write(self, store: Store, run_ids: Sequence[str], path: Path, title: str) -> Written:
        """Write ``run_ids`` of ``store`` to ``path``."""
        ...


@dataclass(frozen=True)
class PerfettoExporter:
    """Every run in one Chrome-trace JSON file (gzipped for a ``.gz`` name)."""

    folder: bool = False
    example: str = "~/trace.json"
    hint: str = "open it in https://ui.perfetto.dev (or chrome://tracing)"

    def write(self, store: Store, run_ids: Sequence[str], path: Path, title: str) -> Written:
        from argus_lab.views.perfetto import write_trace

        if not path.name.lower().endswith(".gz"):
            return Written(path, (path,), write_trace(store, run_ids, path))
        from argus_lab.views.target import written_file

        with tempfile.TemporaryDirectory(prefix="argus-export-") as tmp:
            plain = Path(tmp) / "trace.json"
            counts = write_trace(store, run_ids, plain)
            with written_file(path) as part, plain.open("rb") as src, gzip.open(part, "wb", 6) as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        return Written(path, (path,), counts)


@dataclass(frozen=True)
class ParquetExporter:
    """One Parquet file per table of the store, only the runs' rows."""

    folder: bool = True
    example: str = "~/tables"
    hint: str = "Parquet file(s), one per table"

    def write(self, store: Store, run_ids: Sequence[str], path: Path, title: str) -> Written:
        from argus_lab.views.perfetto import write_parquet

        return Written(path, tuple(write_parquet(store, path, run_ids)))


@dataclass(frozen=True)
class HtmlExporter:
    """The runs' report as one page that opens offline."""

    folder: bool = False
    example: str = "~/report.html"
    hint: str = "it opens offline in any browser"

    def write(self, store: Store, run_ids: Sequence[str], path: Path, title: str) -> Written:
        from argus_lab.report import Report
        from argus_lab.views.html_file import export

        written = export(Report(store, list(run_ids)), path, title=title)
        return Written(written, (written,))


EXPORTERS: dict[str, Exporter] = {"perfetto": PerfettoExporter(), "parquet": ParquetExporter(), "html": HtmlExporter()}
"""Each export format's exporter."""

__all__ = ["EXPORTERS", "Exporter", "HtmlExporter", "ParquetExporter", "PerfettoExporter", "Written"]
