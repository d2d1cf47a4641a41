"""The searches replayed over a recorded table, and the report, on a SYNTHETIC table (tests/recorded_table_synth.py:
made-up times and evidence, not measured) in the files bench/record_candidates.py writes.

What is guarded: the budget counts distinct candidates read and is the same for every searcher; a seed decides a
search; the evidence-fed search reads the optimiser's evidence (it never reads a candidate the compiler facts rule
out, and each of its rule decisions carries the figures it read and a sentence); the report's numbers are the ones
an independent count over the recorded samples gives; the docs section is replaced in place.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from argus_lab import optimize as opt  # noqa: E402
from argus_lab.report.diff import mann_whitney  # noqa: E402
from bench import replay_report as rr  # noqa: E402
from bench.recorded_spaces import default, space  # noqa: E402
from bench.replay_searches import SEARCHERS, context, evolve, rules  # noqa: E402
from bench.replay_table import ConfigTable, evaluation, load  # noqa: E402
from tests.recorded_table_synth import write  # noqa: E402


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write(tmp_path_factory.mktemp("synthetic"))


@pytest.fixture(scope="module")
def tables(synth: Path) -> dict[int, ConfigTable]:
    return load(synth)


def test_the_table_reads_back_every_candidate_with_its_evidence(tables: dict[int, ConfigTable]) -> None:
    t = tables[1]
    assert t.usable and len(t.candidates) == len(space(t.cfg))
    ok = [r for r in t.candidates.values() if r.ok]
    ev = evaluation(t, ok[0].key)
    assert ev.ok and ev.time is not None and ev.time.n == 30
    assert ev.roofline is not None and 0 < ev.roofline.fraction <= 1
    assert ev.compiled is not None and ev.compiled.occupancy is not None
    assert ev.phases is not None and ev.phases.share("load") is not None
    failed = [r for r in t.candidates.values() if r.status == "compile_failed"]
    assert failed and not evaluation(t, failed[0].key).ok


@pytest.mark.parametrize("name", sorted(SEARCHERS))
def test_every_searcher_reads_at_most_its_budget_of_distinct_candidates(
    tables: dict[int, ConfigTable], name: str
) -> None:
    for t in tables.values():
        for budget in (4, 10):
            r = SEARCHERS[name](t, budget, 3)
            assert len(r.read) == len(set(r.read)) and len(r.read) <= budget
            assert r.read[0] == opt.Candidate.of(default(t.cfg)).key  # every search starts at the default
            if name != "rules":
                assert len(r.read) == budget  # the evolutionary search spends its budget
            assert r.best in r.read


def test_a_seed_decides_the_search_and_seeds_differ(tables: dict[int, ConfigTable]) -> None:
    t = tables[25]
    a, b = evolve(t, 10, 1, evidence=False), evolve(t, 10, 1, evidence=False)
    assert a.read == b.read
    assert len({tuple(evolve(t, 10, s, evidence=False).read) for s in range(5)}) > 1


def test_the_evidence_fed_search_never_reads_what_the_compiler_rules_out(tables: dict[int, ConfigTable]) -> None:
    spilling_read = {"timing": 0, "evidence": 0}
    for t in tables.values():
        spills = {k for k, r in t.candidates.items() if (r.cuobjdump.get("local_bytes") or 0) > 0}
        for seed in range(5):
            for name, flag in (("timing", False), ("evidence", True)):
                r = evolve(t, 12, seed, evidence=flag)
                spilling_read[name] += len(spills & set(r.read))
            skips = [d for d in evolve(t, 12, seed, evidence=True).decisions if d.action == "skip"]
            assert all(d.candidate not in evolve(t, 12, seed, evidence=True).read for d in skips)
    assert spilling_read["evidence"] == 0 < spilling_read["timing"]


def test_rule_decisions_carry_the_evidence_they_read_and_a_sentence(tables: dict[int, ConfigTable]) -> None:
    rule_names = {name for name, _ in opt.RULES}
    seen = 0
    for t in tables.values():
        for d in evolve(t, 12, 0, evidence=True).decisions:
            assert d.text
            if d.source in rule_names:
                seen += 1
                assert d.parent is not None and d.evidence["candidate"] == d.parent
                assert "median_ns" in d.evidence and "registers" in d.evidence
                assert d.parent in d.text
    assert seen > 0


def test_a_rule_move_lands_on_a_recorded_candidate_with_the_moved_value(tables: dict[int, ConfigTable]) -> None:
    t = tables[1]
    ctx = context(t)
    start = opt.Candidate.of(default(t.cfg))  # 128 x 128 x 64, 3 stages
    up = ctx.move(start, "stages", 1)
    assert up is not None and up.key in t.candidates and up.get("num_stages") == 4
    down = ctx.move(start, "tile_m", -1)
    assert down is not None and down.key in t.candidates and down.get("block_m") == 64
    assert rules(t, 6).read[0] == start.key


def test_the_report_counts_what_an_independent_count_gives(synth: Path, tables: dict[int, ConfigTable]) -> None:
    doc = rr.build(synth, seeds=(0, 1), budgets=(8,))
    rep = doc["replays"]["8"]["searchers"]["evidence"]
    for seed in (0, 1):
        improved, logs = 0, []
        for t in tables.values():
            r = evolve(t, 8, seed, evidence=True)
            a = t.autotune.passes[1]
            b = t.candidates[r.best].samples
            noise = abs(np.median(t.autotune.passes[2]) / np.median(a) - 1)
            speed = float(np.median(a) / np.median(b))
            _, p = mann_whitney(a, b)
            improved += bool(p < 0.01 and speed > 1 + max(0.01, noise))
            logs.append(np.log(speed))
        row = rep["per_seed"][seed]
        assert row["improved"] == improved
        assert row["geomean"] == pytest.approx(float(np.exp(np.mean(logs))), rel=1e-12)
    assert doc["synthetic"] and doc["counted"] == len(tables)


def test_markdown_says_synthetic_and_the_docs_section_is_replaced_in_place(synth: Path, tmp_path: Path) -> None:
    doc = rr.build(synth, seeds=(0,), budgets=(10,))
    md = rr.markdown(doc, "synthetic")
    assert md.startswith("**SYNTHETIC TABLE**") and "replay the recorded table" in md
    docs = tmp_path / "b.md"
    docs.write_text("# Benchmarks\n\nbefore\n")
    rr.write_docs(docs, md)
    rr.write_docs(docs, md.replace("SYNTHETIC TABLE", "SECOND"))
    text = docs.read_text()
    assert text.count(rr.BEGIN) == 1 and "SECOND" in text and "**SYNTHETIC TABLE**" not in text
    assert text.startswith("# Benchmarks\n\nbefore\n")


def test_the_command_line_writes_report_decisions_and_markdown(synth: Path) -> None:
    assert rr.main([str(synth), "--seeds", "2"]) == 0
    doc = json.loads((synth / "report.json").read_text())
    assert doc["schema"] == rr.SCHEMA and doc["replays"]["10"]["seeds"] == [0, 1]
    dec = json.loads((synth / "decisions.json").read_text())
    assert set(dec) == {t.cfg.label for t in load(synth).values()}
    assert (synth / "report.md").read_text().startswith("**SYNTHETIC")


def test_a_packed_recording_reads_the_same(synth: Path, tmp_path: Path) -> None:
    import shutil

    copy = tmp_path / "packed"
    shutil.copytree(synth, copy)
    rr.pack(copy)
    assert not list(copy.glob("*.jsonl")) and len(list(copy.glob("*.jsonl.gz"))) == 4
    a, b = load(synth), load(copy)
    assert a.keys() == b.keys()
    for n in a:
        assert a[n].candidates.keys() == b[n].candidates.keys()
        assert all(np.array_equal(a[n].candidates[k].samples, b[n].candidates[k].samples) for k in a[n].candidates)
        assert np.array_equal(a[n].autotune.passes[2], b[n].autotune.passes[2])


def test_the_run_facts_come_from_the_gpu_checks_log_when_record_json_did_not_come_back(tmp_path: Path) -> None:
    """The device tool once returned only 8 files and record.json was lost: the report then reads the versions,
    the device and the wall time from the GPU check's log (its lines as scripts/gpu-check prints them)."""
    log = (
        "== gpu-check 2026-12-02T12:18:39Z python=/opt/torch/.venv/bin/python3 parts=[table]\n"
        "name, driver_version, clocks.current.sm [MHz]\nNVIDIA H200, 580.159.04, 345 MHz\n"
        "torch 2.11.0+cu130 triton 3.6.0 duckdb 2.0.1\nplan: 47 configurations\ndone in 81.7 s: /root/out/table\n"
    )
    (tmp_path / "record.log").write_text(log)
    facts = rr.record_facts(tmp_path)
    assert facts == {"source": "record.log", "torch": "2.11.0+cu130", "triton": "3.6.0", "device": "NVIDIA H200",
                     "wall_s": 81.7}  # fmt: skip
    (tmp_path / "record.json").write_text(json.dumps({"torch": "x", "wall_s": 1.0}))
    assert rr.record_facts(tmp_path) == {"torch": "x", "wall_s": 1.0}  # the recorder's own facts win
    assert rr.record_facts(tmp_path / "missing") == {}


def test_install_unpacks_a_gpu_check_tarball_and_keeps_the_previous_report(synth: Path, tmp_path: Path) -> None:
    """The GPU check's part table returns one tarball (OUT/table.tgz holding table/); installing it replaces the
    recording in the data folder, drops the old one's files, and keeps the old report as previous/report.md."""
    import shutil
    import tarfile

    stage = tmp_path / "out" / "table"
    stage.mkdir(parents=True)
    for f in [*synth.glob("*.jsonl*"), synth / "plan.json", synth / "record.json"]:  # the recorder's files only
        shutil.copy2(f, stage / f.name)
    tgz = tmp_path / "out" / "table.tgz"
    with tarfile.open(tgz, "w:gz") as tar:
        tar.add(stage, arcname="table")
    data = tmp_path / "data"
    data.mkdir()
    (data / "report.md").write_text("the first recording's report\n")
    (data / "record.log").write_text("the first recording's log\n")
    (data / "phases.jsonl.gz").write_bytes(b"stale")  # a file of the old recording the new one may not have
    (data / "README.md").write_text("kept\n")
    rr.install(tgz, data)
    assert (data / "previous" / "report.md").read_text() == "the first recording's report\n"
    assert (data / "previous" / "record.log").read_text() == "the first recording's log\n"
    assert not (data / "report.md").exists() and (data / "README.md").read_text() == "kept\n"
    assert sorted(p.name for p in data.glob("*.jsonl*")) == sorted(p.name for p in synth.glob("*.jsonl*"))
    assert load(data).keys() == load(synth).keys()
    empty = tmp_path / "empty.tgz"
    with tarfile.open(empty, "w:gz") as tar:
        tar.add(data / "README.md", arcname="table/README.md")
    with pytest.raises(FileNotFoundError, match=r"no candidates\.jsonl"):
        rr.install(empty, tmp_path / "elsewhere")
