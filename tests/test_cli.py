"""The argus-lab command line, run as a real process against a real store."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from argus_lab.faces.cli import main

ROOT = Path(__file__).parent.parent


def _cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "argus_lab.faces.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd or ROOT,
        check=False,
        timeout=120,
    )


def test_run_then_show_round_trip(store_path: Path) -> None:
    run = _cli(
        "run",
        "examples/nested.py",
        "--signals",
        "host.wall,host.cpu",
        "--repeat",
        "3",
        "--warmup",
        "1",
        "--store",
        str(store_path),
    )
    assert run.returncode == 0, run.stderr
    assert "decode/layer/attn" in run.stdout
    assert "host.wall" in run.stdout
    show = _cli("show", "--store", str(store_path), "--provenance")
    assert show.returncode == 0, show.stderr
    table = [ln for ln in show.stdout.splitlines() if ln.startswith("decode/layer/attn ") and "host.wall" in ln]
    assert table, show.stdout
    assert " 12 " in table[0]  # 3 repetitions x 4 layers
    assert "provenance:" in show.stdout
    assert "versions: python" in show.stdout


def test_unknown_signal_suggests_close_names(store_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "examples/nested.py", "--signals", "host.wal", "--store", str(store_path)])
    err = capsys.readouterr().err
    assert code == 2
    assert "unknown signal 'host.wal'" in err
    assert "'host.wall'" in err
    assert not store_path.exists()


def test_missing_script(store_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "no/such/script.py", "--store", str(store_path)])
    assert code == 2
    assert "does not exist" in capsys.readouterr().err


def test_failing_script_exit_status_and_stored_failure(store_path: Path) -> None:
    run = _cli(
        "run", "tests/workloads/raises_on_third.py", "--repeat", "4", "--warmup", "0", "--store", str(store_path)
    )
    assert run.returncode == 1
    assert "failed" in run.stdout
    assert "boom in repetition 2" in run.stdout
    show = _cli("show", "--store", str(store_path))
    assert "work" in show.stdout
    assert "failed" in show.stdout


def test_show_unknown_run(store_path: Path) -> None:
    _cli("run", "examples/nested.py", "--repeat", "1", "--store", str(store_path))
    show = _cli("show", "--store", str(store_path), "--run", "r-nope")
    assert show.returncode == 2
    assert "no run 'r-nope'" in show.stderr


def test_show_without_store(tmp_path: Path) -> None:
    show = _cli("show", "--store", str(tmp_path / "none.duckdb"))
    assert show.returncode == 2
    assert "run a measurement first" in show.stderr


def test_help_explains_every_option_with_an_example() -> None:
    out = _cli("run", "--help").stdout
    for option in ("--signals", "--repeat", "--warmup", "--scope", "--store", "--on-error"):
        assert option in out
    assert "examples:" in out
    assert "e.g." in out


def test_runs_stored_without_the_join_are_reported_pending_until_joined(store_path: Path) -> None:
    """Runs executed into a store by the runtime alone (no join): `show` says the join is pending and how to run
    it, without writing; `argus-lab join` joins them; then `show` has their values."""
    from argus_lab.plan import plan_signals
    from argus_lab.run.runtime import execute
    from argus_lab.run.workload import Workload
    from argus_lab.store import Store, StoreSink

    store = Store(store_path)
    ex = execute(
        plan_signals("host.wall", repeat=2, warmup=0),
        Workload.script(ROOT / "examples" / "nested.py"),
        StoreSink(store),
    )
    [run_id] = ex.run_ids
    before = _cli("show", "--store", str(store_path))
    assert before.returncode == 0, before.stderr
    assert f"argus-lab join --store {store_path} --run {run_id}" in before.stdout
    assert not [ln for ln in before.stdout.splitlines() if ln.startswith("decode/layer/attn ")]
    assert not store.rows("SELECT 1 FROM provenance WHERE backend = 'join'")
    joined = _cli("join", "--store", str(store_path))
    assert joined.returncode == 0, joined.stderr
    assert "joined 1 run(s)" in joined.stdout and "instance: exact" in joined.stdout
    after = _cli("show", "--store", str(store_path))
    assert [ln for ln in after.stdout.splitlines() if ln.startswith("decode/layer/attn ") and "host.wall" in ln]
    assert "join has not run" not in after.stdout
    unknown = _cli("join", "--store", str(store_path), "--run", "r-nope")
    assert unknown.returncode == 2 and "no run 'r-nope'" in unknown.stderr


def test_signals_prints_a_header_row_over_its_columns() -> None:
    out = _cli("signals")
    assert out.returncode == 0, out.stderr
    head, rule, *rows = out.stdout.splitlines()
    assert head.split() == ["signal", "unit", "backend", "what", "it", "measures"]
    assert set(rule.replace(" ", "")) == {"-"}

    # every cell starts where its column's header starts (cells are apart by two spaces or more)
    def starts(line: str) -> list[int]:
        return [m.start() for m in re.finditer(r"\S+(?: \S+)*", line)]

    wall = next(r for r in rows if r.startswith("host.wall "))
    assert len(starts(head)) == 4 and starts(head) == starts(wall)
    assert any(r.startswith("hw:<metric> ") for r in rows)


def test_signals_piped_into_a_reader_that_leaves_early_ends_quietly() -> None:
    """`argus-lab signals | head -2`: the reader closes the pipe; no traceback, exit status 0."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "argus_lab.faces.cli", "signals"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        bufsize=0,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.read(10)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 0, err
    assert "Traceback" not in err


def test_a_scope_that_matches_no_region_exits_non_zero_with_the_regions_seen(store_path: Path) -> None:
    """`argus-lab run --scope 'decod/**'` on a workload whose regions are decode/...: a real process that exits 2 and
    names the regions it saw and the closest scope (it used to exit 0 with status ok over an empty report)."""
    run = _cli(
        "run", "examples/nested.py", "--signals", "host.wall", "--repeat", "1", "--warmup", "0",
        "--scope", "decod/**", "--store", str(store_path),
    )  # fmt: skip
    assert run.returncode == 2, (run.returncode, run.stdout, run.stderr)
    assert "did you mean 'decode/**'" in run.stderr
    assert "decode/layer/attn" in run.stderr
    assert "status ok" not in run.stdout
