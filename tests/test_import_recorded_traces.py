"""Traces recorded by other tools on the H200 (``scripts/gpu/record_traces.sh``, files in tests/data/traces/): each
imports into a store with its attribution classes, keeps every nanosecond, and survives an export round trip.

The files are copied in by the lead after the one GPU run; while one is absent its tests are skipped with the
reason.  What the recording holds (tests/data/README.md): a torch.profiler trace of 3 training steps of a 2-layer
GPT-2-shaped model with ``record_function`` regions (``forward`` with ``block0``/``block1`` through module hooks,
``loss``, ``backward``, ``optimizer``, ``tiny``: a one-element add), and an ``.ncu-rep`` and an Nsight Systems
export of 3 x ``step{attn{2 Triton kernels}; mlp{1}; torch_range{1}}`` (argus regions, ``torch_range`` a
``torch.cuda.nvtx`` range in the default domain).
"""

from __future__ import annotations

import gzip
import json
import shutil
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from argus_lab.app.exporting import export
from argus_lab.app.importing import import_trace
from argus_lab.store import Store

TRACES = Path(__file__).parent / "data" / "traces"
RECORD = (
    "scripts/gpu/record_traces.sh OUT on the H200, then copy OUT's files to tests/data/traces/ (tests/data/README.md)"
)

CLASSES = """
SELECT i.path, a.class, count(*) AS n FROM attributions a
LEFT JOIN region_instances i ON i.run_id = a.run_id AND i.instance_id = a.instance_id
WHERE a.run_id = ? AND a.evidence = ? GROUP BY ALL ORDER BY ALL
"""


def recorded(name: str) -> Path:
    """The recorded file ``name``, or a skip saying how to record it."""
    path = TRACES / name
    if not path.exists():
        pytest.skip(f"{path.relative_to(TRACES.parents[1])} is not recorded yet: {RECORD}")
    return path


def by_path(store: Store, run_id: str, evidence: str) -> dict[tuple[str | None, str], int]:
    return {(p, c): int(n) for p, c, n in store.rows(CLASSES, [run_id, evidence])}


# -- torch.profiler (Kineto) -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def kineto(tmp_path_factory: pytest.TempPathFactory) -> tuple[Store, str, dict[str, Any]]:
    src = recorded("kineto_gpt2.json.gz")
    st = Store(tmp_path_factory.mktemp("kineto") / "s.duckdb")
    res = import_trace(src, st, cross_check=True)
    doc = json.loads(gzip.decompress(src.read_bytes()), parse_float=Decimal)
    return st, res.run_id, doc


def ending(paths: set[str] | dict[Any, Any], leaf: str) -> list[str]:
    """The paths ending in ``leaf`` (under ``ProfilerStep`` when the profiler wrote its step annotations)."""
    return sorted(p for p in paths if isinstance(p, str) and (p == leaf or p.endswith("/" + leaf)))


def test_kineto_regions_and_classes(kineto: tuple[Store, str, dict[str, Any]]) -> None:
    st, run, _ = kineto
    paths = {p for (p,) in st.rows("SELECT DISTINCT path FROM region_instances WHERE run_id = ?", [run])}
    for leaf in ("forward/block0", "forward/block1", "loss", "backward", "optimizer", "tiny"):
        assert ending(paths, leaf), sorted(paths)
    n_tiny = st.rows("SELECT count(*) FROM region_instances WHERE run_id = ? AND path LIKE '%tiny'", [run])
    assert n_tiny == [(3,)]  # one per profiled step
    classes = by_path(st, run, "kernel")
    # launched on the main thread inside a block: exact (through the launch's correlation id)
    for block in ("forward/block0", "forward/block1"):
        assert sum(n for (p, c), n in classes.items() if c == "exact" and p in ending(paths, block)) > 0, classes
    # autograd's device thread launches the backward kernels with no annotation of its own: the join places them
    # in the one region open at the launch (temporal), never exact
    backward = {c: n for (p, c), n in classes.items() if p in ending(paths, "backward")}
    assert backward.get("temporal", 0) > 0, classes
    assert {c for _, c in classes} <= {"exact", "temporal", "ambiguous", "unattributed"}


def test_kineto_keeps_every_nanosecond_and_the_tiny_kernel(kineto: tuple[Store, str, dict[str, Any]]) -> None:
    st, run, doc = kineto
    events = doc["traceEvents"]
    want = sorted(int(e["dur"] * 1000) for e in events if e.get("ph") == "X" and e.get("cat") == "kernel")
    got = [d for (d,) in st.rows("SELECT end_ns - start_ns FROM kernels WHERE run_id = ? AND kind = 'kernel' "
                                  "ORDER BY 1", [run])]  # fmt: skip
    assert got == want
    tiny = st.rows(
        "SELECT k.end_ns - k.start_ns, a.class FROM kernels k JOIN attributions a ON a.evidence_id = k.kernel_key "
        "AND a.run_id = k.run_id JOIN region_instances i ON i.run_id = a.run_id AND i.instance_id = a.instance_id "
        "WHERE k.run_id = ? AND i.path LIKE '%tiny'",
        [run],
    )
    assert tiny and all(d < 2_000 and c == "exact" for d, c in tiny)  # a one-element add: about a microsecond


def test_kineto_gpu_annotations_agree_with_the_attribution(kineto: tuple[Store, str, dict[str, Any]]) -> None:
    st, run, _ = kineto
    settings = json.loads(
        st.rows("SELECT settings FROM provenance WHERE run_id = ? AND backend = 'cupti'", [run])[0][0]
    )
    check = settings["gpu_user_annotation_check"]
    assert check["agree"] > 0
    assert check["differ"] <= check["agree"] // 10, check  # Kineto's GPU copy of an annotation spans its kernels


def test_kineto_round_trip_through_the_perfetto_export(
    kineto: tuple[Store, str, dict[str, Any]], tmp_path: Path
) -> None:
    st, run, _ = kineto
    out = export(st, tmp_path / "back.json", run_ids=[run]).path
    again = Store(tmp_path / "again.duckdb")
    res = import_trace(out, again)
    q = "SELECT name, start_ns, end_ns FROM kernels WHERE run_id = ? ORDER BY start_ns, name"
    assert again.rows(q, [res.run_id]) == st.rows(q, [run])
    qi = "SELECT path, start_ns, end_ns FROM region_instances WHERE run_id = ? ORDER BY start_ns, path"
    assert again.rows(qi, [res.run_id]) == st.rows(qi, [run])


# -- Nsight Compute --------------------------------------------------------------------------------------------
def test_ncu_report_regions_with_payload_are_exact(tmp_path: Path) -> None:
    pytest.importorskip("ncu_report")
    st = Store(tmp_path / "s.duckdb")
    res = import_trace(recorded("ncu_regions.ncu-rep"), st)
    inst = st.rows("SELECT path, count(*) FROM region_instances WHERE run_id = ? GROUP BY 1 ORDER BY 1", [res.run_id])
    assert inst == [("step", 3), ("step/attn", 3), ("step/mlp", 3)]
    assert by_path(st, res.run_id, "ncu_kernel") == {
        ("step", "exact"): 3,  # the kernel of the default-domain range torch_range, inside argus step
        ("step/attn", "exact"): 6,
        ("step/mlp", "exact"): 3,
    }
    metrics = st.rows(
        "SELECT count(DISTINCT kernel_key) FROM metrics WHERE run_id = ? AND signal = 'hw:gpu__time_duration.sum'",
        [res.run_id],
    )
    assert metrics == [(12,)]


def test_ncu_report_default_domain(tmp_path: Path) -> None:
    pytest.importorskip("ncu_report")
    st = Store(tmp_path / "s.duckdb")
    res = import_trace(recorded("ncu_regions.ncu-rep"), st, domain="default")
    inst = st.rows("SELECT path, count(*) FROM region_instances WHERE run_id = ? GROUP BY 1", [res.run_id])
    assert inst == [("torch_range", 3)]


# -- Nsight Systems --------------------------------------------------------------------------------------------
def nsys_export(tmp: Path) -> Path:
    """The recorded SQLite export (the script gzips it when it is 8 MB or more)."""
    if (TRACES / "nsys_regions.sqlite").exists():
        return TRACES / "nsys_regions.sqlite"
    if not (TRACES / "nsys_regions.sqlite.gz").exists():
        pytest.skip(
            "tests/data/traces/nsys_regions.sqlite(.gz) is not recorded (nsys may have failed on the H200: see "
            f"tests/data/traces/summary.json): {RECORD}"
        )
    gz = TRACES / "nsys_regions.sqlite.gz"
    out = tmp / "nsys_regions.sqlite"
    with gzip.open(gz, "rb") as src, out.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    return out


def test_nsys_export_argus_ranges_and_kernels(tmp_path: Path) -> None:
    st = Store(tmp_path / "s.duckdb")
    res = import_trace(nsys_export(tmp_path), st)
    inst = st.rows("SELECT path, count(*) FROM region_instances WHERE run_id = ? GROUP BY 1 ORDER BY 1", [res.run_id])
    assert inst == [("step", 3), ("step/attn", 3), ("step/mlp", 3)]
    classes = by_path(st, res.run_id, "kernel")
    assert classes[("step/attn", "exact")] == 6
    assert classes[("step/mlp", "exact")] == 3
    assert classes[("step", "exact")] == 3  # torch_range's kernel: its innermost argus range is step


def test_nsys_export_default_domain(tmp_path: Path) -> None:
    st = Store(tmp_path / "s.duckdb")
    res = import_trace(nsys_export(tmp_path), st, domain="default")
    inst = st.rows("SELECT path, count(*) FROM region_instances WHERE run_id = ? GROUP BY 1", [res.run_id])
    assert inst == [("torch_range", 3)]


def test_nsys_report_through_nsys_export(tmp_path: Path) -> None:
    rep = recorded("nsys_regions.nsys-rep")
    if shutil.which("nsys") is None:
        pytest.skip("no nsys on this machine: the .nsys-rep is converted by `nsys export --type sqlite`")
    st = Store(tmp_path / "s.duckdb")
    res = import_trace(rep, st)
    assert st.rows("SELECT count(*) FROM region_instances WHERE run_id = ?", [res.run_id]) == [(9,)]
