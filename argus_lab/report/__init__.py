"""The read-only Report and what it is made of.

:mod:`.report` (the :class:`Report`), :mod:`.rows` (its row types and how they are read), :mod:`.sql` and
:mod:`.scope_sql` (its queries and the scope predicate), :mod:`.text` (the text tables), :mod:`.json` (the JSON
form for agents), :mod:`.diff` (two reports against run-to-run noise), :mod:`.coverage` (what was asked for but
not collected or not attributed).  Nothing here writes to the store.
"""

from argus_lab.report.report import TABLES, Report, RunRow, TableName

__all__ = ["TABLES", "Report", "RunRow", "TableName"]
