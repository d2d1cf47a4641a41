"""The Nsight Compute metric names of the chip, so that a ``hw:`` signal with a typo stops at planning with the
closest names instead of a replay run that measures nothing.

The names are package data (``argus_lab/data/ncu_metrics_gh100.json``, written by ``scripts/record_ncu_metrics.py``):
the base metrics CUPTI's profiler host API schedules on the chip (the PerfWorks counters, ratios and throughputs ncu
collects), ncu's own names from the section files of its installation where it was recorded with ncu (launch
statistics, derived warp-state metrics), and the metrics of the recorded pass table.  A full name is a base name,
a rollup and submetrics (``dram__bytes_read.sum``, ``sm__throughput.avg.pct_of_peak_sustained_elapsed``): it is
known when its base name is.
"""

from __future__ import annotations

import difflib
import functools
import json
from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data"
NAMES_FILE = DATA / "ncu_metrics_gh100.json"
PASSES_FILE = DATA / "ncu_passes_gh100.json"
NCU_FAMILIES = ("launch__", "device__attribute_", "profiler__")
"""Prefixes of names ncu computes itself (not PerfWorks counters): accepted when ncu's own names were not recorded."""


@dataclass(frozen=True)
class MetricNames:
    """What is known of the chip's metric names, and where it came from."""

    bases: frozenset[str]
    full: frozenset[str]
    source: str
    ncu_recorded: bool

    def known(self, metric: str) -> bool:
        base = metric.split(".", 1)[0]
        if base in self.bases or metric in self.full:
            return True
        return not self.ncu_recorded and base.startswith(NCU_FAMILIES)

    def closest(self, metric: str, n: int = 3) -> list[str]:
        """The closest known names, with ``metric``'s own rollup and submetrics kept."""
        base, _, rest = metric.partition(".")
        suffix = f".{rest}" if rest else ""
        close = difflib.get_close_matches(base, sorted(self.bases), n=n, cutoff=0.7)
        full = difflib.get_close_matches(metric, sorted(self.full), n=n, cutoff=0.7)
        out = [f"{b}{suffix}" for b in close] + [f for f in full if f not in close]
        return list(dict.fromkeys(out))[:n]


@functools.cache
def names() -> MetricNames | None:
    """The recorded names (``None`` when the package data is missing: nothing is checked then)."""
    try:
        data = json.loads(NAMES_FILE.read_text())
    except (OSError, ValueError):
        return None
    bases = {n for kind in data.get("base_metrics", {}).values() for n in kind}
    ncu = set(data.get("ncu_metrics", []))
    try:
        ncu.update(json.loads(PASSES_FILE.read_text()).get("metrics", {}))
    except (OSError, ValueError):
        pass
    bases.update(n.split(".", 1)[0] for n in ncu)
    source = f"{NAMES_FILE.name} ({data.get('chip', '?')}, {data.get('command', '')})"
    return MetricNames(frozenset(bases), frozenset(ncu), source, bool(data.get("ncu_metrics")))


def unknown(metrics: list[str]) -> list[tuple[str, list[str]]]:
    """The metrics (names without ``hw:``) the recorded names do not know, each with its closest known names."""
    known = names()
    if known is None:
        return []
    return [(m, known.closest(m)) for m in metrics if not known.known(m)]


__all__ = ["MetricNames", "names", "unknown"]
