"""The ``attributions`` view (schema 3): exact attributions are derived from the kernels table, not stored.

Guards: a version-1 or -2 store recorded on the H200 (exact rows stored by an older join) is migrated by its first
write, and re-joining it gives the same exact attribution rows through the view as the older join stored; a run the
join has not processed shows no derived rows; the join stores no exact kernel or instance row."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import duckdb
import pytest

from argus_lab.join import attribute_request
from argus_lab.store import SCHEMA_VERSION, Store

DATA = Path(__file__).parent / "data"
ROWS = (
    "SELECT run_id, evidence, evidence_id, instance_id, class, round(weight, 9), reason, target_run_id "
    "FROM attributions WHERE evidence IN ('kernel', 'memcpy', 'memset', 'instance') ORDER BY ALL"
)


@pytest.mark.parametrize(
    ("name", "version"),
    [
        ("older_joins/e2e_nested_h200.duckdb.gz", "1"),
        ("older_joins/nccl_h200.duckdb.gz", "1"),
        ("older_joins/e2e_wheel_h200.duckdb.gz", "2"),
    ],
)
def test_older_store_migrates_and_the_view_equals_the_stored_rows(tmp_path: Path, name: str, version: str) -> None:
    """The exact rows of GPU records and instances, stored by an older join, are the rows the view derives."""
    path = tmp_path / "s.duckdb"
    with gzip.open(DATA / name) as f, path.open("wb") as out:  # the stores as an older join left them
        shutil.copyfileobj(f, out)
    st = Store(path)
    assert st.rows("SELECT value FROM meta WHERE key = 'schema_version'") == [(version,)]
    before = st.rows(ROWS)  # read as it is: `attributions` is still the v1 table
    assert any(r[4] == "exact" and r[1] == "kernel" for r in before)
    runs = [r[0] for r in st.rows("SELECT run_id FROM runs ORDER BY plan_index")]
    attribute_request(st, runs)
    assert st.rows("SELECT value FROM meta WHERE key = 'schema_version'") == [(str(SCHEMA_VERSION),)]
    con = duckdb.connect(str(path), read_only=True)
    kinds = dict(con.execute("SELECT table_name, table_type FROM information_schema.tables").fetchall())
    con.close()
    assert kinds["attributions"] == "VIEW" and kinds["attribution_rows"] == "BASE TABLE"
    assert st.rows(ROWS) == before
    stored = st.rows(
        "SELECT count(*) FROM attribution_rows WHERE class = 'exact' AND evidence IN ('kernel', 'instance')"
    )
    assert stored == [(0,)]


def test_unjoined_run_has_no_derived_rows_and_writes_under_the_view_name_are_stored(tmp_path: Path) -> None:
    st = Store(tmp_path / "s.duckdb")
    st.write(
        {
            "runs": {"run_id": ["r"], "backends": [["cupti"]], "status": ["ok"]},
            "region_instances": {
                "run_id": ["r"], "instance_id": [1], "path": ["a"], "thread_id": [1], "start_ns": [0], "end_ns": [100],
            },
            "kernels": {
                "run_id": ["r", "r"], "kernel_key": ["k1", "k2"], "correlation_id": [1, 2], "instance_id": [1, None],
                "start_ns": [10, 200], "end_ns": [20, 300], "kind": ["kernel", "kernel"], "thread_id": [1, 1],
            },
        }
    )  # fmt: skip
    assert st.rows("SELECT count(*) FROM attributions") == [(0,)]  # pending: nothing derived yet
    attribute_request(st, ["r"])
    got = st.rows("SELECT evidence, evidence_id, class, reason FROM attributions ORDER BY evidence, evidence_id")
    assert got == [
        ("instance", "1", "exact", "the region instance's own host clocks (entry and exit)"),
        ("kernel", "k1", "exact", "external correlation id"),
        ("kernel", "k2", "unattributed", "launched outside every region (thread 1, no region open on any thread)"),
    ]
    assert st.rows("SELECT evidence_id FROM attribution_rows") == [("k2",)]
    st.write({"attributions": {"run_id": ["r"], "evidence": ["note"], "evidence_id": ["x"], "class": ["exact"]}})
    assert st.rows("SELECT count(*) FROM attribution_rows WHERE evidence = 'note'") == [(1,)]
