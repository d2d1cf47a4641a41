"""The recorded H200 table (tests/data/gpu/optimize_table/, recorded by bench/record_candidates.py through
``OUT=$OUT GPU_CHECK_PARTS=table scripts/gpu-check``) re-derived on the CPU: the report and the section of
docs/benchmarks.md must be what bench/replay_report.py computes from the recorded files now.

Until the recording is committed, the docs section must say so (and the re-derivation is skipped).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import replay_report as rr  # noqa: E402
from bench.recorded_configs import CONFIGS  # noqa: E402
from bench.replay_table import load  # noqa: E402

DATA = ROOT / "tests" / "data" / "gpu" / "optimize_table"
DOCS = ROOT / "docs" / "benchmarks.md"


def _section() -> str:
    text = DOCS.read_text()
    return text.split(rr.BEGIN, 1)[1].split(rr.END, 1)[0]


def _recorded() -> bool:
    return any(DATA.glob("candidates.jsonl*"))


def test_the_docs_section_is_the_recorded_one_or_says_it_is_not_recorded() -> None:
    section = _section()
    if not _recorded():
        assert section.strip().startswith("Not recorded yet")
        return
    doc = json.loads((DATA / "report.json").read_text())
    assert not doc["synthetic"]
    assert section.lstrip("\n") == rr.markdown(doc, rr.DEFAULT_COMMAND)  # write_docs puts the section on its own line


@pytest.mark.skipif(not _recorded(), reason="the H200 recording is not committed yet (tests/data/gpu/optimize_table)")
def test_the_committed_report_is_what_the_recorded_files_give() -> None:
    doc = rr.build(DATA)
    committed = json.loads((DATA / "report.json").read_text())
    fresh = json.loads(json.dumps(doc, default=str))
    for key in ("configurations", "counted", "space_best_beats_autotune", "space_best_beats_vendor",
                "autotune_beats_vendor", "rows"):  # fmt: skip
        assert fresh[key] == committed[key], key
    for budget, rep in fresh["replays"].items():
        for name, s in rep["searchers"].items():
            assert s["per_seed"] == committed["replays"][budget]["searchers"][name]["per_seed"], (budget, name)


@pytest.mark.skipif(not _recorded(), reason="the H200 recording is not committed yet (tests/data/gpu/optimize_table)")
def test_the_recording_covers_the_chosen_configurations_with_both_baselines() -> None:
    tables = load(DATA)
    counted = [t for t in tables.values() if t.usable]
    assert len(counted) >= 44, f"only {len(counted)} of {len(CONFIGS)} configurations finished"
    for t in counted:
        assert len(t.autotune.passes[1]) >= 20 and len(t.vendor.passes[1]) >= 20
        assert t.autotune.picked in t.candidates
