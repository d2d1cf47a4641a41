"""Plain tables for the notebook: deterministic ``text/plain`` and an escaped ``text/html`` table."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from argus_lab.report.text import table
from argus_lab.views.escape import html_text

if TYPE_CHECKING:
    from argus_lab.report.evidence import Table


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, list | tuple):
        return ",".join(str(x) for x in v)
    return "" if v is None else str(v)


def text_table(columns: tuple[str, ...] | list[str], rows: list[list[Any]] | tuple[tuple[Any, ...], ...]) -> str:
    """The cells as text, in the one text-table layout (:func:`argus_lab.report.text.table`)."""
    return table(list(columns), [[_cell(v) for v in r] for r in rows])


def html_table(columns: tuple[str, ...] | list[str], rows: list[list[Any]] | tuple[tuple[Any, ...], ...]) -> str:
    """An HTML table with every cell escaped."""
    head = "".join(f"<th>{html_text(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{html_text(_cell(v))}</td>" for v in r) + "</tr>" for r in rows)
    return f'<table class="argus-table"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


class TableView:
    """A :class:`~argus_lab.report.evidence.Table` for display (``%argus runs``)."""

    def __init__(self, table: Table, title: str = "") -> None:
        self.table = table
        self.title = title

    def _note(self) -> str:
        t = self.table
        return f"{self.title}: {len(t.rows)} of {t.total} row(s)" if self.title else f"{len(t.rows)} of {t.total}"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        t = self.table
        return {
            "text/plain": self._note() + "\n" + text_table(t.columns, t.rows),
            "text/html": f"<p>{html_text(self._note())}</p>" + html_table(t.columns, t.rows),
        }

    def __repr__(self) -> str:
        return self._note() + "\n" + text_table(self.table.columns, self.table.rows)
