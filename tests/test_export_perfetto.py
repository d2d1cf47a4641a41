"""Export of a run as a Perfetto-readable trace (Chrome JSON) and as Parquet, on evidence recorded on the H200.

Perfetto's own processor (PyPI ``perfetto``) downloads ``trace_processor_shell`` on first use, which a machine
without network access cannot do; the structure is therefore validated against the Trace Event Format with a
JSON schema here, and the round trip through argus_lab's Kineto importer checks every value.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pyarrow.parquet as pq
import pytest
from test_join_recorded import CASES, load_case

from argus_lab import join
from argus_lab.faces.importing import import_trace
from argus_lab.store import Store
from argus_lab.views.perfetto import GPU_PID, write_parquet, write_trace

NUM = {"type": "number", "minimum": 0}
EVENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["ph", "pid", "tid"],
    "properties": {"ph": {"enum": ["X", "s", "f", "C", "M"]}, "pid": {"type": "integer"}, "tid": {"type": "integer"}},
    "allOf": [
        {"if": {"properties": {"ph": {"const": "X"}}},
         "then": {"required": ["name", "cat", "ts", "dur", "args"], "properties": {"ts": NUM, "dur": NUM}}},
        {"if": {"properties": {"ph": {"enum": ["s", "f"]}}},
         "then": {"required": ["id", "ts", "cat", "name"], "properties": {"ts": NUM}}},
        {"if": {"properties": {"ph": {"const": "C"}}},
         "then": {"required": ["name", "ts", "args"],
                  "properties": {"args": {"type": "object", "additionalProperties": {"type": "number"}}}}},
        {"if": {"properties": {"ph": {"const": "M"}}},
         "then": {"properties": {"name": {"enum": ["process_name", "thread_name"]},
                                 "args": {"required": ["name"]}}}},
    ],
}  # fmt: skip
TRACE_SCHEMA = {
    "type": "object",
    "required": ["traceEvents", "baseTimeNanoseconds", "displayTimeUnit"],
    "properties": {"traceEvents": {"type": "array", "items": EVENT_SCHEMA}},
}

KERNELS = (
    "SELECT k.name, k.start_ns, k.end_ns, k.stream_id, a.class, i.path FROM kernels k "
    "JOIN attributions a ON a.run_id = k.run_id AND a.evidence_id = k.kernel_key "
    "LEFT JOIN region_instances i ON i.run_id = a.run_id AND i.instance_id = a.instance_id "
    "WHERE k.run_id = ? ORDER BY k.start_ns, k.name"
)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Store:
    st = Store(tmp_path_factory.mktemp("exp") / "rec.duckdb")
    for case in ("nested", "two_streams", "backward"):
        load_case(st, CASES / case, case)
    join.attribute_request(st, ["nested", "two_streams", "backward"])
    return st


@pytest.mark.parametrize("case", ["nested", "two_streams", "backward"])
def test_export_is_a_valid_trace_with_tracks_flows_and_classes(recorded: Store, tmp_path: Path, case: str) -> None:
    out = tmp_path / f"{case}.json"
    counts = write_trace(recorded, case, out)
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, TRACE_SCHEMA)
    ev = doc["traceEvents"]
    n_k = recorded.rows("SELECT count(*) FROM kernels WHERE run_id = ?", [case])[0][0]
    gpu = [e for e in ev if e["ph"] == "X" and e["pid"] >= GPU_PID]
    assert len(gpu) == n_k == counts["kernels"]
    assert all(e["args"]["class"] in ("exact", "temporal", "ambiguous", "unattributed") for e in gpu)
    starts = {e["id"] for e in ev if e["ph"] == "s"}
    ends = {e["id"] for e in ev if e["ph"] == "f"}
    assert starts == ends and len(starts) == counts["flows"] > 0  # every flow has both ends
    named = {(e["pid"], e["tid"]) for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {(e["pid"], e["tid"]) for e in ev if e["ph"] == "X"} <= named  # every slice track is named
    n_s = recorded.rows("SELECT count(*) FROM samples WHERE run_id = ? AND value IS NOT NULL", [case])[0][0]
    assert counts["counters"] == n_s == sum(1 for e in ev if e["ph"] == "C")


@pytest.mark.parametrize("case", ["nested", "two_streams", "backward"])
def test_round_trip_through_the_kineto_importer(recorded: Store, tmp_path: Path, case: str) -> None:
    """Import what was exported: same kernels at the same ns, same classes and regions, same instances."""
    out = tmp_path / f"{case}.json"
    write_trace(recorded, case, out)
    st = Store(tmp_path / "back.duckdb")
    res = import_trace(out, st)
    assert st.rows(KERNELS, [res.run_id]) == recorded.rows(KERNELS, [case])
    inst = "SELECT path, start_ns, end_ns FROM region_instances WHERE run_id = ? ORDER BY start_ns, path"
    assert st.rows(inst, [res.run_id]) == recorded.rows(inst, [case])


def test_parquet_of_every_table(recorded: Store, tmp_path: Path) -> None:
    files = write_parquet(recorded, tmp_path / "pq", ["nested"])
    names = {f.stem for f in files}
    assert {"runs", "region_instances", "kernels", "attributions", "instance_values", "samples"} <= names
    assert not names & {"attribution_rows", "value_series", "instance_value_rows"}  # read through their views
    v = pq.read_table(tmp_path / "pq" / "instance_values.parquet")
    assert set(v.column("run_id").to_pylist()) == {"nested"}
    assert v.num_rows == recorded.rows("SELECT count(*) FROM instance_values WHERE run_id = 'nested'")[0][0] > 0
    k = pq.read_table(tmp_path / "pq" / "kernels.parquet")
    assert set(k.column("run_id").to_pylist()) == {"nested"}
    assert k.num_rows == recorded.rows("SELECT count(*) FROM kernels WHERE run_id = 'nested'")[0][0]


def test_unknown_run_is_named(recorded: Store, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"no run 'r-nope'.*latest runs"):
        write_trace(recorded, "r-nope", tmp_path / "x.json")
