"""The Report and its diff on SYNTHETIC evidence (tests/join_synth.py); recorded-evidence tests are separate."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from join_synth import Inst, Kern, SynthRun, write
from test_join_synthetic import case_run, ncu_pair

from argus_lab import join
from argus_lab.report import TABLES, Report
from argus_lab.report.diff import ALPHA, mann_whitney
from argus_lab.report.json import SCHEMA
from argus_lab.store import Store

DOCS = Path(__file__).resolve().parent.parent / "docs"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    st = Store(tmp_path_factory.mktemp("report") / "r.duckdb")
    t, n, nk, mt = ncu_pair("rt", "rn", mismatch=True)
    write(st, [t, n], request_id="q-ncu")
    st.write({"ncu_kernels": nk, "metrics": mt})
    st.write(
        {
            "provenance": {
                "provenance_id": ["rn:ncu"],
                "run_id": ["rn"],
                "backend": ["ncu"],
                "backend_version": ["ncu 2025.3.1 (synthetic record)"],
                "settings": [json.dumps({"replay_mode": "kernel", "clock_control": "base", "cache_control": "all"})],
                "clocks": [json.dumps({"clock_control": "base"})],
                "timestamps": ["none (counter replay)"],
            }
        }
    )
    join.attribute_request(st, ["rt", "rn"])  # the join runs where the runs end (a Report only reads)
    write(st, [case_run("r1")], request_id="q-cases")
    return st


@pytest.fixture(scope="module")
def report(store: Store) -> Report:
    return Report(store, ["rt", "rn"])


def row(report: Report, path: str, signal: str) -> object:
    [r] = [r for r in report.regions if r.path == path and r.signal == signal]
    return r


def test_region_table_inclusive_exclusive_and_repetitions(report: Report) -> None:
    outer = row(report, "outer", "gpu.time")
    assert outer.instances == 2 and outer.unit == "ns"  # type: ignore[attr-defined]
    # repetition 0: 800 + 1000 + 6000 + 1000 + 6000; repetition 1 the same
    assert outer.median == 14_800 and outer.exclusive_median == 800  # type: ignore[attr-defined]
    assert outer.reps == 2 and outer.rep_median == 14_800  # type: ignore[attr-defined]
    inner = row(report, "outer/inner", "gpu.time")
    assert inner.instances == 4 and inner.rep_median == 14_000  # two inner instances per repetition  # type: ignore[attr-defined]
    assert outer.attribution == "exact" and outer.shares == {"exact": 1.0}  # type: ignore[attr-defined]
    # host.wall comes from the timing run, not from the ncu run (replay perturbs host time)
    assert row(report, "outer", "host.wall").runs == "rt"  # type: ignore[attr-defined]
    text = report.region_table()
    assert "outer/inner" in text and "exclusive" in text and "14.8 µs" in text


def test_kernel_and_counter_tables_join_by_ordinal(report: Report) -> None:
    k = {(r.path, r.ordinal, r.name): r for r in report.kernels}
    add = k[("outer/inner", 1, "add")]
    assert add.launches == 4 and add.median_ns == 6_000
    # ncu counters of the matched kernels only: the mismatched `add_autotuned` is not forced onto `add`
    assert add.counters["hw:dram__bytes_read.sum"] == (5_000.0, "byte")
    counters = {(c.path, c.signal): c for c in report.counters}
    dram = counters[("outer/inner", "hw:dram__bytes_read.sum")]
    assert dram.shares == {"ordinal": 0.75, "mismatch": 0.25}
    assert "hw:dram__bytes_read.sum" in report.counter_table()
    # the counters say what they were read under: ncu's replay mode, locked clocks and flushed caches
    assert "replay_mode=kernel, clock_control=base, cache_control=all" in dram.settings


def test_attribution_summary_and_coverage(report: Report) -> None:
    a = {r.evidence: r for r in report.attribution}
    assert a["kernel"].shares == {"exact": 1.0}
    assert a["ncu_kernel"].shares == pytest.approx({"ordinal": 0.8, "mismatch": 0.2})
    cov = report.coverage()
    assert any("20.0% mismatch" in c for c in cov)
    assert any("add_autotuned" in c for c in cov)  # the difference is shown, not just counted


def test_every_table_as_polars(report: Report) -> None:
    for name in TABLES:
        df = report.to_polars(name)
        assert df.height == len(report.rows(name)), name
    regions = report.to_polars("regions")
    assert {"path", "signal", "median", "exclusive_median", "rep_median", "unit", "shares"} <= set(regions.columns)
    with pytest.raises(ValueError, match="the tables are"):
        report.rows("nope")  # type: ignore[arg-type]


def test_json_form_follows_its_schema(report: Report) -> None:
    import jsonschema

    doc = json.loads(report.to_json())
    assert doc["schema"] == SCHEMA
    schema = json.loads((DOCS / "report-json.schema.json").read_text())
    jsonschema.validate(doc, schema)
    first = doc["regions"][0]
    assert set(first) >= {"path", "signal", "median", "unit", "shares", "provenance"}
    assert "trace_query" in doc["rules"]


def test_every_value_traces_to_run_backend_and_settings(report: Report) -> None:
    for r in report.regions + report.counters:  # type: ignore[operator]
        assert r.provenance, (r.path, r.signal)
        rows = report.trace(r.path, r.signal)
        assert rows
        for t in rows:
            assert t["provenance_id"] in r.provenance
            assert t["backend_version"] and t["timestamps"], t  # who measured, and how its times were taken
            assert t["join_rules"].startswith("argus_lab.join")
    [gpu] = [p for p in report.provenance if p.provenance_id == "rt:cupti"]
    assert gpu.settings == {"kinds": ["CONCURRENT_KERNEL"]}
    assert "rt:cupti" in report.provenance_text()


def test_text_methods_still_work(report: Report) -> None:
    text = report.text()
    for part in ("kernels:", "counters:", "attribution:", "missing coverage:", "why a separate run"):
        assert part in text
    assert "versions:" in report.provenance_text()
    assert report._repr_mimebundle_()["text/plain"] == text


def test_report_never_writes_and_says_the_join_is_pending(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs the join has not processed: the Report reads them without ever asking the store for a write connection
    (the store's write lock), shows no values for them and says how to join them."""
    asked: list[bool] = []
    real = Store.connect

    def connect(self: Store, *, write: bool = False) -> Any:
        asked.append(write)
        return real(self, write=write)

    monkeypatch.setattr(Store, "connect", connect)
    rep = Report(store, ["r1"])
    rep.text(), rep.to_json(), rep.kernels, rep.compiler  # every table, read
    Report(store, ["rt", "rn"]).to_json()  # a joined report too
    monkeypatch.undo()
    assert asked and not any(asked)
    assert rep.pending == ("r1",) and rep.regions == ()
    [note] = [c for c in rep.coverage() if "join has not run" in c]
    assert f"argus-lab join --store {store.path} --run r1" in note and "attribute_request" in note
    assert "join has not run" in rep.text()
    assert not join.joined_runs(store, ["r1"])  # nothing was joined behind the user's back
    join.attribute_request(store, ["r1"])
    joined = Report(store, ["r1"])
    assert joined.pending == ()
    idle = [r for r in joined.regions if r.path == "idle" and r.signal == "gpu.kernels"]
    assert idle and idle[0].median == 0  # a region that ran no kernel: 0, with no evidence behind it
    assert idle[0].attribution == "no evidence"


def test_mann_whitney_matches_the_textbook_values() -> None:
    u, p = mann_whitney([1, 2, 3], [4, 5, 6])
    assert u == 0 and p == pytest.approx(0.0809, abs=1e-4)  # z = 4 / sqrt(5.25) with continuity correction
    u, p = mann_whitney([1, 2, 2, 3], [2, 3, 3, 4])  # ties: average ranks and tie-corrected variance
    assert u == pytest.approx(3.0)  # a's average ranks 1, 3, 3, 6 -> 13 - 4 * 5 / 2
    assert 0.1 < p < 0.3
    assert mann_whitney([5, 5, 5], [5, 5, 5])[1] == 1.0


def variant_run(run_id: str, slow: float, seed: int, reps: int = 8) -> SynthRun:
    """SYNTHETIC: `reps` repetitions of step{attn; mlp}; attn's kernel takes `slow` x 10 us, +-2% noise."""
    rng = np.random.default_rng(seed)
    ins, ks = [], []
    for rep in range(reps):
        b, i = rep * 1_000_000, 1 + rep * 3
        ins += [
            Inst(i, "step", b, b + 500_000, rep=rep, index=rep),
            Inst(i + 1, "step/attn", b + 1_000, b + 100_000, parent=i, rep=rep, index=rep),
            Inst(i + 2, "step/mlp", b + 200_000, b + 300_000, parent=i, rep=rep, index=rep),
        ]
        a = int(10_000 * slow * (1 + rng.normal(0, 0.02)))
        m = int(20_000 * (1 + rng.normal(0, 0.02)))
        ks += [
            Kern(10 * rep + 1, "attn", b + 2_000, b + 2_000 + a, i + 1),
            Kern(10 * rep + 2, "mlp", b + 201_000, b + 201_000 + m, i + 2),
        ]
    return SynthRun(run_id, instances=ins, kernels=ks, repetitions=reps)


def test_diff_marks_only_changes_beyond_noise(tmp_path: Path) -> None:
    st = Store(tmp_path / "d.duckdb")
    write(st, [variant_run("base", 1.0, 1)], request_id="q-a")
    write(st, [variant_run("faster", 0.8, 2)], request_id="q-b")
    join.attribute_request(st, ["base"])
    join.attribute_request(st, ["faster"])
    a, b = Report(st, ["base"]), Report(st, ["faster"])
    d = a.diff(b)
    by = {(r.path, r.signal): r for r in d.rows}
    attn = by[("step/attn", "gpu.time")]
    assert attn.significant and attn.verdict == "lower" and attn.p_value is not None and attn.p_value < ALPHA
    assert attn.change == pytest.approx(-0.2, abs=0.03)
    assert not by[("step/mlp", "gpu.time")].significant  # same distribution, different noise draw
    assert not by[("step/mlp", "host.wall")].significant and by[("step/mlp", "host.wall")].verdict == "same"
    # attn got faster: its time, its span (one kernel) and its parent's inclusive time; nothing else
    assert {(r.path, r.signal) for r in d.changed} == {
        ("step/attn", "gpu.time"),
        ("step/attn", "gpu.span"),
        ("step", "gpu.time"),
    }
    assert "Mann-Whitney" in d.text() and "*" in d.text()
    assert d.to_polars().height == len(d.rows)
    assert json.loads(json.dumps(d.to_json()))["rule"] == d.rule
    assert not any(math.isnan(r.change or 0.0) for r in d.rows)
    # against a report with no runs nothing was measured in B (not "gone"), and the other way round in A;
    # neither counts as a change
    none = a.diff(Report(st, []))
    assert {r.verdict for r in none.rows} == {"not measured in B"} and none.changed == ()
    assert {r.verdict for r in Report(st, []).diff(a).rows} == {"not measured in A"}


def test_diff_says_gone_only_when_the_other_side_measured_the_signal() -> None:
    """A region without values in B is "gone" when B measured the same signal elsewhere, and "not measured in B"
    when B has no value of that signal at all (its request did not ask for it)."""
    import numpy as np

    from argus_lab.report.diff import compare

    v = np.array([1.0, 2.0, 3.0])
    base = {("step", "host.wall"): v, ("step/attn", "host.wall"): v, ("step", "gpu.time"): v}
    other = {("step", "host.wall"): v}
    verdicts = {(r.path, r.signal): r.verdict for r in compare(base, other, {})}
    assert verdicts[("step/attn", "host.wall")] == "gone"
    assert verdicts[("step", "gpu.time")] == "not measured in B"
    back = {(r.path, r.signal): r.verdict for r in compare(other, base, {})}
    assert back[("step/attn", "host.wall")] == "new"
    assert back[("step", "gpu.time")] == "not measured in A"


def test_join_counts_are_stable_under_rerun(store: Store) -> None:
    before = join.attribute_request(store, ["rt", "rn"]).counts
    assert join.attribute_request(store, ["rt", "rn"]).counts == before
