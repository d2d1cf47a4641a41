"""Comparing two reports: which region values changed beyond run-to-run noise.

The rule (:data:`RULE`), per region path and signal, on the per-instance inclusive values of each report
(warm-up excluded):

* with at least :data:`MIN_N` values on each side, the change is *significant* when a two-sided Mann-Whitney U
  test (normal approximation with tie correction) gives ``p < ALPHA`` **and** the medians differ by at least
  :data:`MIN_CHANGE` of the base median (so that a tiny but consistent shift in millions of instances is not
  called a change);
* with fewer values, or so few that even two completely separated samples could not reach ``p < ALPHA`` (3 against
  3 cannot, 6 against 6 can), the change is not judged (``verdict = "too few values"``);
* a value present in one report only is ``new`` or ``gone`` when the other report measured that signal (for
  other regions), and ``not measured in A`` / ``not measured in B`` when the other report has no value of the
  signal at all (its request did not ask for it, or its run was skipped).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from argus_lab.units import fmt

if TYPE_CHECKING:
    import polars as pl

ALPHA = 0.01
MIN_N = 3
MIN_CHANGE = 0.01
RULE = (
    f"significant = two-sided Mann-Whitney U p < {ALPHA} over per-instance values (>= {MIN_N} per side, and "
    f"enough that p < {ALPHA} is reachable) and |median change| >= {MIN_CHANGE:.0%} of the base median"
)

Key = tuple[str, str]


@dataclass(frozen=True)
class DiffRow:
    """One region path and signal in two reports."""

    path: str
    signal: str
    unit: str
    base_median: float | None
    other_median: float | None
    change: float | None
    """Relative change of the median, ``other / base - 1`` (``None`` when a side is missing or base is 0)."""
    p_value: float | None
    n_base: int
    n_other: int
    significant: bool
    verdict: str
    """``higher``, ``lower``, ``same`` (within noise), ``too few values``, ``new``, ``gone``, ``not measured in A``
    or ``not measured in B``."""


def mann_whitney(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> tuple[float, float]:
    """Two-sided Mann-Whitney U test, normal approximation with tie correction: ``(U of a, p)``."""
    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    n1, n2 = len(x), len(y)
    if n1 == 0 or n2 == 0:
        return math.nan, math.nan
    allv = np.concatenate([x, y])
    order = np.argsort(allv, kind="mergesort")
    sorted_v = allv[order]
    # average ranks of ties
    _, start, counts = np.unique(sorted_v, return_index=True, return_counts=True)
    avg_rank = start + (counts + 1) / 2.0
    ranks = np.empty(len(allv))
    ranks[order] = np.repeat(avg_rank, counts)
    u1 = ranks[:n1].sum() - n1 * (n1 + 1) / 2.0
    n = n1 + n2
    tie = float((counts**3 - counts).sum())
    var = n1 * n2 / 12.0 * ((n + 1) - tie / (n * (n - 1))) if n > 1 else 0.0
    if var <= 0:
        return float(u1), 1.0
    z = (abs(u1 - n1 * n2 / 2.0) - 0.5) / math.sqrt(var)  # continuity correction
    p = math.erfc(max(z, 0.0) / math.sqrt(2.0))
    return float(u1), float(min(1.0, p))


def min_p(n1: int, n2: int) -> float:
    """The smallest p :func:`mann_whitney` can give for samples of these sizes (complete separation, no ties)."""
    n = n1 + n2
    z = (n1 * n2 / 2.0 - 0.5) / math.sqrt(n1 * n2 * (n + 1) / 12.0)
    return math.erfc(z / math.sqrt(2.0))


NOT_MEASURED = ("not measured in A", "not measured in B")


def compare(
    base: Mapping[Key, np.ndarray], other: Mapping[Key, np.ndarray], units: Mapping[Key, str]
) -> tuple[DiffRow, ...]:
    """Diff rows for every (path, signal) in either report (see the module docstring for the rule)."""
    rows = []
    signals_a = {k[1] for k, v in base.items() if len(v)}
    signals_b = {k[1] for k, v in other.items() if len(v)}
    for key in sorted(set(base) | set(other)):
        a, b = base.get(key), other.get(key)
        unit = units.get(key, "")
        if a is None or b is None or len(a) == 0 or len(b) == 0:
            have = a if a is not None and len(a) else b
            med = float(np.median(have)) if have is not None and len(have) else None
            gone = b is None or len(b) == 0
            if gone:
                verdict = "gone" if key[1] in signals_b else NOT_MEASURED[1]
            else:
                verdict = "new" if key[1] in signals_a else NOT_MEASURED[0]
            rows.append(
                DiffRow(
                    path=key[0],
                    signal=key[1],
                    unit=unit,
                    base_median=med if gone else None,
                    other_median=None if gone else med,
                    change=None,
                    p_value=None,
                    n_base=0 if a is None else len(a),
                    n_other=0 if b is None else len(b),
                    significant=False,
                    verdict=verdict,
                )
            )
            continue
        ma, mb = float(np.median(a)), float(np.median(b))
        change = (mb / ma - 1.0) if ma != 0 else (0.0 if mb == 0 else None)
        if len(a) < MIN_N or len(b) < MIN_N or min_p(len(a), len(b)) >= ALPHA:
            rows.append(DiffRow(key[0], key[1], unit, ma, mb, change, None, len(a), len(b), False, "too few values"))
            continue
        _, p = mann_whitney(a, b)
        big = abs(mb - ma) >= MIN_CHANGE * abs(ma) if ma != 0 else mb != 0
        sig = bool(p < ALPHA and big)
        verdict = ("higher" if mb > ma else "lower") if sig else "same"
        rows.append(DiffRow(key[0], key[1], unit, ma, mb, change, p, len(a), len(b), sig, verdict))
    return tuple(rows)


@dataclass(frozen=True)
class ReportDiff:
    """The differences between a base report and another one (``base.diff(other)``)."""

    base_runs: tuple[str, ...]
    other_runs: tuple[str, ...]
    rows: tuple[DiffRow, ...]
    rule: str = RULE

    @property
    def changed(self) -> tuple[DiffRow, ...]:
        """The rows whose change exceeds run-to-run noise, plus new and gone values."""
        return tuple(r for r in self.rows if r.significant or r.verdict in ("new", "gone"))

    def text(self) -> str:
        """The diff as a text table; changes beyond noise are marked ``*``."""
        lines = [f"diff: base runs {','.join(self.base_runs)} -> other runs {','.join(self.other_runs)}", self.rule]
        header = ("", "region", "signal", "base", "other", "change", "p", "verdict")
        body = []
        for r in self.rows:
            mark = "*" if r.significant or r.verdict in ("new", "gone") else ""
            body.append(
                (
                    mark,
                    r.path,
                    r.signal,
                    fmt(r.base_median, r.unit),
                    fmt(r.other_median, r.unit),
                    "-" if r.change is None else f"{100 * r.change:+.1f}%",
                    "-" if r.p_value is None else f"{r.p_value:.2g}",
                    r.verdict,
                )
            )
        from argus_lab.report.text import table

        return "\n".join([*lines, table(header, body)])

    def to_dicts(self) -> list[dict[str, Any]]:
        """The rows as plain dicts (JSON-ready)."""
        return [asdict(r) for r in self.rows]

    def to_json(self) -> dict[str, Any]:
        """``{"rule", "base_runs", "other_runs", "rows"}``."""
        return {
            "rule": self.rule,
            "base_runs": list(self.base_runs),
            "other_runs": list(self.other_runs),
            "rows": self.to_dicts(),
        }

    def to_polars(self) -> pl.DataFrame:
        """The rows as a polars DataFrame."""
        import polars as pl

        return pl.DataFrame(self.to_dicts(), infer_schema_length=None)

    def __str__(self) -> str:
        return self.text()
