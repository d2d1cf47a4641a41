"""The Report as machine-readable JSON for optimization agents (documented in docs/report-json.md).

The object is plain JSON (no NaN: missing numbers are ``null``), keyed by table, with the schema id
:data:`SCHEMA` so that a consumer can refuse versions it does not know.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any

from argus_lab.model.vocabulary import CLASS_MEANINGS
from argus_lab.report.diff import RULE
from argus_lab.report.sql import TRACE

if TYPE_CHECKING:
    from argus_lab.report import Report

SCHEMA = "argus_lab.report-json/1"


def clean(value: Any) -> Any:
    """JSON-safe copy: tuples become lists, NaN/inf become ``None``, dataclasses become dicts."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: clean(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def jsonable(value: Any) -> Any:
    """``value`` with NaN and infinities turned into ``None`` and tuples into lists (JSON.parse rejects NaN)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, str | bytes):  # numpy scalars
        return jsonable(value.item())
    return value


def build(report: Report) -> dict[str, Any]:
    """The JSON object of ``report`` (see docs/report-json.md for every field)."""
    return {
        "schema": SCHEMA,
        "store": str(report.store.path),
        "runs": [clean(r) for r in report.runs],
        "regions": [clean(r) for r in report.regions],
        "kernels": [clean(r) for r in report.kernels],
        "counters": [clean(r) for r in report.counters],
        "compiler": [clean(r) for r in report.compiler],
        "attribution": [clean(r) for r in report.attribution],
        "matches": [clean(r) for r in report.matches],
        "groups": [clean(r) for r in report.groups],
        "heterogeneity": report.heterogeneity(),
        "clocks_seen": [clean(r) for r in report.clocks],
        "provenance": [clean(r) for r in report.provenance],
        "ranks": [clean(r) for r in report.ranks],
        "clock_offsets": [clean(r) for r in report.clock_offsets],
        "device": [clean(r) for r in report.device],
        "device_overhead": [clean(r) for r in report.device_overhead],
        "warnings": list(report.warnings),
        "coverage": report.coverage(),
        "rules": {
            "diff": RULE,
            "units": "times in ns, sizes in bytes; every value carries its unit",
            "inclusive": "an instance with its nested instances; exclusive leaves nested instances out",
            "names": "kernel `name` fields are as recorded (mangled C++ symbols); `display_name` is demangled and "
            "shortened for reading",
            "trace_query": " ".join(TRACE.split()),
            "classes": dict(CLASS_MEANINGS),
        },
    }
