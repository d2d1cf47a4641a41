"""Which signals a run's request named: a value is stored by the join and shown by the report only where its
request asked for it.

A request names signals or patterns (``gpu.*``) over all of its runs (counters land on the timing run's instances,
so a run's own list is not enough); a pattern asks for what it matches, as a glob; a run whose request names
nothing (an import) keeps and shows every value it has.  The rule is written here once, as SQL (the list of each
run's request, :data:`REQUEST_SIGNALS` and :func:`asked_list`; the test, :func:`asked_predicate`) and as the same
test in Python (:func:`is_asked`) for the join's per-record passes.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence

REQUEST_SIGNALS = """(SELECT request_id, flatten(list(coalesce(signals, []))) AS asked FROM runs
               WHERE request_id IS NOT NULL GROUP BY request_id)"""
"""Every signal named by the runs of each request (``request_id``, ``asked``): join it to ``runs`` by request."""


def asked_list(request: str, run: str) -> str:
    """SQL: the signals the request of a run named, ``request`` being :data:`REQUEST_SIGNALS` joined under that
    alias and ``run`` the run's ``runs`` row (its own list when it has no request); empty: not known."""
    return f"coalesce({request}.asked, {run}.signals, [])"


def asked_predicate(signal: str, request: str, run: str) -> str:
    """SQL: whether the value of ``signal`` (an expression) was asked for (see :func:`asked_list`)."""
    names = asked_list(request, run)
    return f"(len({names}) = 0 OR len(list_filter({names}, lambda p: {signal} GLOB p)) > 0)"


def is_asked(names: Sequence[str], signal: str) -> bool:
    """Whether ``signal`` was asked for by a request that named ``names`` (nothing named: every signal)."""
    return not names or any(fnmatch.fnmatchcase(signal, n) for n in names)


__all__ = ["REQUEST_SIGNALS", "asked_list", "asked_predicate", "is_asked"]
