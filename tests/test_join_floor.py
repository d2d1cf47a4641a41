"""bench/join_floor.py computes the same exact-kernel numbers as the join, so its timings bound the join's kernel part.

The store is SYNTHETIC (bench/join_bench.py's generator, small), with every kernel carrying its instance: there the
join's ``gpu.time``, ``gpu.kernels``, ``gpu.span`` and ``gpu.launch_overhead`` must equal the floor's, instance by
instance (the inclusive values of all four, the exclusive value of ``gpu.time``, the only one the floor computes).
No timing is asserted.
"""

from __future__ import annotations

import sys
from pathlib import Path

import duckdb

from argus_lab import join
from argus_lab.store import Store

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.join_bench import generate  # noqa: E402
from bench.join_floor import FLOOR, floor  # noqa: E402

VALUES = """
SELECT instance_id, signal, inclusive, exclusive FROM instance_values
WHERE signal IN ('gpu.time', 'gpu.kernels', 'gpu.span', 'gpu.launch_overhead') ORDER BY ALL
"""


def test_the_floor_gives_the_joins_exact_kernel_values(tmp_path: Path) -> None:
    base = tmp_path / "base.duckdb"
    sizes = generate(Store(base), 2_000, 2, 5, 0.0, 0.0, False)  # every kernel carries its instance
    assert sizes["kernels"] > 0 and sizes["instances"] == 2 * (1 + 3 * 5)
    joined, floored = tmp_path / "join.duckdb", tmp_path / "floor.duckdb"
    for p in (joined, floored):
        p.write_bytes(base.read_bytes())
    join.attribute_request(Store(joined), ["r-bench"])
    seconds = floor(floored)
    assert set(seconds) == {label for label, _ in FLOOR} | {"total"}
    with duckdb.connect(str(joined), read_only=True) as con:
        want = con.execute(VALUES).fetchall()
    with duckdb.connect(str(floored), read_only=True) as con:
        got = con.execute(VALUES).fetchall()
    assert len(want) == 4 * sizes["instances"]
    assert [(i, s, v) for i, s, v, _ in got] == [(i, s, v) for i, s, v, _ in want]  # integer ns and counts
    assert [x for _, s, _, x in got if s == "gpu.time"] == [x for _, s, _, x in want if s == "gpu.time"]
