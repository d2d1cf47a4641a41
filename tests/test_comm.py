"""Communication signals of the join (comm.time, comm.kernels, comm.overlap, comm.exposed).

The first cases are SYNTHETIC (hand-built rows, tests/join_synth.py) so every expected figure can be derived by
hand; the last reads NCCL kernels recorded on the H200 (tests/data/gpu/nccl).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from argus_lab import join
from argus_lab.join import comm as comm_sql
from argus_lab.store import Store
from tests.join_synth import Inst, Kern, SynthRun, values, write

NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
ONE_RANK = (
    "__nv_static_32__b4148644_10_onerank_cu_fdf47990__ZN43_GLOBAL__N__b4148644_10_onerank_cu_fdf4799013"
    "oneRankReduceI13FuncPreMulSumIfEEEvPvS3_mmb"
)
GEMM = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1"


def overlap_run(run_id: str = "c1") -> SynthRun:
    """step{ allreduce (NCCL 50-450 and one-rank 400-500), compute (GEMMs 120-300, 350-600), sync (NCCL 920-1020) }.

    By hand: allreduce's communication covers [50, 500] (450 ns); compute covers [120, 300] and [350, 600], so the
    overlap is 180 + 150 = 330 ns and 120 ns are exposed.  sync's NCCL kernel [920, 1020] meets no compute on its
    device (GEMMs on device 1 and on rank 1's device 0 run at the same time and must not count): 100 ns exposed.
    """
    return SynthRun(
        run_id,
        instances=[
            Inst(1, "step", 0, 1100),
            Inst(2, "step/allreduce", 0, 100, parent=1),
            Inst(3, "step/compute", 100, 900, parent=1),
            Inst(4, "step/sync", 900, 1100, parent=1),
        ],
        kernels=[
            Kern(1, NCCL, 50, 450, 2, stream=20),
            Kern(2, GEMM, 120, 300, 3),
            Kern(3, GEMM, 350, 600, 3),
            Kern(4, ONE_RANK, 400, 500, 2, stream=20),
            Kern(5, NCCL, 920, 1020, 4, stream=20),
            Kern(6, GEMM, 900, 1050, 3, device=1),
            Kern(7, GEMM, 900, 1050, None, rank=1),  # another rank's device 0 (another host): not this device
        ],
    )


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    st = Store(tmp_path_factory.mktemp("comm") / "c.duckdb")
    write(st, [overlap_run()], request_id="q1")
    write(st, [SynthRun("plain", instances=[Inst(1, "a", 0, 100)], kernels=[Kern(1, GEMM, 10, 50, 1)])], "q2")
    write(
        st,
        [
            SynthRun(
                "asked",
                instances=[Inst(1, "a", 0, 100)],
                kernels=[Kern(1, GEMM, 10, 50, 1)],
                signals=("gpu.time", "comm.exposed"),
            )
        ],
        "q3",
    )
    for run in ("c1", "plain", "asked"):
        join.attribute_request(st, [run])
    return st


def test_nccl_and_one_rank_kernels_are_communication() -> None:
    pattern = re.compile(comm_sql.COMM_KERNEL_PATTERN.removeprefix("(?i)"), re.IGNORECASE)
    assert pattern.search(NCCL) and pattern.search(ONE_RANK)
    assert not pattern.search(GEMM)
    assert not pattern.search("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEE")


def test_overlap_and_exposed_per_region(store: Store) -> None:
    overlap = values(store, "c1", "comm.overlap")
    exposed = values(store, "c1", "comm.exposed")
    assert overlap[2][0] == 330 and exposed[2][0] == 120  # allreduce
    assert overlap[4][0] == 0 and exposed[4][0] == 100  # sync: GEMMs on other devices do not hide it
    assert overlap[3][0] == 0 and exposed[3][0] == 0  # compute launched no communication
    assert overlap[1][0] == 330 and exposed[1][0] == 220  # step: inclusive of its children


def test_comm_time_counts_every_kernel_and_is_exclusive_per_region(store: Store) -> None:
    t = values(store, "c1", "comm.time")
    n = values(store, "c1", "comm.kernels")
    assert t[2] == (500, 500)  # 400 + 100 ns: overlapping NCCL kernels both count in the sum
    assert t[1] == (600, 0)  # step launched none itself
    assert n[1] == (3, 0) and n[2] == (2, 2)


def test_runs_without_communication_get_no_comm_values_unless_asked(store: Store) -> None:
    assert values(store, "plain", "comm.time") == {}
    assert values(store, "asked", "comm.exposed") == {1: (0, None)}


def test_comm_values_point_at_the_cupti_provenance(store: Store) -> None:
    rows = store.rows("SELECT DISTINCT backend, provenance_id FROM instance_values WHERE signal LIKE 'comm.%'")
    assert sorted(rows) == [("cupti", "asked:cupti"), ("cupti", "c1:cupti")]


RECORDED = Path(__file__).parent / "data" / "gpu" / "nccl" / "nccl_h200.duckdb"


RUNS: dict[str, list[str]] = json.loads(RECORDED.with_suffix(".runs.json").read_text())


def _union(iv: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for s, e in sorted(iv):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def _overlap(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    return sum(max(0, min(e1, e2) - max(s1, s2)) for s1, e1 in a for s2, e2 in b)


def test_recorded_nccl_overlap_matches_interval_arithmetic(tmp_path: Path) -> None:
    """H200 evidence (examples/gpu/nccl_overlap.py, one-rank NCCL): the join's overlap and exposed time of every
    all-reduce instance equal a plain-Python interval computation over the recorded kernels."""
    path = tmp_path / "nccl.duckdb"
    shutil.copy(RECORDED, path)
    st = Store(path)
    (run_id,) = RUNS["alternating (default mode, no NCCL_OVERLAP_* settings)"]
    join.attribute_request(st, [run_id])
    kernels = st.rows(
        "SELECT name, start_ns, end_ns, instance_id FROM kernels WHERE kind = 'kernel' AND run_id = ?", [run_id]
    )
    pattern = re.compile(comm_sql.COMM_KERNEL_PATTERN.removeprefix("(?i)"), re.IGNORECASE)
    compute = _union([(s, e) for name, s, e, _ in kernels if not pattern.search(name)])
    got = {
        (i, sig): v
        for i, sig, v in st.rows(
            "SELECT v.instance_id, v.signal, v.inclusive FROM instance_values v JOIN region_instances r "
            "USING (run_id, instance_id) WHERE r.path LIKE '%/allreduce' AND v.signal LIKE 'comm.%' AND run_id = ?",
            [run_id],
        )
    }
    instances = {i for i, _ in got}
    assert len(instances) == 36  # 2 all-reduce regions x 3 steps x 6 repetitions (1 warm-up)
    hidden = 0
    for iid in instances:
        own = _union([(s, e) for name, s, e, k in kernels if k == iid and pattern.search(name)])
        assert own, f"instance {iid}: NCCL's kernel was not attributed to its all-reduce region"
        ov = _overlap(own, compute)
        assert got[iid, "comm.overlap"] == ov
        assert got[iid, "comm.exposed"] == sum(e - s for s, e in own) - ov
        hidden += ov > 0.5 * sum(e - s for s, e in own)
    assert hidden > 0  # the overlapped variant hides most of the all-reduce in some instances


def test_recorded_before_after_pools_processes_and_judges_the_change(tmp_path: Path) -> None:
    """H200 evidence (scripts/gpu_record.py overlap-study): 8 training steps, 3 processes x 5 repetitions per
    configuration.  The report pools the repeated requests (15 instances a side) and the diff calls the overlapped
    step faster beyond noise, its exposed communication lower, and NCCL's stream priority no change."""
    from argus_lab.report import Report

    path = tmp_path / "nccl.duckdb"
    shutil.copy(RECORDED, path)
    st = Store(path)
    serial, over, high = (Report(st, RUNS[k]) for k in ("serial", "overlapped", "overlapped-high"))
    rows = {r.signal: r for r in serial.diff(over).rows if r.path == "train"}
    assert rows["host.wall"].n_base == rows["host.wall"].n_other == 15
    assert rows["host.wall"].verdict == "lower" and rows["host.wall"].p_value is not None
    assert rows["host.wall"].p_value < 0.01
    assert rows["comm.exposed"].verdict == "lower" and rows["comm.overlap"].verdict == "higher"
    assert rows["gpu.time"].verdict == "higher"  # the kernels slow each other down while they overlap
    prio = {r.signal: r for r in over.diff(high).rows if r.path == "train"}
    assert prio["host.wall"].verdict == "same"
