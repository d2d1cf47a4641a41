"""The profile-guided overlap study as recorded on two H200s (tests/data/gpu/two_ranks/pgo/, issue 17).

Recorded by `ISSUE17_LIMIT=380 scripts/gpu/two_gpu_study.sh OUT` on nvidia-h200-x2 (tests/data/README.md): five
settings, each measured by `argus-lab run` under torchrun (two ranks, NCCL), the rule's decision, the plain
throughput of baseline against changed configuration, and `Report.diff` of the argus runs.  These tests re-derive
from the recorded stores what the study printed: the rule reads the same figures and takes the same decision,
`Report.diff` gives the same verdicts, and the table states every setting and the mean honestly (including the
slower one).
"""

from __future__ import annotations

import gzip
import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import pgo_study as ps  # noqa: E402

PGO = ROOT / "tests" / "data" / "gpu" / "two_ranks" / "pgo"
STUDY: dict[str, Any] = json.loads((PGO / "pgo.json").read_text())
RECORDS = {r["setting"]["name"]: r for r in STUDY["settings"]}


def unpacked(name: str, tmp_path: Path) -> Path:
    """The recorded store of setting ``name``, gunzipped into ``tmp_path``."""
    out = tmp_path / f"{name}.duckdb"
    with gzip.open(PGO / "stores" / f"{name}.duckdb.gz") as src, out.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return out


def test_the_recording_is_the_two_gpu_study_of_five_settings() -> None:
    assert not STUDY["cpu_dry_run"]
    assert STUDY["nccl_env"] == {"NCCL_NVLS_ENABLE": "0"}
    assert sorted(RECORDS) == sorted(s.name for s in ps.SETTINGS)
    for rec in RECORDS.values():
        assert set(rec["baseline"]["status"].values()) == {"ok"}, rec["setting"]["name"]
        assert rec["baseline"]["exit"] == 0
        assert rec["throughput"]["rounds"] == [6, 6]


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_the_rule_takes_the_recorded_decision_from_the_stored_evidence(name: str, tmp_path: Path) -> None:
    rec = RECORDS[name]
    store = unpacked(name, tmp_path)
    first = rec["baseline"]["run_ids"][:1]  # the decision was taken on the first baseline process
    figures = ps.summarize(ps.read_evidence(store, first))
    for key in "CKOEW":
        assert figures[key] == pytest.approx(rec["figures"][key], rel=1e-9), (name, key)
    decision = ps.decide(ps.setting_of(rec), rec["baseline_config"], figures, rec["info"])
    assert (decision.rule, decision.change) == (rec["decision"]["rule"], rec["decision"]["change"])
    assert figures["K"] > 0, "NCCL kernels of both ranks are in the evidence"


def test_report_diff_of_the_stored_runs_gives_the_recorded_verdicts(tmp_path: Path) -> None:
    rec = RECORDS["tp-m-c1"]
    store = unpacked("tp-m-c1", tmp_path)
    diff = ps.diff_rows(store, rec["baseline"]["run_ids"], rec["changed"]["run_ids"])
    now = {(r["path"], r["signal"]): r["verdict"] for r in diff["rows"]}
    then = {(r["path"], r["signal"]): r["verdict"] for r in rec["diff"]["rows"]}
    assert now == then
    # four chunks per layer: the all-reduces overlap the next chunk's compute, the exposed time falls
    assert now[("step", "comm.exposed")] == "lower"
    assert now[("step", "comm.overlap")] == "higher"


def test_the_table_states_every_setting_and_the_mean_change(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "render_pgo.py"), str(PGO / "pgo.json")],
        capture_output=True, text=True, check=True, timeout=60,
    ).stdout  # fmt: skip
    changes = [r["throughput"]["change"] for r in RECORDS.values()]
    assert STUDY["mean_throughput_change"] == pytest.approx(statistics.mean(changes))
    assert f"Mean plain throughput change over 5 setting(s): **{100 * statistics.mean(changes):+.1f} %**" in out
    for name, rec in RECORDS.items():
        assert f"`{name}`" in out
        assert rec["throughput"]["verdict"] in out
    # the settings where the change did not help are reported as such
    assert RECORDS["tp-m-c1"]["throughput"]["verdict"] == "slower"
    assert (PGO / "pgo.md").read_text().strip() == out.strip()
