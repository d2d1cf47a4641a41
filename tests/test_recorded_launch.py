"""The recorded table's launches without a GPU: the JIT calls bench/record_candidates.py makes, run in Triton's
interpreter (``TRITON_INTERPRET=1``, NumPy) against torch on small shapes, and the compile processes' ``warmup``
for sm_90 that fills Triton's cache.

The interpreter runs the very argument lists :func:`bench.recorded_launch.call` builds (strides, the K-major B of
fp8 GEMMs, a short query against a longer KV cache), so a wrong stride or a kernel that ignores ``n_kv`` fails here.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("triton")
pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.recorded_configs import CONFIGS, Config  # noqa: E402
from bench.recorded_launch import KERNELS, events_per_slot, programs, scratch_shapes, tiles, unit_key  # noqa: E402
from bench.recorded_spaces import ATTN_SPLIT, GEMM_SPLIT, GEMM_TAIL, autotune_list, default, space  # noqa: E402

INTERPRET = """
import torch, torch.nn.functional as F
import triton.runtime.interpreter as interp

# Triton 3.6's interpreter turns a program id (a 1-element NumPy array) into a loop bound with int(), which NumPy 2
# refuses for arrays of one dimension; the kernels are unchanged.
_patch = interp._patch_lang_tensor
def _patched(tensor, scope):
    _patch(tensor, scope)
    scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))
interp._patch_lang_tensor = _patched

from bench.recorded_configs import Config
from bench.recorded_launch import call, kernel_fn, scratch

torch.manual_seed(0)
worst = 0.0
def run(cfg, p, t, out):
    # a split candidate's scratch as the recorder makes it; launched twice on it: the kernels must leave their
    # per-tile counters at zero, or the second launch reduces at the wrong slice
    t = t | scratch(cfg, p, "cpu", sms=2)
    c = call(cfg, p, t, instrumented=False, sms=2)
    for _ in range(2):
        out.fill_(float("nan"))
        kernel_fn(c)[(c.grid,)](*c.args, **dict(c.kwargs))
    if "locks" in t:
        assert int(t["locks"].abs().sum()) == 0, "split counters not reset"
    return out

gp = {"block_m": 16, "block_n": 32, "block_k": 16, "group_m": 2, "num_warps": 4, "num_stages": 2, "ctas_per_sm": 2}
# the persistent kernel, split-K (8 slices of 5 k-steps: some slices are empty) and the TMA kernel (N = 72 leaves
# a partial 32-column tile that the descriptors' loads pad and their stores clip); the tail split on 4 programs
# (2 SMs x 2): 6 tiles are one whole wave and 2 tiles in 3 slices; 50 x 40 is 4 x 2 partial tiles, a whole number
# of waves (nothing split); 3 tiles are fewer than the programs (every tile in 4 slices, one of them empty)
cases = [(1, False, 1, 48, 64), (2, False, 1, 48, 64), (3, False, 1, 48, 64), (8, False, 1, 48, 64),
         (1, True, 1, 48, 72), (1, False, 3, 48, 64), (1, False, 2, 50, 40), (1, False, 4, 48, 32)]
for split_k, tma, tail, m, n in cases:
    for transposed in (False, True):
        cfg = Config("gemm", "fp8" if transposed else "fp16", "test", m=m, n=n, k=80)
        a = torch.randn(m, 80)
        b = torch.randn(n, 80).t() if transposed else torch.randn(80, n)  # fp8 configs take B K-major
        c = torch.empty(m, n)
        out = run(cfg, gp | {"split_k": split_k, "tma": tma, "tail_split": tail}, {"a": a, "b": b, "c": c}, c)
        err = (out - a @ b).abs().max().item()
        assert err < 1e-3, ("gemm", split_k, tma, tail, m, n, transposed, err)
        worst = max(worst, err)

ap = {"block_m": 16, "block_n": 16, "num_warps": 4, "num_stages": 2, "heavy_first": False, "ctas_per_sm": 1}
cases = [(8, 64, False, 1), (16, 48, False, 1), (32, 32, True, 1), (8, 64, False, 2), (16, 48, False, 4),
         (24, 64, False, 3)]
for nq, nkv, causal, split_kv in cases:  # split-KV: 4 slices of 3 KV blocks leave one slice empty
    cfg = Config("attn", "fp16", "test", batch=1, heads=3, seq_q=nq, seq_kv=nkv, head_dim=16, causal=causal)
    q, k, v = torch.randn(1, 3, nq, 16), torch.randn(1, 3, nkv, 16), torch.randn(1, 3, nkv, 16)
    o = torch.empty_like(q)
    out = run(cfg, ap | {"split_kv": split_kv}, {"q": q, "k": k, "v": v, "o": o}, o)
    err = (out - F.scaled_dot_product_attention(q, k, v, is_causal=causal)).abs().max().item()
    assert err < 1e-4, ("attn", nq, nkv, causal, split_kv, err)
    worst = max(worst, err)
print("ok", worst)
"""


def test_the_recorded_calls_compute_the_right_result_in_the_interpreter() -> None:
    """GEMM with row-major and K-major B (fp8 layout, fp32 values), attention with a short query against a longer KV
    cache and a causal square, the split-K / split-KV variants (empty slices included, launched twice on one
    scratch), the tail split (whole waves and split tiles, no tail, fewer tiles than programs) and the TMA GEMM (a
    partial tile): each against torch."""
    env = {"TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [sys.executable, "-c", INTERPRET], capture_output=True, text=True, cwd=ROOT, env=env, timeout=600
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.startswith("ok")


def test_configurations_cover_the_issue_and_spaces_hold_the_tutorial_lists() -> None:
    kinds = {(c.kind, c.dtype) for c in CONFIGS}
    assert len(CONFIGS) >= 44 and len({c.label for c in CONFIGS}) == len(CONFIGS)
    assert {("gemm", "bf16"), ("gemm", "fp16"), ("gemm", "fp8"), ("attn", "bf16"), ("attn", "fp16")} <= kinds
    attn = [c for c in CONFIGS if c.kind == "attn"]
    assert any(c.causal for c in attn) and any(not c.causal for c in attn)
    assert any(c.seq_q < c.seq_kv for c in attn)  # decode-shaped
    for c in CONFIGS:
        pts = space(c)
        assert 24 <= len(pts) <= 72, (c.label, len(pts))
        assert all(p in pts for p in autotune_list(c)) and default(c) in pts
        assert c.why


def test_configurations_of_a_family_share_their_compiles() -> None:
    """The shape is a run-time argument: two bf16 GEMMs compile each candidate once (unless Triton specialises an
    integer differently), and the clean and instrumented variants are two compiles."""
    g1, g2 = CONFIGS[0], CONFIGS[1]
    p = default(g1)
    assert unit_key(g1, p, False) == unit_key(g2, p, False) != unit_key(g1, p, True)
    odd = Config("attn", "fp16", "", batch=1, heads=8, seq_q=1024, seq_kv=1024, head_dim=64)
    even = Config("attn", "fp16", "", batch=2, heads=8, seq_q=1024, seq_kv=1024, head_dim=64)
    assert unit_key(odd, default(odd), False) != unit_key(even, default(even), False)  # 8 heads: not divisible by 16


def test_probe_slots_hold_every_event_of_a_small_launch_and_cap_a_large_one() -> None:
    small = Config("gemm", "bf16", "", m=1024, n=1024, k=512)
    p = default(small)
    assert programs(small, p) == 64  # 8 x 8 tiles of 128 x 128
    assert events_per_slot(small, p) == 4 * (512 // 64) + 2 + 2
    big = Config("gemm", "bf16", "", m=8192, n=8192, k=8192)
    assert events_per_slot(big, p) == 2048


def test_split_candidates_are_more_work_units_of_the_same_tile_and_only_outside_the_autotune_lists() -> None:
    """A split-K candidate of a 512 x 512 x 16384 GEMM: 16 output tiles of 128 x 128, 8 slices each -> 128 programs
    of 32 k-steps (the events a program records follow); the workspace holds every slice's fp32 tile.  Split-KV of a
    decode call (q 64, kv 16384, 128 heads): 4 slices per tile.  No tutorial list (baseline (a)) holds a split, and
    causal attention spaces have none (the kernel has no causal mask)."""
    g = Config("gemm", "bf16", "", m=512, n=512, k=16384)
    p = dict(default(g), split_k=8)
    assert tiles(g, p) == 16 * 8 and programs(g, p) == 128
    assert events_per_slot(g, p) == 4 * (16384 // 64 // 8) + 2 + 2
    assert scratch_shapes(g, p) == {"ws": (16 * 8 * 128 * 128, "float32"), "locks": (16, "int32")}
    assert scratch_shapes(g, default(g)) == {}
    a = Config("attn", "fp16", "", batch=4, heads=32, seq_q=64, seq_kv=16384, head_dim=128)
    pa = {"block_m": 64, "block_n": 64, "num_warps": 4, "num_stages": 3, "heavy_first": False, "ctas_per_sm": 1,
          "split_kv": 4}  # fmt: skip
    assert tiles(a, pa) == 128 * 4 and programs(a, pa) == 132
    for c in CONFIGS:
        splits = [p for p in space(c) if p.get("split_k", 1) > 1 or p.get("split_kv", 1) > 1]
        assert not any(p in autotune_list(c) for p in splits)
        want = GEMM_SPLIT if c.kind == "gemm" else ([] if c.causal else ATTN_SPLIT)
        assert splits == want, c.label


def test_a_tail_split_runs_the_full_waves_whole_and_splits_only_the_last_wave() -> None:
    """3072 x 3072 in 128 x 128 tiles on 132 SMs: 576 tiles, 4 whole waves (528 units) and 48 tiles in 2 slices
    (96 units); scratch for those 48 tiles only.  The model counts the work in slices (1152 on 132 programs: 9 per
    program, wave efficiency 0.97 against 0.87 unsplit).  A whole number of waves splits nothing; fewer tiles than
    programs split every tile.  No tutorial list holds a tail split."""
    from bench.replay_table import model
    from examples.gpu.split_gemm import units

    g = Config("gemm", "bf16", "", m=3072, n=3072, k=8192)
    p = dict(default(g), tail_split=2)
    assert units(576, 2, 132, tail=True) == 528 + 96 and units(576, 2, 132) == 1152
    assert programs(g, p) == 132 and tiles(g, p) == 576 * 2
    assert round(model(g, p).wave_efficiency, 2) == 0.97 and round(model(g, default(g)).wave_efficiency, 2) == 0.87
    assert scratch_shapes(g, p) == {"ws": (48 * 2 * 128 * 128, "float32"), "locks": (48, "int32")}
    assert scratch_shapes(g, p, sms=144) == {"ws": (2 * 128 * 128, "float32"), "locks": (1, "int32")}  # 4 waves of 144
    assert units(264, 4, 132, tail=True) == 264 and units(64, 4, 132, tail=True) == 256
    assert events_per_slot(g, p) == 2048
    for c in CONFIGS:
        tails = [q for q in space(c) if q.get("tail_split", 1) > 1]
        assert tails == (GEMM_TAIL if c.kind == "gemm" else []), c.label
        assert not any(q in autotune_list(c) for q in tails)


def test_a_dry_run_compiles_for_sm90_and_writes_the_plan(tmp_path: Path) -> None:
    """bench/record_candidates.py --dry-run: the compile pool's JIT warmup for sm_90 without a GPU, the plan with
    its estimate, one line per compile with the compiler's facts."""
    import json

    out = tmp_path / "run"
    cmd = [sys.executable, str(ROOT / "bench" / "record_candidates.py"), str(out), "--dry-run", "--per-config", "1",
           "--only", "1,25", "--procs", "1", "--cache", str(tmp_path / "cache")]  # fmt: skip
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=600, env={"PYTHONPATH": str(ROOT),
                         "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})  # fmt: skip
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    plan = json.loads((out / "plan.json").read_text())
    assert plan["order"] == [1, 25] and plan["estimate"]["compile_units"] == 4
    rows = [json.loads(line) for line in (out / "compiles.jsonl").read_text().splitlines()]
    assert len(rows) == 4 and all(r["error"] is None for r in rows)
    assert all(r["registers"] and r["shared_bytes"] for r in rows)


def test_an_instrumented_launch_decodes_into_the_phases_the_rules_read() -> None:
    """A SYNTHETIC probe buffer (tests/device_synth.py) of two programs, each with two k-steps of 100 ns load and
    300 ns mma and an epilogue, one program ending 1000 ns late: the recorded phases give load its share of the
    time, the step period is 400 ns, and the SM tail is the late program's."""
    from bench.recorded_launch import phases_job
    from tests.device_synth import build

    def steps(extra: int) -> list[tuple[str, bool, int]]:
        ev = []
        for i in range(2):
            t = 400 * i
            ev += [("load", False, t), ("load", True, t + 100), ("mma", False, t + 100), ("mma", True, t + 400)]
        ev += [("epilogue", False, 800), ("epilogue", True, 900 + extra)]
        return ev

    buf = build([(0, 0, steps(0)), (1, 1, steps(1000))], events_per_slot=16)
    cfg = Config("gemm", "bf16", "", m=256, n=128, k=128)
    ph = phases_job(cfg, default(cfg), buf)
    shares = {r["region"]: r["share"] for r in ph["regions"]}
    assert ph["programs"] == 2 and ph["step_region"] == "load"
    assert ph["step_period_ns"] == pytest.approx(400, rel=0.01)
    # 2 x 2 x 100 ns of load over (1000 + 2000) ns: each program ends 100 ns after its last event
    assert shares["load"] == pytest.approx(400 / 3000, rel=0.02)
    assert ph["tail_ns"] > 0


PIN = """
import sys
if sys.argv[1] == "attention-first":
    import examples.gpu.persistent_attention  # noqa: F401
from bench.recorded_launch import pin_cache_keys
print(" ".join(pin_cache_keys()))
"""


def test_every_process_hashes_the_kernels_to_the_same_cache_keys() -> None:
    """The compile processes and the GPU process must look up the same Triton cache entries whatever they imported
    or compiled first (Triton 3.6's keys depend on which kernel sharing the markers was hashed first)."""
    keys = []
    for first in ("gemm-first", "attention-first"):
        res = subprocess.run([sys.executable, "-c", PIN, first], capture_output=True, text=True, cwd=ROOT,
                             env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}, timeout=300)  # fmt: skip
        assert res.returncode == 0, res.stderr[-2000:]
        keys.append(res.stdout.split())
    assert len(keys[0]) == len(KERNELS) == 5 and keys[0] == keys[1]


WS_PROBE = """
import json, sys
from bench.recorded_configs import CONFIGS
from bench.recorded_launch import call, dtype_stand_ins, kernel_fn, use_sm90_driver
use_sm90_driver()
out = {}
for warps in (4, 8):
    p = {"block_m": 128, "block_n": 256, "block_k": 64, "group_m": 8, "num_warps": warps, "num_stages": 3,
         "ctas_per_sm": 1, "split_k": 1, "tma": True, "tail_split": 1, "warp_spec": True}
    for instrumented in (False, True):
        c = call(CONFIGS[1], p, dtype_stand_ins(CONFIGS[1]), instrumented=instrumented)
        k = kernel_fn(c).warmup(*c.args, grid=(c.grid,), **dict(c.kwargs))
        out[f"{warps}-{instrumented}"] = ["ttg.warp_specialize" in k.asm["ttgir"], "setmaxnreg" in k.asm["ptx"]]
print(json.dumps(out))
"""


def test_the_warp_specialised_points_are_specialised_by_triton_for_sm90(tmp_path: Path) -> None:
    """The ``warp_spec`` candidates' calls (4 warps a group, no flattening, a whole epilogue, no k-step markers when
    instrumented) come out of Triton's Hopper pass partitioned into warp groups with their own register budgets
    (``setmaxnreg``); with 8 warps the pass leaves the loop as it was, which is why the space's points use 4."""
    import json

    res = subprocess.run([sys.executable, "-c", WS_PROBE], capture_output=True, text=True, cwd=ROOT, timeout=600,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                              "TRITON_CACHE_DIR": str(tmp_path / "cache")})  # fmt: skip
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert got == {"4-False": [True, True], "4-True": [True, True], "8-False": [False, False],
                   "8-True": [False, False]}  # fmt: skip


def test_the_autotuners_pick_reads_back_as_the_candidate_it_was_given() -> None:
    """Every tutorial point, given to ``triton.autotune`` as a ``triton.Config``, reads back (``picked_params``) as
    the key of the same candidate of the space, whatever parameters the space has gained since the lists were
    written (the recording of 2026-12-03 07:21 wrote its picks without ``warp_spec``)."""
    from bench.record_candidates import picked_params, triton_config
    from bench.recorded_spaces import key_of

    for cfg in (CONFIGS[0], CONFIGS[20], CONFIGS[24]):  # bf16 GEMM, fp8 GEMM, attention
        keys = {key_of(p) for p in space(cfg)}
        for p in autotune_list(cfg):
            got = picked_params(cfg, triton_config(cfg, p))
            assert key_of(got) == key_of(p) and key_of(got) in keys, (cfg.label, p)
