"""bench/optimize_bench.py end to end on a host region (``--host-demo``: tests/optimize_cpu.py timed by host.wall in
real argus_lab runs), its verdicts, and notebooks/optimize.ipynb on the walk evidence that run records.

The H200 run (scripts/gpu/optimize_bench.sh) uses the same driver with the GEMM and attention targets; here the driver's
bookkeeping, confirmation runs, verdicts, result files and table are exercised without a GPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.optimize_bench import fit_budget, geomean, judge  # noqa: E402


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("demo")
    cmd = [
        sys.executable, str(ROOT / "bench" / "optimize_bench.py"), str(out / "run"), "--device", "cpu", "--host-demo",
        "--budget", "3", "--budget-s", "240", "--compile-procs", "1", "--cache", str(out / "cache"),
    ]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    return out / "run"


def test_the_driver_writes_results_table_and_walk_evidence(demo: Path) -> None:
    doc = json.loads((demo / "optimize.json").read_text())
    assert doc["schema"] == "argus_lab.optimize-bench/1"
    assert [r["target"] for r in doc["results"]] == ["blocked matmul 96", "blocked matmul 64"]
    for r in doc["results"]:
        assert r["complete"]
        searches = r["searches"]
        assert searches["timing-only"]["asked"] == searches["evidence-guided"]["asked"] == 3
        asked = {s["candidate"] for s in searches["timing-only"]["steps"]} | {
            s["candidate"] for s in searches["evidence-guided"]["steps"]
        }
        assert set(r["evaluations"]) == asked  # every candidate asked was measured once, whoever asked first
        assert r["confirm"]["default"]["status"] == "ok"  # the default measured again in fresh runs
        s = r["summary"]
        assert s["default_ms"] > 0 and s["run_to_run"] is not None
        for name in ("timing-only", "evidence-guided"):
            assert s[name]["speedup"] > 0 and s[name]["verdict"] in ("lower", "higher", "same", "default kept")
    agg = doc["aggregate"]
    assert agg["timing-only"]["configurations"] == agg["evidence-guided"]["configurations"] == 2
    md = (demo / "optimize.md").read_text()
    assert "| 1 | blocked matmul 96 | 3 |" in md and "39/44" in md and "+8.9 %" in md
    walk = json.loads((demo / "evidence" / "optimize_walk.json").read_text())
    assert walk["target"] == "blocked matmul 96" and (demo / "evidence" / "optimize_walk.duckdb.gz").exists()
    pack = json.loads((demo / "evidence" / "optimize_walk.pack.json").read_text())  # packed by the worker meanwhile
    assert pack["target"] == "blocked matmul 96" and pack["runs"] > 0 and pack["tier"] == "all"
    assert not (demo / "evidence" / "optimize_walk.duckdb").exists()
    assert [r["state"] for r in doc["results"]] == ["finished", "finished"]
    lines = (demo / "results" / "worker0-candidates.jsonl").read_text().splitlines()
    assert len(lines) == sum(len(r["evaluations"]) + len(set(map(str, r["confirm"].values()))) for r in doc["results"])
    assert all(p.stat().st_size < 8_000_000 for p in demo.rglob("*") if p.is_file())


def test_the_notebook_walks_the_recorded_evidence(demo: Path) -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(ROOT / "notebooks" / "optimize.ipynb", as_version=4)
    nb.cells = [c for c in nb.cells if "nbval-skip" not in c.get("metadata", {}).get("tags", [])]
    os.environ["ARGUS_OPTIMIZE_EVIDENCE"] = str(demo / "evidence")
    try:
        nbclient.NotebookClient(nb, timeout=300, resources={"metadata": {"path": str(ROOT / "notebooks")}}).execute()
    finally:
        del os.environ["ARGUS_OPTIMIZE_EVIDENCE"]
    text = "\n".join(
        "".join(o.get("text", "")) for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
    )
    assert "blocked matmul 96 on the host" in text
    assert "the evidence-guided search, step by step" in text
    assert "host.wall" in text and "timing-only" in text


def test_judge_uses_the_report_diff_rule() -> None:
    rng = np.random.default_rng(1)
    base = list(1000 + rng.normal(0, 5, 20))
    faster = [v * 0.9 for v in base]
    j = judge(base, faster)
    assert j["verdict"] == "lower" and j["improved"] and j["speedup"] == pytest.approx(1 / 0.9, rel=0.01)
    same = judge(base, list(1000 + rng.normal(0, 5, 20)))
    assert same["verdict"] == "same" and not same["improved"]
    assert judge([], faster)["verdict"] == "not measured"
    assert geomean([1.1, 1.0, 0.0]) == pytest.approx(1.1**0.5)


def test_the_budget_shrinks_for_both_searches_when_time_runs_short() -> None:
    assert fit_budget(8, per_eval_s=0.3, left_s=150.0, left_configs=12) == 8  # 41 evaluations each: room for 8
    assert fit_budget(8, per_eval_s=0.6, left_s=100.0, left_configs=12) == 5  # 13.9 evaluations each
    assert fit_budget(8, per_eval_s=2.0, left_s=10.0, left_configs=12) == 4  # never below 4
