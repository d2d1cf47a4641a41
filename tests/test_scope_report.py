"""A request's scope decides what its report covers: globs, instance ranges, ranks and thread names,
applied in SQL to the region and counter tables (tests on real measured stores)."""

from __future__ import annotations

import threading
from pathlib import Path

import duckdb

import argus_lab
from argus_lab.plan.scope import Scope
from argus_lab.report.scope_sql import predicate, scoped
from argus_lab.store import Store


def _step() -> None:
    with argus_lab.region("decode"):
        for _ in range(3):
            with argus_lab.region("layer"):
                with argus_lab.region("attn"):
                    sum(range(500))
                with argus_lab.region("mlp"):
                    sum(range(500))


def _paths(report: argus_lab.Report) -> set[str]:
    return {r.path for r in report.regions}


def test_without_a_scope_everything_is_reported(store_path: Path) -> None:
    report = argus_lab.measure(_step, "host.wall", repeat=2, warmup=0, store=str(store_path))
    assert _paths(report) == {"decode", "decode/layer", "decode/layer/attn", "decode/layer/mlp"}
    assert not report.text().startswith("scope:")


def test_globs_and_instance_ranges_select_instances(store_path: Path) -> None:
    report = argus_lab.measure(
        _step, "host.wall", repeat=2, warmup=1, scope="**/attn; instances=2:", store=str(store_path)
    )
    assert _paths(report) == {"decode/layer/attn"}
    (row,) = [r for r in report.regions if r.signal == "host.wall"]
    # 6 measured attn instances (3 per repetition; the warm-up repetition's 3 are not counted by `instances=`),
    # the first two measured ones left out by `instances=2:`
    assert row.instances == 4
    assert report.text().startswith("scope: **/attn; instances=2:")
    # the store keeps everything: the scope is applied when reading
    assert Store(store_path).rows("SELECT count(*) FROM region_instances WHERE path = 'decode/layer/attn'") == [(9,)]


def test_thread_names_are_recorded_and_select(store_path: Path) -> None:
    def work() -> None:
        t = threading.Thread(target=_step, name="loader")
        t.start()
        t.join()
        _step()

    report = argus_lab.measure(
        work, "host.wall", repeat=1, warmup=0, scope="decode; threads=loader", store=str(store_path)
    )
    (row,) = [r for r in report.regions if r.signal == "host.wall"]
    assert row.path == "decode" and row.instances == 1
    names = Store(store_path).rows("SELECT DISTINCT thread_name FROM region_instances ORDER BY 1")
    assert names == [("MainThread",), ("loader",)]


def test_predicate_binds_untrusted_paths_and_builds_arithmetic() -> None:
    con = duckdb.connect()
    con.execute(
        "CREATE TABLE i (run_id VARCHAR, path VARCHAR, instance_index INTEGER, rank INTEGER, "
        "thread_id UBIGINT, thread_name VARCHAR, instance_id BIGINT)"
    )
    hostile = "x'); DROP TABLE i; --"
    rows = [("r", hostile, n, 0, 1, "main", n) for n in range(10)] + [("r", "other", 0, 1, 1, "main", 99)]
    con.executemany("INSERT INTO i VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    pred = predicate({"r": Scope.parse("x*; instances=1:9:3")}, {"r": {hostile: 0, "other": 0}})
    assert pred is not None
    assert hostile not in pred.sql and "'" not in pred.sql  # no value is spliced into the text: all are bound
    assert hostile in pred.params and "r" in pred.params
    got = con.execute(f"SELECT instance_index FROM i WHERE {pred.sql} ORDER BY 1", list(pred.params)).fetchall()
    assert got == [(1,), (4,), (7,)]
    assert predicate({"r": Scope()}, {}) is None
    ranks = predicate({"r": Scope.parse("ranks=1")}, {"r": {hostile: 0, "other": 0}})
    warm = predicate({"r": Scope.parse("x*; instances=:2")}, {"r": {hostile: 5, "other": 0}})  # 5 warm-up ones
    assert ranks is not None and warm is not None
    assert con.execute(f"SELECT instance_index FROM i WHERE {warm.sql} ORDER BY 1", list(warm.params)).fetchall() == [
        (5,),
        (6,),
    ]
    assert con.execute(f"SELECT path FROM i WHERE {ranks.sql}", list(ranks.params)).fetchall() == [("other",)]
    names = predicate({"r": Scope.parse("threads=main")}, {"r": {hostile: 0, "other": 0}})
    assert names is not None and "main" in names.params
    assert con.execute(f"SELECT count(*) FROM i WHERE {names.sql}", list(names.params)).fetchall() == [(11,)]
    assert con.execute("SELECT count(*) FROM i").fetchall() == [(11,)]  # the table is still there


def test_scoped_puts_the_scope_first_and_its_parameters_first() -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE region_instances (run_id VARCHAR, instance_id BIGINT, path VARCHAR)")
    con.executemany("INSERT INTO region_instances VALUES (?, ?, ?)", [("r", 1, "a"), ("r", 2, "b"), ("q", 3, "a")])
    scope = predicate({"r": Scope.parse("a")}, {"r": {"a": 0, "b": 0}})
    sql = "WITH x AS (SELECT * FROM region_instances i WHERE i.run_id = ? /*SCOPE*/) SELECT instance_id FROM x"
    text, bound = scoped(sql, scope)
    assert con.execute(text, [*bound, "r"]).fetchall() == [(1,)]
    plain, none = scoped(sql, None)
    assert none == [] and sorted(con.execute(plain, ["r"]).fetchall()) == [(1,), (2,)]
