"""Instance values stored narrow (schema 4): numbers per ``value_series``, read through the ``instance_values`` view.

Guards: an older store recorded on the H200 keeps every instance value, row for row, through the migration; a join
writes each series once and a second join replaces its runs' series and values (no row left without its series);
removing runs removes their values; merging stores renumbers the series of each (an old wide store's values
included) so that no two series share a number."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import duckdb

from argus_lab.join import attribute_request
from argus_lab.store import Store
from argus_lab.store.trim import keep_runs
from tests.test_store import merge_stores

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
# schema 1, three runs, joined by the join of that time (tests/data/gpu/ holds it joined again by today's join)
RECORDED = DATA / "older_joins" / "e2e_nested_h200.duckdb.gz"
VALUES = "SELECT * FROM instance_values ORDER BY ALL"


def _copy(tmp_path: Path, name: str = "s.duckdb") -> Path:
    path = tmp_path / name
    with gzip.open(RECORDED) as src, path.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return path


def _kinds(path: Path) -> dict[str, str]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return dict(con.execute("SELECT table_name, table_type FROM information_schema.tables").fetchall())
    finally:
        con.close()


def _runs(st: Store) -> list[str]:
    return [r[0] for r in st.rows("SELECT run_id FROM runs ORDER BY plan_index")]


def test_an_older_store_keeps_every_instance_value_through_the_migration(tmp_path: Path) -> None:
    path = _copy(tmp_path)
    st = Store(path)
    assert _kinds(path)["instance_values"] == "BASE TABLE"
    before = st.rows(VALUES)  # read as it is: the wide table of schema 1
    assert len(before) == 204
    st.write({})  # the first write migrates
    kinds = _kinds(path)
    assert kinds["instance_values"] == "VIEW"
    assert kinds["value_series"] == kinds["instance_value_rows"] == "BASE TABLE"
    assert st.rows(VALUES) == before
    keys = st.rows("SELECT count(*), count(DISTINCT series) FROM value_series")
    distinct = len({(r[0], r[2], r[5], r[12], r[13]) for r in before})
    assert keys == [(distinct, distinct)]


def test_a_join_writes_each_series_once_and_a_second_join_replaces_them(tmp_path: Path) -> None:
    st = Store(_copy(tmp_path))
    runs = _runs(st)
    attribute_request(st, runs)
    first = st.rows(VALUES)
    series = st.rows(
        "SELECT count(*), count(DISTINCT (run_id, signal, unit, backend, provenance_id)) FROM value_series"
    )
    assert series[0][0] == series[0][1] > 0
    attribute_request(st, runs)
    assert st.rows(VALUES) == first
    assert st.rows("SELECT count(*) FROM value_series") == [(series[0][0],)]
    assert st.rows("SELECT count(*) FROM instance_value_rows") == [(len(first),)]
    orphans = "SELECT count(*) FROM instance_value_rows WHERE series NOT IN (SELECT series FROM value_series)"
    assert st.rows(orphans) == [(0,)]


def test_removing_runs_removes_their_values(tmp_path: Path) -> None:
    st = Store(_copy(tmp_path))
    runs = _runs(st)
    attribute_request(st, runs)
    # every value belongs to the timing run (the ncu runs' counters go to its instances): remove it, keep the others
    assert st.rows("SELECT DISTINCT run_id FROM instance_values") == [(runs[0],)]
    assert st.rows("SELECT count(*) FROM instance_value_rows")[0][0] > 0
    assert keep_runs(st, runs[1:]) == [runs[0]]
    assert st.rows("SELECT count(*) FROM value_series") == [(0,)]
    assert st.rows("SELECT count(*) FROM instance_value_rows") == [(0,)]  # no value left without its series


def test_merging_stores_renumbers_the_series_of_each(tmp_path: Path) -> None:
    old = _copy(tmp_path, "old.duckdb")  # schema 1: wide values
    new = _copy(tmp_path, "new.duckdb")
    st = Store(new)
    attribute_request(st, _runs(st))  # schema 4: its series numbered from 1
    merged = merge_stores(tmp_path / "merged.duckdb", [str(old), str(new)])
    want = sorted(Store(old).rows(VALUES) + st.rows(VALUES), key=repr)
    assert sorted(merged.rows(VALUES), key=repr) == want
    assert merged.rows("SELECT count(*) = count(DISTINCT series) FROM value_series") == [(True,)]
