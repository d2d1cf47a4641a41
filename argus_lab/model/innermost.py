"""The innermost-instance rule: which region instance is innermost on a thread at a moment, written once for the
join (numpy, :mod:`argus_lab.join.timeline`) and the importers (SQL, :mod:`argus_lab.importers.events`).

A thread's timeline holds one event per region entry (the entered instance becomes innermost) keyed
``t * 2 + 1`` and one per exit (its parent becomes innermost again, 0 for none) keyed ``t * 2``: at one nanosecond
an exit comes before an entry.  What is innermost at a moment ``q`` is the last event whose key is at or before
``q * 2 + 1`` (an instance entered at ``q`` holds a launch at ``q``; one that exited at ``q`` does not).
"""

from __future__ import annotations

from typing import Any


def entry_key(t: Any) -> Any:
    """The key of an entry at ``t`` (ns; an int or a numpy array)."""
    return t * 2 + 1


def exit_key(t: Any) -> Any:
    """The key of an exit at ``t`` (ns; an int or a numpy array)."""
    return t * 2


def moment_key(q: Any) -> Any:
    """The key a moment ``q`` is looked up by: the last event at or before it is what is innermost then."""
    return q * 2 + 1


def entry_key_sql(t: str) -> str:
    """:func:`entry_key` of the SQL expression ``t``."""
    return f"{t} * 2 + 1"


def exit_key_sql(t: str) -> str:
    """:func:`exit_key` of the SQL expression ``t``."""
    return f"{t} * 2"


def moment_key_sql(q: str) -> str:
    """:func:`moment_key` of the SQL expression ``q``."""
    return f"{q} * 2 + 1"


__all__ = ["entry_key", "entry_key_sql", "exit_key", "exit_key_sql", "moment_key", "moment_key_sql"]
