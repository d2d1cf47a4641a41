"""How many Nsight Compute replay passes a set of hardware counters needs: the planner's pass-count model.

ncu collects a metric set by replaying each kernel once per *pass*; how many passes a set needs depends on the
chip's counter hardware.  The planner asks a :class:`PassModel`:

* :class:`TablePassModel` reads a table recorded on a real GPU by ``scripts/record_ncu_passes.py`` (the H200 /
  GH100 table lives at ``tests/data/ncu_passes_gh100.json``; the file says how it was recorded).  It knows each
  metric's pass count alone and the exact count of the combinations that were recorded.  For any other set it
  sums the metrics' counts less a *shared* allowance per extra metric, calibrated on the recorded combinations so
  that the estimate never falls below a recorded count, and bounded by recorded supersets and subsets (see
  :meth:`TablePassModel.passes`).
* :class:`AssumedPassModel` is the stated fallback when no table is found: a fixed count per metric.
* On a GPU machine the real count can be plugged in: anything with a ``source`` string and a
  ``passes(metrics) -> int`` method is a :class:`PassModel`, and :func:`argus_lab.plan.plan` accepts it
  (for example a model that asks CUPTI's profiler host API, ``cupti.profiler_host`` in cupti-python >= 13.3,
  or runs ``ncu`` once per set as the recording script does).

Table format (JSON)::

    {"synthetic": false, "chip": "GH100", "gpu": "NVIDIA H200", "ncu_version": "...", "note": "...",
     "command": "...", "metrics": {"dram__bytes_read.sum": 2, ...},
     "combinations": [{"metrics": ["a", "b"], "passes": 3}, ...], "failed": {"metric": "ncu's error"}}
"""

from __future__ import annotations

import functools
import json
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from argus_lab.errors import PlanError

TABLE_NAME = "ncu_passes_gh100.json"
"""File name of the pass table recorded on the H200 (GH100)."""

ASSUMED_PASSES = 4

CACHE_LIMIT = 100_000
"""Metric sets whose pass count a :class:`TablePassModel` remembers (the cache is emptied past it)."""
"""Passes assumed per metric when no recorded table can be found (stated in every plan that uses it)."""


@runtime_checkable
class PassModel(Protocol):
    """Anything that can tell the replay passes of a metric set."""

    @property
    def source(self) -> str:
        """Where the counts come from, for the plan's explanation and provenance."""

    def passes(self, metrics: Iterable[str]) -> int:
        """Replay passes ncu needs to collect all ``metrics`` in one run (at least 1)."""


def base_counter(metric: str) -> str:
    """The counter a metric reads: the part before the first ``.`` (``dram__bytes_read.sum`` -> ``dram__bytes_read``).

    Rollups and ratios of one counter (``.sum``, ``.avg``, ``.pct_of_peak_...``) are collected together.
    """
    return metric.split(".", 1)[0]


@dataclass(frozen=True)
class AssumedPassModel:
    """A fixed number of passes per distinct counter: the fallback when no recorded table exists."""

    per_metric: int = ASSUMED_PASSES

    @property
    def source(self) -> str:
        return (
            f"ASSUMED {self.per_metric} passes per counter (no recorded pass table found; record one on the GPU "
            "with scripts/record_ncu_passes.py)"
        )

    def passes(self, metrics: Iterable[str]) -> int:
        return max(1, self.per_metric * len({base_counter(m) for m in metrics}))


@dataclass(frozen=True)
class TablePassModel:
    """Pass counts from a table recorded with ``scripts/record_ncu_passes.py``.

    Attributes
    ----------
    metrics
        Passes of each metric collected alone.
    combinations
        Passes of recorded metric sets (exact answers for those sets).
    label
        Where the table comes from (chip, ncu version, path; "SYNTHETIC" for synthetic test tables).
    """

    metrics: Mapping[str, int]
    combinations: Mapping[frozenset[str], int] = field(default_factory=dict)
    label: str = ""
    synthetic: bool = False
    _cache: dict[frozenset[str], int] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def load(cls, path: str | Path) -> TablePassModel:
        """Read a table file (see the module docstring for its format)."""
        path = Path(path)
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            msg = f"cannot read the ncu pass table {path}: {exc}; record it again with scripts/record_ncu_passes.py"
            raise PlanError(msg) from exc
        return cls.from_dict(data, path.name)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = "") -> TablePassModel:
        """Build the model from the parsed table."""
        metrics = data.get("metrics")
        if not isinstance(metrics, Mapping) or not metrics:
            msg = f"the ncu pass table {where or '(given)'} has no `metrics` entries; record it again"
            raise PlanError(msg)
        singles = {str(k): int(v) for k, v in metrics.items()}
        combos = {frozenset(c["metrics"]): int(c["passes"]) for c in data.get("combinations", ())}
        synthetic = bool(data.get("synthetic", False))
        chip = data.get("chip", "unknown chip")
        version = data.get("ncu_version", "unknown ncu version")
        label = (
            f"{'SYNTHETIC table' if synthetic else 'table recorded on'} {data.get('gpu', '')} ({chip}), ncu {version}"
        )
        if where:
            label += f", {where}"
        return cls(singles, combos, label.replace("  ", " "), synthetic)

    @property
    def source(self) -> str:
        return (
            f"{self.label}; sets not recorded are estimated from single counts "
            f"(shared allowance {self.shared:g} per extra counter, bounded by recorded sets)"
        )

    @property
    def unknown_passes(self) -> int:
        """Passes assumed for a metric missing from the table: the largest recorded single count."""
        return max(self.metrics.values())

    def known(self, metric: str) -> bool:
        """Whether the table has ``metric`` or another metric of the same counter."""
        return metric in self.metrics or any(base_counter(m) == base_counter(metric) for m in self.metrics)

    @functools.cached_property
    def _by_counter(self) -> dict[str, int]:
        """The largest recorded single count of each counter."""
        out: dict[str, int] = {}
        for m, v in self.metrics.items():
            b = base_counter(m)
            out[b] = max(out.get(b, 0), v)
        return out

    def single(self, metric: str) -> int:
        """Passes of ``metric`` alone (same-counter metric, else :attr:`unknown_passes`, when not recorded)."""
        got = self.metrics.get(metric)
        if got is not None:
            return got
        return self._by_counter.get(base_counter(metric), self.unknown_passes)

    @functools.cached_property
    def shared(self) -> float:
        """Passes shared per additional counter, calibrated so no recorded combination is underestimated.

        The largest ``s >= 0`` with ``sum(single) - (n - 1) * s >= recorded`` for every recorded combination of
        ``n >= 2`` counters, capped at the smallest single count; 0 when nothing was recorded.
        """
        bound = float(min(self.metrics.values()))
        for combo, recorded in self.combinations.items():
            counters = self._counters(combo)
            if len(counters) < 2:
                continue
            total = sum(counters.values())
            bound = min(bound, (total - recorded) / (len(counters) - 1))
        return max(0.0, bound)

    def _counters(self, metrics: Iterable[str]) -> dict[str, int]:
        out: dict[str, int] = {}
        for m in metrics:
            b = base_counter(m)
            out[b] = max(out.get(b, 0), self.single(m))
        return out

    def passes(self, metrics: Iterable[str]) -> int:
        """Replay passes of ``metrics`` collected together.

        A recorded set gets its recorded count.  Any other set gets the estimate
        ``max(max single, ceil(sum of singles - (n - 1) * shared))`` over its ``n`` distinct counters, kept within
        what the recordings imply because more metrics never need fewer passes: at most the smallest recorded
        superset's count and at least the largest recorded subset's count.  The result is monotone (adding a
        metric never lowers it), which the planner's exact split search relies on.
        """
        key = frozenset(metrics)
        got = self._cache.get(key)
        if got is not None:
            return got
        if not key:
            return 0
        counters = self._counters(key)
        estimate = max(max(counters.values()), math.ceil(sum(counters.values()) - (len(counters) - 1) * self.shared))
        upper = min((v for c, v in self.combinations.items() if key <= c), default=estimate)
        lower = max((v for c, v in self.combinations.items() if c <= key), default=0)
        result = max(lower, min(estimate, upper))
        if len(self._cache) >= CACHE_LIMIT:  # bounded memory, whatever the planner asks
            self._cache.clear()
        self._cache[key] = result
        return result


def _candidates() -> list[Path]:
    here = Path(__file__).resolve().parents[1]  # the argus_lab package
    return [here / "data" / TABLE_NAME, here.parent / "tests" / "data" / TABLE_NAME]


def default_pass_model() -> PassModel:
    """The pass model the planner uses when none is given.

    ``$ARGUS_NCU_PASS_TABLE`` names a table file; otherwise the GH100 table recorded on the H200 is used
    (``argus_lab/data/`` or the repository's ``tests/data/``); otherwise :class:`AssumedPassModel`, which every
    plan states plainly.
    """
    env = os.environ.get("ARGUS_NCU_PASS_TABLE")
    if env:
        return TablePassModel.load(env)
    for path in _candidates():
        if path.is_file():
            return _load_cached(str(path), path.stat().st_mtime_ns)
    return AssumedPassModel()


_LOADED: dict[tuple[str, int], TablePassModel] = {}


def _load_cached(path: str, mtime: int) -> TablePassModel:
    model = _LOADED.get((path, mtime))
    if model is None:
        model = _LOADED[(path, mtime)] = TablePassModel.load(path)
    return model


__all__ = [
    "ASSUMED_PASSES",
    "TABLE_NAME",
    "AssumedPassModel",
    "PassModel",
    "TablePassModel",
    "base_counter",
    "default_pass_model",
]
