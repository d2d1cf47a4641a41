"""Compacting a store (argus_lab.store.compact): the same rows in a smaller file, shards dropped only when safe."""

from __future__ import annotations

from pathlib import Path

import pytest
from join_synth import Inst, Kern, SynthRun, write

from argus_lab.store import Store
from argus_lab.store.compact import compact

TABLES = ("runs", "region_instances", "kernels", "metrics", "provenance")


def _store(path: Path) -> Store:
    st = Store(path)
    run = SynthRun("c1", instances=[Inst(1, "step", 0, 10_000)], kernels=[Kern(1, "k", 100, 900, 1, api=50)])
    write(st, [run])  # SYNTHETIC rows
    return st


def _rows(st: Store) -> dict[str, list[tuple[object, ...]]]:
    return {t: sorted(st.rows(f"SELECT * FROM {t}"), key=repr) for t in TABLES}


def test_compact_keeps_every_row_and_shrinks_the_file(tmp_path: Path) -> None:
    st = _store(tmp_path / "s.duckdb")
    before = _rows(st)
    (tmp_path / "s.duckdb.runs" / "c1").mkdir(parents=True)
    out = compact(st)
    assert out.bytes < out.bytes_before
    assert _rows(Store(tmp_path / "s.duckdb")) == before
    assert not out.shards_dropped and (tmp_path / "s.duckdb.runs").is_dir()  # not asked to drop them
    assert compact(st, drop_shards=True).shards_dropped
    assert not (tmp_path / "s.duckdb.runs").exists()


def test_shards_of_an_unfinished_run_stay(tmp_path: Path) -> None:
    st = _store(tmp_path / "s.duckdb")
    with st.connect(write=True) as con:
        con.execute("UPDATE runs SET status = 'died'")
    (tmp_path / "s.duckdb.runs" / "c1").mkdir(parents=True)
    assert not compact(st, drop_shards=True).shards_dropped
    assert (tmp_path / "s.duckdb.runs" / "c1").is_dir()


def test_a_missing_store_is_named_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"no store at .*give the path of an existing \.duckdb file"):
        compact(tmp_path / "nope.duckdb")
