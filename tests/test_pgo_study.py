"""The PGO study's evidence reading and rule (scripts/pgo_study.py) and its table (scripts/render_pgo.py).

The evidence path runs on the recorded two-H200 DDP store (tests/data/gpu/two_ranks); the rule's branches on
SYNTHETIC figures (one per branch, built by hand); the renderer on a SYNTHETIC pgo.json."""

from __future__ import annotations

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

from argus_lab.store import Store  # noqa: E402

DATA = ROOT / "tests" / "data" / "gpu" / "two_ranks"
DDP = next(s for s in ps.SETTINGS if s.name == "ddp-s-b25")
TP = next(s for s in ps.SETTINGS if s.name == "tp-m-c1")


def test_evidence_from_the_recorded_ddp_store_feeds_the_rule(tmp_path: Path) -> None:
    path = tmp_path / "ddp.duckdb"
    shutil.copy(DATA / "ddp_train_2r.duckdb", path)
    runs = json.loads((DATA / "runs.json").read_text())["stores"]["ddp_train_2r"]["requests"]
    (run,) = next(r for r in runs if r["label"] == "ddp-temporal")["runs"]
    ev = ps.read_evidence(path, [run])
    f = ps.summarize(ev)
    st = Store(path)
    # the figures are the medians over the measured `step` instances of the rank with the most exposed time
    for sig, key in (("host.wall", "W"), ("comm.exposed", "E"), ("comm.overlap", "O"), ("comm.kernels", "K")):
        vals = [
            v
            for (v,) in st.rows(
                "SELECT v.inclusive FROM instance_values v JOIN region_instances i USING (run_id, instance_id) "
                "WHERE i.path = 'step' AND NOT i.warmup AND v.signal = ? AND i.rank = ? AND run_id = ?",
                [sig, int(f["rank"]), run],
            )
        ]
        assert f[key] == pytest.approx(statistics.median(vals)), sig
    assert f["comm_path"] == "step/backward"  # DDP's bucket all-reduces, attributed to the backward
    assert f["comm_own_stream"]  # NCCL's stream 17, compute on 7
    backward = [b for b in ev["buckets"] if b["path"] == "step/backward"]
    assert {b["rank"] for b in backward} == {0, 1}
    assert max(b["bucket"] for b in backward) == 12  # 13 rebuilt DDP buckets: indices 0..12 in launch order
    assert {c["rank"] for c in ev["clock_offsets"]} == {0, 1}
    d = ps.decide(DDP, dict(DDP.baseline), f, {"grad_mb": 420.0})
    assert d.rule in {"R1", "R2", "R3", "R4", "R5"} and d.reason  # there is communication to reason about


def _figures(**kw: Any) -> dict[str, Any]:
    base = {"C": 0.0, "K": 0.0, "O": 0.0, "E": 0.0, "W": 10e6, "S": 0.0, "comm_own_stream": True}
    return {**base, **kw}


@pytest.mark.parametrize(
    ("setting", "config", "figures", "rule", "change"),
    [  # SYNTHETIC figures, one per branch of RULE (ns)
        (DDP, {"bucket_cap_mb": 25.0}, _figures(), "R0", {}),
        (DDP, {"bucket_cap_mb": 25.0}, _figures(K=8, C=4e6, E=2e6, S=1.5e6), "R1", {}),
        (DDP, {"bucket_cap_mb": 1.0}, _figures(K=200, C=4e6, E=2e6), "R2", {"bucket_cap_mb": 8.0}),
        (TP, {"chunks": 4}, _figures(K=64, C=1e6, E=1e6), "R2", {"chunks": 2}),
        (DDP, {"bucket_cap_mb": 25.0}, _figures(K=8, C=4e6, E=0.2e6, O=3.8e6), "R3", {}),
        (DDP, {"bucket_cap_mb": 1000.0}, _figures(K=1, C=4e6, E=4e6), "R4", {"bucket_cap_mb": 52.5}),
        (TP, {"chunks": 1}, _figures(K=8, C=4e6, E=4e6), "R4", {"chunks": 4}),
        (DDP, {"bucket_cap_mb": 25.0}, _figures(K=8, C=4e6, E=2e6, O=2e6), "R5", {"nccl_priority": "high"}),
        (DDP, {"bucket_cap_mb": 25.0}, _figures(K=8, C=4e6, E=2e6, O=2e6, comm_own_stream=False), "R5", {}),
    ],
)
def test_each_branch_of_the_rule(setting: ps.Setting, config: dict[str, Any], figures: dict[str, Any], rule: str,
                                 change: dict[str, Any]) -> None:  # fmt: skip
    d = ps.decide(setting, config, figures, {"grad_mb": 420.0})
    assert (d.rule, d.change) == (rule, change), d.reason


def test_plain_rounds_are_judged_like_the_diff() -> None:
    a = [10.0, 10.1, 9.9, 10.0, 10.2, 9.8]
    assert ps.judge(a, [x * 1.1 for x in a])["verdict"] == "faster"
    assert ps.judge(a, list(reversed(a)))["verdict"] == "same"
    assert ps.judge(a[:4], a[:4])["verdict"] == "too few rounds"  # 4 rounds a side cannot reach p < 0.01
    assert ps.judge([], a) == {"verdict": "not measured"}


def test_the_time_limit_refuses_a_launch_that_would_not_fit() -> None:
    clock = ps.Clock(limit_s=ps.RESERVE_S + 40.0)
    assert clock.fits("argus")  # 40 s left, the first guess is 28 s (+10 %)
    assert not clock.fits("argus", launches=2)
    clock.took("argus", 20.0, "tp-m-c1")
    clock.took("argus", 38.0, "ddp-m-b25")
    assert clock.fits("argus", "tp-m-c1")  # that setting's own launch took 20 s
    assert not clock.fits("argus", "ddp-m-b25")  # 38 s + 10 % does not fit
    assert not clock.fits("argus", "ddp-s-b1")  # never launched: the slowest so far (38 s) is expected


def test_render_pgo_prints_a_row_per_setting_and_says_what_is_missing(tmp_path: Path) -> None:
    study = {  # SYNTHETIC
        "settings": [
            {
                "setting": {"name": "ddp-s-b1000", "about": "one bucket"},
                "figures": {"rank": "1", "W": 40e6, "C": 6e6, "K": 1, "O": 0.0, "E": 6e6, "S": 2e4},
                "decision": {"rule": "R4", "change": {"bucket_cap_mb": 52.5}, "reason": "serialized"},
                "throughput": {
                    "base_median": 20.0,
                    "other_median": 22.0,
                    "change": 0.1,
                    "base_min_max": [19, 21],
                    "other_min_max": [21, 23],
                    "rounds": [6, 6],
                    "verdict": "faster",
                    "p_value": 0.004,
                },
                "diff": {
                    "rows": [
                        {
                            "path": "step",
                            "signal": "host.wall",
                            "base_median": 50e6,
                            "other_median": 45e6,
                            "change": -0.1,
                            "verdict": "lower",
                            "p_value": 0.001,
                            "n_base": 12,
                            "n_other": 12,
                        }
                    ]
                },
            },
            {"setting": {"name": "ddp-m-b25", "about": "m"}, "error": "the time limit was reached before its baseline"},
        ],
        "mean_throughput_change": 0.1,
        "seconds": 250.0,
    }
    path = tmp_path / "pgo.json"
    path.write_text(json.dumps(study))
    out = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "render_pgo.py"), str(path)], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    rows = [line for line in out.stdout.splitlines() if line.startswith("| `")]
    assert len(rows) == 2
    assert "+10.0 % **faster**, p=0.004" in rows[0] and "50.00 ms -> 45.00 ms (-10.0 %, lower" in rows[0]
    assert "the time limit was reached before its baseline" in rows[1]
    assert "**+10.0 %**" in out.stdout and "+7 %" in out.stdout
    bad = subprocess.run([sys.executable, str(ROOT / "scripts" / "render_pgo.py"), str(tmp_path / "nope.json")],
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert bad.returncode == 2 and "give the pgo.json" in bad.stderr
