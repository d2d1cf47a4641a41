"""How many Nsight Compute replay passes a set of hardware counters needs: the planner's pass-count model.

ncu collects a metric set by replaying each kernel once per *pass*; how many passes a set needs depends on the
chip's counter hardware.  The planner asks a :class:`PassModel`:

* :class:`~argus_lab.plan.live_passes.LivePassModel` asks CUPTI's profiler host API for the exact count of the set
  on the chip at hand (on a GPU host, or for a chip named by ``$ARGUS_GPU_CHIP``), through a short worker process,
  cached per chip and set (:mod:`argus_lab.plan.live_passes`).
* :class:`TablePassModel` reads a table recorded on a real GPU by ``scripts/record_ncu_passes.py`` (one per chip,
  shipped as package data: ``argus_lab/data/ncu_passes_<chip>.json``; the H200 / GH100 table is
  ``ncu_passes_gh100.json``; the file says how it was recorded).  It knows each
  metric's pass count alone and the exact count of the combinations that were recorded.  For any other set it
  sums the metrics' counts less a *shared* allowance per extra metric, calibrated on the recorded combinations so
  that the estimate never falls below a recorded count, and bounded by recorded supersets and subsets (see
  :meth:`TablePassModel.passes`).
* :class:`AssumedPassModel` is the stated fallback when no table is found: a fixed count per metric.
* Anything with a ``source`` string and a ``passes(metrics) -> int`` method is a :class:`PassModel`, and
  :func:`argus_lab.plan.plan` accepts it; a model may also say where each count comes from (``origin(metrics)``,
  shown per replay run) and which metrics it does not know (``known(metric)``).

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

from argus_lab import config
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

    def origin(self, metrics: Iterable[str]) -> str:
        return f"assumed, {self.per_metric} per counter"


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

    def origin(self, metrics: Iterable[str]) -> str:
        """``recorded`` (the set, or the metric alone, was recorded), ``estimated`` or ``assumed`` (a metric the table
        does not hold), with the table's chip."""
        key = frozenset(metrics)
        where = self.label.split(",")[0]
        if key in self.combinations or (len(key) == 1 and next(iter(key)) in self.metrics):
            return f"recorded ({where})"
        unknown = sorted(m for m in key if not self.known(m))
        if unknown:
            return f"assumed for {', '.join(unknown)}, estimated from the {where}"
        return f"estimated from the {where}"

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


DATA = Path(__file__).resolve().parents[1] / "data"
"""The package's data folder (shipped in the wheel): the recorded pass tables."""


def table_path(chip: str) -> Path:
    """Where the recorded table of ``chip`` lives (``argus_lab/data/ncu_passes_<chip>.json``)."""
    return DATA / f"ncu_passes_{chip.lower()}.json"


def _candidates() -> list[Path]:
    """The default recorded table (GH100, recorded on the H200)."""
    return [DATA / TABLE_NAME]


@dataclass(frozen=True)
class NotedPassModel:
    """Another model's counts, with a note in front of its source (why a better model could not be used)."""

    inner: PassModel
    note: str

    @property
    def source(self) -> str:
        return f"{self.note}; {self.inner.source}"

    def passes(self, metrics: Iterable[str]) -> int:
        return self.inner.passes(metrics)

    def origin(self, metrics: Iterable[str]) -> str:
        origin = getattr(self.inner, "origin", None)
        return str(origin(metrics)) if origin is not None else ""

    def known(self, metric: str) -> bool:
        known = getattr(self.inner, "known", None)
        return bool(known(metric)) if known is not None else True


def recorded_model(chip: str | None = None) -> PassModel:
    """The recorded table of ``chip`` (the GH100 table when ``chip`` is ``None`` or has none, saying so), else
    :class:`AssumedPassModel`."""
    if chip:
        own = table_path(chip)
        if own.is_file():
            return _load_cached(str(own), own.stat().st_mtime_ns)
    for path in _candidates():
        if path.is_file():
            model = _load_cached(str(path), path.stat().st_mtime_ns)
            if chip and chip.upper() != "GH100" and path.name == TABLE_NAME:
                return NotedPassModel(model, f"no table recorded for {chip}: the GH100 table stands in")
            return model
    return AssumedPassModel()


def live_wanted(chip: str | None) -> bool:
    """Whether to ask CUPTI: ``$ARGUS_LIVE_PASSES`` (``0`` never, ``1`` always), else when a chip is named or this
    machine has an NVIDIA driver (``/dev/nvidiactl``)."""
    setting = config.get(config.ARGUS_LIVE_PASSES)
    if setting in ("0", "1"):
        return setting == "1"
    return bool(chip) or os.path.exists("/dev/nvidiactl")


def default_pass_model(chip: str | None = None) -> PassModel:
    """The pass model the planner uses when none is given.

    ``$ARGUS_NCU_PASS_TABLE`` names a table file.  Otherwise, on a machine with an NVIDIA driver or for a named chip
    (``chip`` or ``$ARGUS_GPU_CHIP``), the live count of CUPTI's profiler host API
    (:class:`~argus_lab.plan.live_passes.LivePassModel`; the recorded table counts what CUPTI does not know).
    Otherwise, or when the live count cannot be had (the plan says why), the table recorded for the chip (GH100, the
    H200's, when the chip is unknown); otherwise :class:`AssumedPassModel`, which every plan states plainly.
    """
    env = config.value(config.ARGUS_NCU_PASS_TABLE)
    if env:
        return TablePassModel.load(env)
    chip = chip or config.get(config.ARGUS_GPU_CHIP) or None
    if live_wanted(chip):
        from argus_lab.plan.live_passes import LiveUnavailable, live_model

        try:
            return live_model(chip, recorded_model)
        except LiveUnavailable as exc:
            return NotedPassModel(recorded_model(chip), f"live count unavailable ({exc})")
    return recorded_model(chip)


_LOADED: dict[tuple[str, int], TablePassModel] = {}


def _load_cached(path: str, mtime: int) -> TablePassModel:
    model = _LOADED.get((path, mtime))
    if model is None:
        model = _LOADED[(path, mtime)] = TablePassModel.load(path)
    return model


__all__ = [
    "ASSUMED_PASSES",
    "DATA",
    "TABLE_NAME",
    "AssumedPassModel",
    "NotedPassModel",
    "PassModel",
    "TablePassModel",
    "base_counter",
    "default_pass_model",
    "live_wanted",
    "recorded_model",
    "table_path",
]
