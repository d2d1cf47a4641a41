"""A report exported as one standalone HTML file (``argus-lab export report.html``): the bundle built for export
(:mod:`argus_lab.views.bundle`) laid out as a page (:mod:`argus_lab.views.html`), written whole, then renamed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from argus_lab.errors import ExportError
from argus_lab.views.bundle import EXPORT, build
from argus_lab.views.html import standalone_html
from argus_lab.views.target import check_file, written_file


def export(report: Any, path: str | Path, title: str = "") -> Path:
    """Write ``report`` (a :class:`~argus_lab.report.Report`) as one standalone HTML file; returns the path."""
    out = Path(path)
    if out.suffix.lower() not in (".html", ".htm"):
        msg = f"the export path {str(out)!r} should end in .html, e.g. `report.html`"
        raise ExportError(msg)
    check_file(out, "~/report.html")  # refuse an unwritable place before the (long) build, not after it
    page = standalone_html(build(report, EXPORT, title))
    with written_file(out) as tmp:  # written whole, then renamed: a failed export leaves no half file
        tmp.write_text(page, encoding="utf-8")
    return out
