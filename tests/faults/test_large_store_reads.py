"""A store larger than DuckDB's first memory limit for reads still reports and exports: a read that runs out is
taken again with the next limit (``store.db.read_memory_steps``), and past the last one the message says how to
raise it.  SYNTHETIC: ~300,000 kernel records with long mangled-looking names (``bench/join_bench.py``'s generator,
the shape of a long decode run), read under a 16 MB first limit, where the real default (128 MB) meets a store of
~3 M kernels (bench/scale_bench.py measures that one; docs/benchmarks.md).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from argus_lab import join
from argus_lab.errors import StoreError
from argus_lab.report import Report
from argus_lab.store import Store, db

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from join_bench import generate


@pytest.fixture(scope="module")
def large(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("large") / "large.duckdb"
    st = Store(path)
    generate(st, 300_000, 300, 16, 0.02, 0.01, samples=False)
    with st.connect(write=True) as con:  # C++-length names: what makes the per-kernel table heavy
        con.execute(
            "UPDATE kernels SET name = '_ZN2at6native29vectorized_elementwise_kernel' || repeat('I', 100) || name"
        )
    join.attribute_request(st, ["r-bench"])
    return path


def test_a_report_that_outgrows_the_first_read_limit_is_read_with_the_next(
    large: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ARGUS_READ_MEMORY", raising=False)
    monkeypatch.setattr(db, "READ_MEMORY", "16MB")  # the first step; the next ones follow the machine's memory
    assert db.read_memory_steps()[0] == "16MB" and len(db.read_memory_steps()) > 1
    report = Report(Store(large), ["r-bench"])
    text = report.text()
    assert "step/layer/attn" in text and report.kernels
    assert sum(k.launches for k in report.kernels if k.ordinal is not None) > 250_000


def test_past_the_last_limit_the_message_says_how_to_raise_it(large: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARGUS_READ_MEMORY", "16MB")  # given by the user: the only step
    with pytest.raises(StoreError, match=r"needed more memory than DuckDB's limit for reads \(16MB.*ARGUS_READ_MEMORY"):
        Report(Store(large), ["r-bench"]).text()


def test_an_html_export_of_the_large_store_works_under_the_small_first_limit(
    large: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from argus_lab.views.html_file import export

    monkeypatch.delenv("ARGUS_READ_MEMORY", raising=False)
    monkeypatch.setattr(db, "READ_MEMORY", "16MB")
    out = tmp_path / "large.html"
    export(Report(Store(large), ["r-bench"]), out)
    assert out.stat().st_size > 10_000 and b"step/layer/attn" in out.read_bytes()


@pytest.mark.parametrize("name", ["large.json", "tables"])
def test_perfetto_and_parquet_exports_of_the_large_store_work_under_the_small_first_limit(
    large: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    from argus_lab.app.exporting import export

    monkeypatch.delenv("ARGUS_READ_MEMORY", raising=False)
    monkeypatch.setattr(db, "READ_MEMORY", "16MB")
    out = tmp_path / name
    result = export(Store(large), out, run_ids=["r-bench"])
    if name == "tables":
        assert len(result.files) == len(list(out.iterdir())) > 20
        assert (
            Store(large).rows("SELECT count(*) FROM kernels")[0][0]
            == pq.read_metadata(out / "kernels.parquet").num_rows
        )
    else:
        assert result.counts["kernels"] > 250_000 and json.loads(out.read_text())["traceEvents"]
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]  # no temporary left beside it


def test_the_last_read_limit_grows_with_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ARGUS_READ_MEMORY", raising=False)
    physical = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    steps = [int(s.removesuffix("MB")) for s in db.read_memory_steps()]
    assert steps == sorted(steps) and steps[0] == 128
    assert steps[-1] == int(physical * db.READ_MEMORY_SHARE) >> 20  # not a fixed 4 GB
