"""scripts/record_ncu_passes.py without a GPU: its CSV parsing and its table, driven by a stand-in ``ncu``.

The stand-in prints what ncu 2025.3.1 prints with ``--csv --page raw`` (header row, units row, numbers with
thousands separators, see ../shared/reference/gpu-apis.md section 8) and rejects ``launch__*`` metrics the way
ncu rejects an unknown metric.  The real recording runs on the H200 (see tests/data/README.md).
"""

from __future__ import annotations

import importlib.util
import json
import stat
import sys
from pathlib import Path
from types import ModuleType

import pytest

from argus_lab.plan.passes import TablePassModel

SCRIPT = Path(__file__).parent.parent / "scripts" / "record_ncu_passes.py"

FAKE_NCU = """#!{python}
import sys
args = sys.argv[1:]
if args == ["--version"]:
    print("NVIDIA (R) Nsight Compute Command Line Profiler")
    print("Version 2025.3.1.0 (build 0) (stand-in)")
    sys.exit(0)
metrics = args[args.index("--metrics") + 1].split(",")
bad = [m for m in metrics if m.startswith("launch__")]
if bad:
    print("==ERROR== Failed to find metric " + bad[0], file=sys.stderr)
    sys.exit(1)
print("==PROF== Connected to process 4242")
print("ARGUS_DEVICE|NVIDIA H200|9.0")
cols = ["ID", "Process ID", "Device Name", "profiler__replayer_passes", *metrics]
print(",".join('"' + c + '"' for c in cols))
print(",".join('""' for _ in cols))
passes = 1000 + sum(len(m) % 3 + 1 for m in metrics)
values = ["0", "4242", "NVIDIA H200", f"{{passes:,}}", *["1,234.5"] * len(metrics)]
print(",".join('"' + v + '"' for v in values))
"""


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("record_ncu_passes", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_parse_passes_reads_the_raw_page() -> None:
    rec = _load()
    out = "\n".join(
        [
            "==PROF== Connected to process 1",
            "ARGUS_DEVICE|NVIDIA H200|9.0",
            '"ID","Kernel Name","profiler__replayer_passes","dram__bytes_read.sum"',
            '"","","","byte"',
            '"0","vectorized_elementwise_kernel<4, (anonymous namespace)::FillFunctor<float>>","1,009","16,777,216"',
        ]
    )
    passes, header, device = rec.parse_passes(out)
    assert passes == 1009
    assert "dram__bytes_read.sum" in header
    assert device == "ARGUS_DEVICE|NVIDIA H200|9.0"
    assert rec.parse_passes("==ERROR== no kernels were profiled") == (None, [], "")


def test_script_writes_a_table_the_planner_reads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rec = _load()
    ncu = tmp_path / "ncu"
    ncu.write_text(FAKE_NCU.format(python=sys.executable))
    ncu.chmod(ncu.stat().st_mode | stat.S_IEXEC)
    out = tmp_path / "table.json"
    assert rec.main([str(out), "--ncu", str(ncu), "--jobs", "2", "--budget", "60"]) == 0
    table = json.loads(out.read_text())
    assert table["synthetic"] is False
    assert table["ncu_version"] == "2025.3.1.0"
    assert table["gpu"] == "NVIDIA H200"
    assert table["compute_capability"] == "9.0"
    assert set(table["failed"]) == {"launch__registers_per_thread"}
    assert "Failed to find metric" in table["failed"]["launch__registers_per_thread"]
    ok = [m for m in rec.METRICS if not m.startswith("launch__")]
    assert sorted(table["metrics"]) == sorted(ok)
    assert table["metrics"]["dram__bytes_read.sum"] == 1000 + len("dram__bytes_read.sum") % 3 + 1
    names = [c["name"] for c in table["combinations"]]
    assert names == list(rec.COMBINATIONS)
    everything = next(c for c in table["combinations"] if c["name"] == "all")
    assert everything["metrics"] == ok
    assert table["skipped"] == []
    model = TablePassModel.load(out)
    bench = next(c for c in table["combinations"] if c["name"] == "bench_7")
    assert model.passes(bench["metrics"]) == bench["passes"]
    summary = capsys.readouterr().out
    assert f"metrics recorded alone: {len(ok)} of {len(rec.METRICS)}" in summary
    assert "failed: 1" in summary


def test_time_budget_skips_instead_of_overrunning(tmp_path: Path) -> None:
    rec = _load()
    ncu = tmp_path / "ncu"
    ncu.write_text(FAKE_NCU.format(python=sys.executable))
    ncu.chmod(ncu.stat().st_mode | stat.S_IEXEC)
    out = tmp_path / "table.json"
    rec.main([str(out), "--ncu", str(ncu), "--budget", "0"])
    table = json.loads(out.read_text())
    assert table["metrics"] == {}
    assert len(table["skipped"]) == len(rec.METRICS)


def test_compare_live_puts_the_models_count_next_to_ncus(tmp_path: Path) -> None:
    rec = _load()
    ncu = tmp_path / "ncu"
    ncu.write_text(FAKE_NCU.format(python=sys.executable))
    ncu.chmod(ncu.stat().st_mode | stat.S_IEXEC)
    sets = {"pair": ("dram__bytes_read.sum", "dram__bytes_write.sum"), "launch": ("launch__grid_size",)}
    table = TablePassModel({"dram__bytes_read.sum": 1, "dram__bytes_write.sum": 1}, label="SYNTHETIC")
    got = rec.compare_live(table, sets, str(ncu), sys.executable, 60.0, jobs=2)
    stand_in = 1000 + sum(len(m) % 3 + 1 for m in sets["pair"])  # what the stand-in ncu prints
    assert got["pair"]["ncu"] == stand_in
    assert got["pair"]["model"] == 1
    assert got["pair"]["equal"] is False
    assert got["pair"]["from"].startswith("estimated from the SYNTHETIC")
    assert got["launch"]["ncu"] is None
    assert "Failed to find metric launch__grid_size" in got["launch"]["ncu_error"]
    missing = rec.compare_live(table, {"pair": sets["pair"]}, str(tmp_path / "no-ncu"), sys.executable, 10.0)
    assert missing["pair"]["ncu_error"].startswith("cannot run")
