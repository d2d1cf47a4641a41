"""The benchmark's table (bench/optimize_table.py) over the first H200 run and merged with a continuation, and the
selection and order of a continuation's configurations (bench/optimize_configs.py, bench/optimize_bench.py).

Input: tests/data/gpu/optimize/run1/, the first H200 run of scripts/gpu/optimize_bench.sh (tests/data/README.md): 24
configurations planned, 9 finished, configuration 10 stopped at the deadline with its searches unfinished, 11-24
not started.
"""

from __future__ import annotations

import itertools
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.optimize_bench import load_configs, parse  # noqa: E402
from bench.optimize_configs import CONFIGS, label, parse_only, run_order  # noqa: E402
from bench.optimize_table import SEARCHES, counted, finished, merge, read_results  # noqa: E402

RUN1 = ROOT / "tests" / "data" / "gpu" / "optimize" / "run1"


def lines_of(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (folder / "results" / "worker0.jsonl").read_text().splitlines()]


def test_a_configuration_stopped_at_the_deadline_is_listed_and_not_counted(tmp_path: Path) -> None:
    raw = {r["target"]: r for r in lines_of(RUN1)}
    stopped = raw[label(CONFIGS[9])]
    assert "summary" in stopped and not stopped["complete"]  # the run wrote what it had, speed-ups of 1.0 included
    assert not finished(stopped)
    # configuration 9 ended at the same deadline after its last confirmation run: finished by the rule
    assert not raw[label(CONFIGS[8])]["complete"] and finished(raw[label(CONFIGS[8])])
    doc = merge(tmp_path, [RUN1])
    by_number = {r["number"]: r for r in doc["results"]}
    assert [by_number[n]["state"] for n in range(1, 25)] == ["finished"] * 9 + ["stopped"] + ["not started"] * 14
    done = [r for r in lines_of(RUN1) if finished(r)]
    assert doc["measured"] == len(done) and doc["not_finished"] == list(range(10, 25))
    for name in SEARCHES:
        agg = doc["aggregate"][name]
        assert agg["configurations"] == len(done)
        assert agg["improved"] == sum(1 for r in done if r["summary"][name]["improved"])
        gm = math.exp(sum(math.log(counted(r["summary"][name])) for r in done) / len(done))
        assert agg["geomean_speedup"] == pytest.approx(gm)
    md = (tmp_path / "optimize.md").read_text()
    assert "| 10 | attn fp16 b1 h32 n4096 d128 causal | 4 | 0.408 ms | - | - | - | - | stopped before it" in md
    assert "| 24 | gemm fp16 2048x8192x1024 | - | - | - | - | - | - | not started: the time budget ended first |" in md
    assert "Finished: 9 of 24 configurations (not finished: 10, 11" in md and "39/44" in md
    assert "evaluations" not in doc["results"][0]  # the merged table points at the runs' result files instead


def test_a_later_run_that_finished_a_configuration_replaces_the_stopped_one(tmp_path: Path) -> None:
    # SYNTHETIC continuation: configuration 9's finished line relabelled as configuration 10's, and configuration 1's
    # line again (finished twice: the first run's is kept)
    raw = {r["target"]: r for r in lines_of(RUN1)}
    cont = tmp_path / "cont"
    (cont / "results").mkdir(parents=True)
    ten = {**raw[label(CONFIGS[8])], "target": label(CONFIGS[9]), "config": CONFIGS[9], "number": 10}
    one = raw[label(CONFIGS[0])]
    (cont / "results" / "worker0.jsonl").write_text(json.dumps(ten) + "\n" + json.dumps(one) + "\n{cut")
    assert [r["target"] for r in read_results(cont)] == [label(CONFIGS[9]), label(CONFIGS[0])]  # the cut line skipped
    doc = merge(tmp_path / "merged", [RUN1, cont])
    by_number = {r["number"]: r for r in doc["results"]}
    assert by_number[10]["state"] == "finished" and by_number[10]["run"] == 2
    assert by_number[1]["run"] == 1 and by_number[1]["also_finished_in"] == [2]
    assert by_number[11]["state"] == "not started"
    assert doc["measured"] == 10 and doc["aggregate"]["evidence-guided"]["configurations"] == 10
    assert [m["run"] for m in doc["runs"]] == [1, 2] and doc["runs"][1]["source"] == str(cont)
    md = (tmp_path / "merged" / "optimize.md").read_text()
    assert "| # | configuration | run | B |" in md and "| 10 | attn fp16 b1 h32 n4096 d128 causal | 2 | 4 |" in md


def test_merge_names_a_folder_without_results(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="has no results/ folder: give the OUT folder of a benchmark run"):
        merge(tmp_path / "m", [tmp_path])


def test_the_continuation_walks_first_and_alternates_gemm_and_attention() -> None:
    assert parse_only("10-24", 24) == list(range(10, 25))
    assert parse_only("13, 10-12", 24) == [13, 10, 11, 12]
    order = run_order(list(range(10, 25)), CONFIGS, 13)
    assert order[0] == 13 and sorted(order) == list(range(10, 25))
    kinds = [CONFIGS[n - 1]["kind"] for n in order]
    assert all(a != b for a, b in itertools.pairwise(kinds))  # 8 GEMMs and 7 attentions: alternating
    assert run_order(list(range(1, 25)), CONFIGS, 1) == list(range(1, 25))  # the full plan's order is its numbering
    cfgs = load_configs(parse(["out", "--only", "10-24", "--walk", "13"]))
    assert [c["number"] for c in cfgs] == order
    assert [c["number"] for c in cfgs if c["walk"]] == [13]
    assert [c["number"] for c in load_configs(parse(["out", "--only", "10-12"])) if c["walk"]] == [11]  # first GEMM


@pytest.mark.parametrize(
    ("spec", "message"),
    [("25", r"outside 1-24"), ("a-3", r"not a number or a range; write e\.g\. --only 10-24"), (",", "selects no")],
)
def test_a_bad_only_names_the_fix(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_only(spec, 24)


def test_the_driver_refuses_a_walk_outside_the_selection_and_a_bad_only(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="--walk 3: configuration 3 is not among those measured"):
        load_configs(parse(["out", "--only", "10-24", "--walk", "3"]))
    res = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "optimize_bench.py"), str(tmp_path / "o"), "--only", "0-3"],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert res.returncode == 2 and "outside 1-24" in res.stderr
