"""SYNTHETIC: the join bounds DuckDB's memory while it runs, and gives a connection its caller holds
(``Store.connect`` is re-entrant) back with that caller's settings (DuckDB prints a memory limit truncated: setting
the printed text back lowered the limit by a tenth of a unit at every join)."""

from __future__ import annotations

from pathlib import Path

from argus_lab.join import attribute_request
from argus_lab.store import Store
from tests.join_synth import Inst, Kern, SynthRun, write


def test_the_callers_memory_limit_and_threads_are_restored(tmp_path: Path) -> None:
    st = Store(tmp_path / "s.duckdb")
    write(st, [SynthRun("r", instances=[Inst(1, "a", 0, 100)], kernels=[Kern(1, "k", 10, 20, 1)])])
    with st.connect(write=True) as con:
        con.execute("SET memory_limit = '1GB'")
        con.execute("SET threads = 3")
        before = con.execute("SELECT current_setting('memory_limit'), current_setting('threads')").fetchall()
        attribute_request(st, ["r"])
        after = con.execute("SELECT current_setting('memory_limit'), current_setting('threads')").fetchall()
    assert after == before
    assert st.rows("SELECT count(*) FROM instance_values WHERE signal = 'gpu.time'") == [(1,)]
