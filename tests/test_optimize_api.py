"""The optimisation loop's contract (argus_lab.optimize), measured for real on a host region.

The target is tests/optimize_cpu.py: a blocked matrix product in NumPy timed by host.wall in real argus_lab runs
into a real DuckDB store; its ``wrong``, ``unbuildable`` and ``crash`` variants are SYNTHETIC failures.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import argus_lab
from argus_lab import optimize as opt
from argus_lab.regions import Region
from tests.optimize_cpu import BlockedMatmul

ROOT = Path(__file__).resolve().parent.parent


def session(tmp_path: Path, **kw: object) -> opt.Session:
    kw.setdefault("signals", "host.wall")
    kw.setdefault("repeat", 3)
    kw.setdefault("warmup", 1)
    kw.setdefault("phases", False)
    return opt.Session(BlockedMatmul(), tmp_path / "opt.duckdb", **kw)  # type: ignore[arg-type]


def ok(block: int) -> dict[str, object]:
    return {"block": block, "variant": "ok"}


def test_the_face_is_argus_lab_optimize_and_loads_lazily() -> None:
    assert argus_lab.optimize is opt
    code = "import sys, argus_lab; print('argus_lab.optimize' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True, timeout=60)
    assert out.stdout.strip() == "False"


def test_budget_stops_after_n_candidates_and_stores_nothing_more(tmp_path: Path) -> None:
    s = session(tmp_path, budget=opt.Budget(candidates=2))
    assert s.evaluate(ok(8)).status == "ok"
    assert s.evaluate(ok(16)).status == "ok"
    over = s.evaluate(ok(32))
    assert over.status == "over_budget"
    assert "2 of 2" in over.cause
    assert over.run_ids == ()
    assert s.measured == 2
    assert len(opt.history(s.store)) == 2
    # a candidate already measured is answered from the record, even with the budget spent
    assert s.evaluate(ok(8)).status == "ok"


def test_budget_in_seconds(tmp_path: Path) -> None:
    s = session(tmp_path, budget=opt.Budget(seconds=1e-3))
    first = s.evaluate(ok(8))  # the seconds run from the first candidate, which is finished
    assert first.status == "ok"
    assert s.evaluate(ok(16)).status == "over_budget"


def test_failed_and_wrong_candidates_are_recorded_as_such(tmp_path: Path) -> None:
    s = session(tmp_path)
    wrong = s.evaluate({"block": 16, "variant": "wrong"})
    unbuildable = s.evaluate({"block": 8, "variant": "unbuildable"})
    crash = s.evaluate({"block": 32, "variant": "crash"})
    assert (wrong.status, unbuildable.status, crash.status) == ("wrong_result", "compile_failed", "launch_failed")
    assert "max |C - A@B| = 1" in wrong.cause
    assert "SYNTHETIC compile failure" in unbuildable.cause
    assert "SYNTHETIC launch failure" in crash.cause
    assert wrong.time is None and not wrong.ok
    assert s.measured == 3  # failures count against the budget
    rows = {h["variant"]: h for h in opt.history(s.store)}
    assert len(rows) == 3
    for h in rows.values():  # each is a failed run of the store with its cause, and its evaluation next to it
        assert h["status"] == "failed"
        assert h["evaluation"] and Path(h["evaluation"]).exists()
    assert rows['block=16,variant="wrong"']["outcome"] == "wrong_result"
    assert "wrong result" in rows['block=16,variant="wrong"']["cause"]
    assert rows['block=8,variant="unbuildable"']["outcome"] == "compile_failed"
    assert rows['block=32,variant="crash"']["outcome"] == "launch_failed"
    # nothing is lost: the failing variants' region instances are in the store too
    assert rows['block=32,variant="crash"']["region_ids"]


def test_every_candidate_is_stored_under_one_region_identity(tmp_path: Path) -> None:
    s = session(tmp_path)
    for b in (8, 16, 32):
        s.evaluate(ok(b))
    s.evaluate({"block": 16, "variant": "wrong"})
    hist = opt.history(s.store, target=s.target.name)
    identity = Region("blocked_matmul", "host", "tests.optimize_cpu").region_id
    assert {rid for h in hist for rid in h["region_ids"]} == {identity}
    assert [h["variant"] for h in hist] == [
        'block=8,variant="ok"',
        'block=16,variant="ok"',
        'block=32,variant="ok"',
        'block=16,variant="wrong"',
    ]
    assert [h["params"]["block"] for h in hist] == [8, 16, 32, 16]
    assert s.history[0].region["region_id"] == identity
    regions = s.store.rows("SELECT DISTINCT region_id, name, kind, module FROM regions")
    assert regions == [(identity, "blocked_matmul", "host", "tests.optimize_cpu")]


def test_evaluation_json_shape_and_round_trip(tmp_path: Path) -> None:
    s = session(tmp_path, include_report=True)
    ev = s.evaluate(ok(16))
    doc = json.loads(json.dumps(ev.to_dict(), allow_nan=False))
    assert doc["schema"] == "argus_lab.optimize/1"
    for key in (
        "target", "region", "candidate", "status", "cause", "time", "roofline", "compiled", "phases", "model",
        "attribution", "run_ids", "store", "seconds", "notes", "report",
    ):  # fmt: skip
        assert key in doc, key
    assert doc["candidate"] == {"key": 'block=16,variant="ok"', "params": {"block": 16, "variant": "ok"}, "label": ""}
    t = doc["time"]
    assert t["signal"] == "host.wall" and t["unit"] == "ns" and t["n"] == 3 and len(t["values"]) == 3
    assert t["p25"] <= t["median"] <= t["p75"]
    assert doc["attribution"] == {"instance": {"exact": 1.0}}
    assert doc["report"]["schema"] == "argus_lab.report-json/1"  # the whole Report, as docs/report-json.md says
    back = opt.Evaluation.from_dict(doc)
    assert back.candidate == ev.candidate and back.time == ev.time and back.status == "ok"
    # the evaluation recorded next to its run is the same object (without the report)
    recorded = opt.load_evaluation(opt.history(s.store)[0]["evaluation"])
    assert recorded.time == ev.time and recorded.report is None


def test_json_in_json_out_and_errors_name_the_fix(tmp_path: Path) -> None:
    s = session(tmp_path)
    doc = json.loads(s.evaluate_json('{"params": {"block": 32, "variant": "ok"}}'))
    assert doc["status"] == "ok"
    bad = json.loads(s.evaluate_json('{"params": {"block": 7, "variant": "ok"}}'))
    assert bad["error"] == "candidate 'block=7,variant=\"ok\"': block=7 is not in the space; block takes 8, 16, 32"
    assert "unknown parameter(s) blk" in json.loads(s.evaluate_json('{"blk": 8, "variant": "ok"}'))["error"]
    assert "JSON object" in json.loads(s.evaluate_json("[1, 2]"))["error"]
    assert "error" in json.loads(s.evaluate_json("{not json"))
    summary = json.loads(json.dumps(s.summary(), allow_nan=False))
    assert summary["measured"] == 1 and summary["best"]["candidate"]["params"] == {"block": 32, "variant": "ok"}


def test_a_repeated_candidate_is_answered_from_the_record_unless_asked_again(tmp_path: Path) -> None:
    s = session(tmp_path)
    first = s.evaluate(ok(8))
    assert s.evaluate(ok(8)) is first and s.measured == 1
    again = s.evaluate(ok(8), again=True)
    assert again.run_ids != first.run_ids and s.measured == 2
    assert len(opt.history(s.store)) == 2


def test_gpu_signals_without_a_gpu_are_skipped_and_stored(tmp_path: Path) -> None:
    from argus_lab.run.machine import gpu_available

    if gpu_available():
        pytest.skip("this machine has a GPU")
    target = BlockedMatmul()
    s = opt.Session(target, tmp_path / "g.duckdb", signals="gpu.time", repeat=3, phases=False)
    ev = s.evaluate(ok(8))
    assert ev.status == "skipped" and "GPU" in ev.cause
    assert target.prepared == 0  # nothing was built for a measurement that cannot happen
    (h,) = opt.history(s.store)
    assert h["status"] == "skipped"


def test_mistakes_get_messages_with_the_fix(tmp_path: Path) -> None:
    with pytest.raises(opt.OptimizeError, match="at least 3 measured"):
        session(tmp_path, repeat=2)
    with pytest.raises(opt.OptimizeError, match="number of measured candidates >= 1"):
        opt.Budget(candidates=0)
    with pytest.raises(opt.OptimizeError, match="seconds > 0"):
        opt.Budget(seconds=-1)
    with pytest.raises(opt.OptimizeError, match="missing parameter"):
        session(tmp_path).evaluate({"block": 8})
    with pytest.raises(opt.OptimizeError, match="mapping of parameter names"):
        opt.Candidate.of([("block", 8)])
    with pytest.raises(opt.OptimizeError, match="JSON scalars"):
        opt.Candidate.of({"block": float("nan")})
    with pytest.raises(opt.OptimizeError, match="unknown role"):
        opt.Space.of({"a": (1,)}, {"tile_q": "a"})
    with pytest.raises(opt.OptimizeError, match="bounded budget"):
        opt.SearchRun(opt.TimingOnly(opt.Space.of({"a": (1,)}), opt.Candidate.of({"a": 1})), opt.Budget())
