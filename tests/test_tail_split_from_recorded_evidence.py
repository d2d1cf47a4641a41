"""The evidence-guided rules read the recorded H200 table (tests/data/gpu/optimize_table; first written against a
recording made before the tail split existed, and true of every recording since) and propose the tail split of the
GEMM space where the waves are quantised.

The recorded evidence of a configuration's default candidate (128 x 128 x 64, 3 stages, 8 warps: its measured SM
tail, its compiler facts, its phases) is given to argus_lab's rules over the space bench/recorded_spaces.py now
holds (with ``tail_split``), with bench/replay_table.py's model of tiles and waves.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from argus_lab import optimize as opt  # noqa: E402
from argus_lab.optimize import rules as r  # noqa: E402
from bench.recorded_spaces import GEMM_KEYS, key_of, space  # noqa: E402
from bench.replay_table import H200, PHASE_ROLES, ROLES, ConfigTable, evaluation, load, model  # noqa: E402

DATA = ROOT / "tests" / "data" / "gpu" / "optimize_table"


@pytest.fixture(scope="module")
def table() -> dict[int, ConfigTable]:
    return load(DATA)


def proposals(t: ConfigTable) -> list[r.Proposal]:
    """The rules' proposals for the recorded default candidate, over the space with the tail split."""
    pts = space(t.cfg)
    keys = {key_of(p) for p in pts}
    axes = {k: tuple(sorted({p[k] for p in pts})) for k in GEMM_KEYS}
    sp = opt.Space.of(axes, ROLES["gemm"], lambda c: None if c.key in keys else "not in the space", note="next")
    ctx = r.RuleContext(sp, lambda c: model(t.cfg, c.as_dict()), H200, PHASE_ROLES["gemm"])
    ev = evaluation(t, key_of(t.default()))
    params = ev.candidate.as_dict() | {"tail_split": 1, "warp_spec": False}
    ev = dataclasses.replace(ev, candidate=opt.Candidate.of(params), model=model(t.cfg, params))
    return r.propose(ev, ctx)


@pytest.mark.parametrize("row", [5, 15])
def test_the_tail_role_proposes_the_tail_split_for_quantised_waves(table: dict[int, ConfigTable], row: int) -> None:
    """Rows 5 and 15 (3072 x 3072 x 8192): 576 tiles are 4.36 waves; the recorded SM tail is 18-19 % of the span.
    The tail role's first proposal splits only the last wave's tiles, ahead of split-K."""
    t = table[row]
    ev = evaluation(t, key_of(t.default()))
    assert ev.phases is not None and ev.phases.tail_fraction > r.TAIL_FRACTION
    tail = [p for p in proposals(t) if p.rule == "tail"]
    assert tail, "the tail rule proposed nothing"
    assert tail[0].candidate.get("tail_split") == 2 and tail[0].candidate.get("split_k") == 1
    assert "4.36 waves" in tail[0].reason
    split_k = [p for p in tail if p.candidate.get("split_k") == 2]
    assert not split_k or split_k[0].priority < tail[0].priority


def test_quantised_waves_propose_the_tail_split_under_a_short_tail(table: dict[int, ConfigTable]) -> None:
    """Row 10 (256 x 14336 x 4096): 224 tiles are 1.70 waves (wave efficiency 0.85), but the 40 SMs idle in the
    second wave are fewer than half, so the recorded tail is short (2.8 % in the second recording, 4.2 % in the
    fifth).  The tail role proposes the fewest slices that balance the waves: 4 (2 or 3 slices still end after 2
    tile times; 4 after 1.75)."""
    t = table[10]
    ev = evaluation(t, key_of(t.default()))
    assert ev.phases is not None and ev.phases.tail_fraction < r.TAIL_FRACTION
    tail = [p for p in proposals(t) if p.rule == "tail"]
    assert [p.candidate.get("tail_split") for p in tail] == [4]
    assert "the waves are quantised: 1.70 waves, wave efficiency 0.85" in tail[0].reason


@pytest.mark.parametrize("row", [2, 24])
def test_no_tail_split_without_a_recorded_tail_or_with_one_wave(table: dict[int, ConfigTable], row: int) -> None:
    """Row 2 (2048^3: 256 tiles, 1.94 waves, wave efficiency 0.97) has a 1 % tail; row 24 (fp8 256 x 8192: 128
    tiles, one wave) is not a tail split's case: neither gets one proposed."""
    assert all(p.candidate.get("tail_split") == 1 for p in proposals(table[row]))
