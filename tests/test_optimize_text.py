"""The optimisation loop in words (``Evaluation.text()``, ``SearchResult.text()``/``speedup_text()``): numbers with
their units at a readable precision, attribution as a sentence, a missing speed-up said with why.

Input: the optimisation walk recorded on the H200 (tests/data/gpu/optimize/run2/evidence/optimize_walk.json: the
GEMM fp16 4096^3 evaluations and the evidence-guided search), and SYNTHETIC failing candidates for the speed-ups
that cannot be given.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from argus_lab import optimize as opt

WALK = Path(__file__).parent / "data" / "gpu" / "optimize" / "run2" / "evidence" / "optimize_walk.json"

RAW_FLOAT = re.compile(r"(?<![x\d.])\d+\.\d{3,}")
"""A number printed with three or more decimals (``256.54399394989014``); speed-ups (``x1.223``) may have three."""


@pytest.fixture(scope="module")
def walk() -> dict[str, Any]:
    return json.loads(WALK.read_text())


def _evaluations(walk: dict[str, Any]) -> dict[str, opt.Evaluation]:
    return {
        k: opt.Evaluation.from_dict({**v, "region": walk["region"], "store": ""})
        for k, v in walk["evaluations"].items()
    }


def _readable(text: str) -> None:
    assert not RAW_FLOAT.search(text), RAW_FLOAT.search(text)
    assert "None" not in text and "{" not in text and "': " not in text  # no None, no dict printed as Python


def test_an_evaluation_reads_with_units_and_its_attribution_in_words(walk: dict[str, Any]) -> None:
    default = _evaluations(walk)[walk["default"]["key"]]
    assert default.time is not None and default.time.events_median_ns == pytest.approx(256_543.99, abs=0.01)
    text = default.text()
    _readable(text)
    lines = dict(line.split(None, 1) for line in text.splitlines() if line[:1] != " ")
    assert lines["time"] == (
        "median 252 µs over 10 launches (p25..p75 252 µs..253 µs, spread 0.2%); CUDA events alongside: median 257 µs"
    )
    assert lines["compiler"].startswith("158 registers, no spills (0 B local), 99.3 kB shared, 8 warps, 3 stages")
    assert lines["attribution"] == (
        "kernels: 64% exact, 36% unattributed; region instances, compiler facts, instrumented launches: all exact"
    )
    assert "SM tail 3.2 µs (1.2% of the span)" in lines["phases"]
    assert "one load step every 534 ns, 52% of the tensor cores' peak" in text


def test_every_recorded_evaluation_reads_without_raw_numbers(walk: dict[str, Any]) -> None:
    for ev in _evaluations(walk).values():
        _readable(ev.text())


def test_a_search_says_its_speed_up_with_both_times(walk: dict[str, Any]) -> None:
    evs = _evaluations(walk)
    guided = walk["searches"]["evidence-guided"]
    result = opt.SearchResult("evidence-guided", walk["target"], opt.Budget(candidates=guided["asked"]))
    result.default = evs[guided["default"]["candidate"]["key"]]
    result.best = evs[guided["best"]["candidate"]["key"]]
    result.steps = [opt.Step(**{**s, "params": s["params"]}) for s in guided["steps"]]
    result.stopped = guided["stopped"]
    assert result.speedup == pytest.approx(guided["speedup"])
    best = guided["best"]["candidate"]["key"]
    assert result.speedup_text() == (
        f"speed-up of the best over the default: x{guided['speedup']:.3f} (252 µs -> 206 µs, best {best})"
    )
    text = result.text()
    _readable(text.replace(best, "").replace(guided["default"]["candidate"]["key"], ""))
    assert "  1. ok" in text and "206 µs" in text and text.endswith(f"stopped: {guided['stopped']}")


def _failed(key: dict[str, int], status: str, cause: str) -> opt.Evaluation:
    """SYNTHETIC: a candidate that was not measured."""
    return opt.Evaluation(target="gemm", region={}, candidate=opt.Candidate.of(key), status=status, cause=cause)  # type: ignore[arg-type]


def test_a_missing_speed_up_is_said_in_words_with_why(walk: dict[str, Any]) -> None:
    evs = _evaluations(walk)
    good = evs[walk["default"]["key"]]
    nothing = opt.SearchResult("timing-only", "gemm", opt.Budget(candidates=2), stopped="budget spent: 0 of 2")
    assert nothing.speedup is None
    assert nothing.speedup_text() == (
        "no speed-up of the best over the default: the search measured nothing (budget spent: 0 of 2)"
    )
    broken = opt.SearchResult("timing-only", "gemm", opt.Budget(candidates=2))
    broken.default = _failed({"block_m": 256}, "compile_failed", "out of resources: shared memory\ntraceback ...")
    broken.best = good
    assert broken.speedup is None
    said = broken.speedup_text()
    assert said.startswith("no speed-up of the best over the default: the default block_m=256 was not measured")
    assert "(compile_failed: out of resources: shared memory)" in said and "traceback" not in said
    assert "fix the default or measure it again" in said
    assert "None" not in said
    no_best = opt.SearchResult("timing-only", "gemm", opt.Budget(candidates=2))
    no_best.default = good
    assert "no candidate was measured ok" in no_best.speedup_text()
    text = broken.default.text()
    assert "status      compile_failed: out of resources: shared memory (the whole cause in .cause)" in text
    assert "time        not measured (compile_failed)" in text
