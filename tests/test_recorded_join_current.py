"""The recorded stores of tests/data carry the values of today's join, and a store joined by an older join says so.

The join's rules change (``JOIN_VERSION``): a store keeps the values of the join that wrote them.  A Report only
reads, so it cannot join again by itself; it says plainly that the values are an older join's and gives the command
that joins the store again.  The recorded stores are joined again whenever the rules change
(scripts/rejoin_recorded.py, tests/data/README.md): the quickstart and the walkthrough read them as shipped.
"""

from __future__ import annotations

import gzip
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import duckdb
import pytest
from recorded_cases import shipped

from argus_lab.join.attribution_sql import JOIN_BACKEND_VERSION
from argus_lab.report import Report
from argus_lab.store import Store

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).resolve().parents[1]
OLDER = DATA / "older_joins"  # kept as an older join left them: the migration tests read them
STORES = sorted(p for p in [*DATA.rglob("*.duckdb"), *DATA.rglob("*.duckdb.gz")] if OLDER not in p.parents)
SM = "hw:sm__throughput.avg.pct_of_peak_sustained_elapsed"


def _join_versions(path: Path) -> set[str]:
    with tempfile.TemporaryDirectory() as tmp:
        plain = path
        if path.suffix == ".gz":
            plain = Path(tmp) / path.name.removesuffix(".gz")
            with gzip.open(path) as f, plain.open("wb") as out:
                shutil.copyfileobj(f, out)
        con = duckdb.connect(str(plain), read_only=True)
        try:
            rows = con.execute("SELECT backend_version FROM provenance WHERE backend = 'join'").fetchall()
            return {r[0] for r in rows}
        finally:
            con.close()


@pytest.mark.parametrize("path", STORES, ids=[str(p.relative_to(DATA)) for p in STORES])
def test_every_recorded_store_holds_the_values_of_todays_join(path: Path) -> None:
    versions = _join_versions(path)
    assert versions <= {JOIN_BACKEND_VERSION}, (
        f"{path.relative_to(ROOT)} was joined by {sorted(versions)}; join it again: "
        f"PYTHONPATH=$PWD python scripts/rejoin_recorded.py tests/data"
    )


def _shipped(tmp_path: Path, rel: str) -> Store:
    return shipped(tmp_path, rel)


def test_the_shipped_walkthrough_store_reads_a_percentage_as_the_weighted_mean(tmp_path: Path) -> None:
    st = _shipped(tmp_path, "notebooks/gpu_walkthrough_h200.duckdb")
    report = Report(st, [r[0] for r in st.rows("SELECT run_id FROM runs")])
    attn = next(c for c in report.counters if c.path == "decode/layer/attn" and c.signal == SM)
    assert attn.agg == "mean"
    assert attn.median == pytest.approx(17.45, abs=0.01)  # the older join's unweighted mean read 10.69 %
    assert not [c for c in report.coverage() if "older join" in c]


def test_the_shipped_e2e_store_reads_registers_as_a_fact_and_throughput_weighted(tmp_path: Path) -> None:
    st = _shipped(tmp_path, "gpu/e2e_nested_h200.duckdb")
    report = Report(st, [r[0] for r in st.rows("SELECT run_id FROM runs")])
    outer = {c.signal: c for c in report.counters if c.path == "outer"}
    regs = outer["hw:launch__registers_per_thread"]
    assert regs.agg == "fact" and regs.median == regs.exclusive_median == 202  # not 87.33 inclusive beside 202
    assert outer[SM].median == pytest.approx(81.38, abs=0.01)  # not 38.29 %


def test_a_store_joined_by_an_older_join_says_so_and_how_to_join_it_again(tmp_path: Path) -> None:
    st = _shipped(tmp_path, "notebooks/gpu_walkthrough_h200.duckdb")
    # SYNTHETIC: the join's provenance rows relabelled as an older join's (the values stay today's)
    with st.connect(write=True) as con:
        con.execute("UPDATE provenance SET backend_version = 'argus_lab.join 1' WHERE backend = 'join'")
    runs = [r[0] for r in st.rows("SELECT run_id FROM runs")]
    report = Report(st, runs)
    stale = [c for c in report.coverage() if "older join" in c]
    assert len(stale) == 1
    assert "argus_lab.join 1" in stale[0] and JOIN_BACKEND_VERSION in stale[0]
    assert f"argus-lab join --store {st.path} --all" in stale[0]
    assert report.text().startswith("NOTE: values from an older join")  # said first, not only at the end
    assert "older join" in report.to_json()
    joined = subprocess.run(
        [sys.executable, "-m", "argus_lab.faces.cli", "join", "--store", str(st.path), "--all"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
        timeout=300,
    )
    assert joined.returncode == 0, joined.stderr
    assert not [c for c in Report(st, runs).coverage() if "older join" in c]
