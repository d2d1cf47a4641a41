"""Evidence recorded on the H200 (tests/data/gpu/cases, see tests/data/README.md) loaded into real stores.

Each case of ``examples/gpu/`` was recorded under the CUPTI and NVML collectors: its raw CUPTI records are decoded
again (:mod:`argus_lab.backends.cupti.decode`), stored with its region instances and NVML samples, and, for
:func:`joined_case`, joined.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from argus_lab import join
from argus_lab.backends.cupti import decode as dec
from argus_lab.store import Store

DATA = Path(__file__).parent / "data"
CASES = DATA / "gpu" / "cases"


def load_case(store: Store, folder: Path, run_id: str, plan_index: int = 0) -> None:
    """Store one recorded case as run ``run_id`` (CUPTI records decoded again, instances, NVML samples)."""
    kernels = dec.kernel_table(dec.load_raw(folder / "cupti"), run_id)
    inst = pq.read_table(folder / "instances.parquet")
    inst = inst.set_column(inst.column_names.index("run_id"), "run_id", pa.array([run_id] * inst.num_rows))
    tables: dict[str, Any] = {
        "runs": {
            "run_id": [run_id],
            "plan_index": [plan_index],
            "backends": [["cupti", "nvml", "host"]],
            "status": ["ok"],
            "command": [f"recorded: {folder.relative_to(DATA)}"],
            "versions": ["{}"],
            "env": ["{}"],
            "settings": ["{}"],
        },
        "region_instances": inst,
        "kernels": dec.store_kernels(kernels),
        "provenance": {
            "provenance_id": [f"{run_id}:cupti"],
            "run_id": [run_id],
            "backend": ["cupti"],
            "backend_version": ["cupti-python 13.0.1 (recorded on the H200)"],
            "settings": [json.dumps({"kinds": ["CONCURRENT_KERNEL", "RUNTIME", "DRIVER", "EXTERNAL_CORRELATION"]})],
            "clocks": ["{}"],
            "timestamps": ["measured (CUPTI, CLOCK_REALTIME ns)"],
        },
    }
    if (folder / "samples.parquet").exists():
        s = pq.read_table(folder / "samples.parquet")
        tables["samples"] = s.set_column(s.column_names.index("run_id"), "run_id", pa.array([run_id] * s.num_rows))
    store.write(tables)


def joined_case(folder: Path, case: str) -> Store:
    """A store in ``folder`` holding recorded case ``case`` as run ``case``, joined."""
    store = Store(folder / f"{case}.duckdb")
    load_case(store, CASES / case, case)
    join.attribute_request(store, [case])
    return store


def per_path(store: Store, run: str, signal: str, column: str = "inclusive") -> dict[str, list[float]]:
    """The join's per-instance values of ``signal`` in run ``run``, by region path, in instance order."""
    out: dict[str, list[float]] = {}
    rows = store.rows(
        f"SELECT i.path, v.{column} FROM instance_values v JOIN region_instances i USING (run_id, instance_id) "
        "WHERE v.run_id = ? AND v.signal = ? ORDER BY i.start_ns, i.instance_id",
        [run, signal],
    )
    for path, value in rows:
        out.setdefault(path, []).append(value)
    return out


def shipped(tmp_path: Path, rel: str) -> Store:
    """The recorded store ``tests/data/<rel>`` copied into ``tmp_path`` as shipped (NOT joined again: what a user
    who opens it reads)."""
    import shutil

    dest = tmp_path / Path(rel).name
    shutil.copy(DATA / rel, dest)
    dest.chmod(0o644)
    return Store(dest)
