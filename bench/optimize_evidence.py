#!/usr/bin/env python3
"""The walk configuration's store packed for notebooks/optimize.ipynb: its runs only, compacted, gzipped, small.

    python bench/optimize_evidence.py OUT/evidence [--limit 5000000]

The benchmark (bench/optimize_bench.py) measures the walk configuration into a store of its own
(``evidence/optimize_walk.duckdb`` with its ``.runs/`` folder) and describes it in ``optimize_walk.json``.  Every
candidate's instrumented launch records up to hundreds of thousands of device-region occurrences (raw
``device_intervals``, about 10 bytes each gzipped): a dozen of them is tens of megabytes, over what recorded evidence
may weigh (< 7 MB a file).  :func:`pack_walk`

1. keeps only the walk configuration's runs (``settings.optimize.target``; :func:`argus_lab.store.trim.keep_runs`);
2. keeps the raw intervals of as many instrumented runs as fit ``limit``, in tiers (``TIERS``): all of them; those of
   the default and of each search's best (what the notebook's compare view shows); the evidence-guided best's alone;
   none.  Every launch's derived rows (``dev.*`` values, per-SM and per-program rows) stay in every tier: the
   evidence the searches read is complete, only the per-SM timeline of a launch without intervals is gone;
3. compacts the store (:func:`argus_lab.store.compact.compact`, 16 KiB blocks) and gzips it
   (``optimize_walk.duckdb.gz``); if the file is still over ``limit`` the next tier is applied;
4. writes what it kept and dropped to ``optimize_walk.pack.json`` (the notebook prints it).
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

NAME = "optimize_walk"
LIMIT = 5_000_000
"""Bytes the gzipped walk store aims under (recorded files must stay below 7 MB)."""
ROW_BYTES = 10
"""Gzipped bytes per raw device interval in a compacted store (H200: 9.2 for tests/data/gpu/device's GEMM store)."""
TIERS = ("all", "default and bests", "evidence-guided best", "none")
"""Whose raw device intervals stay, in the order tried."""


def kept_candidates(walk: dict[str, Any], tier: str) -> set[str] | None:
    """The candidates whose instrumented runs keep their raw intervals in ``tier`` (``None``: every one)."""
    if tier == "all":
        return None
    summary = walk.get("summary") or {}
    guided = (summary.get("evidence-guided") or {}).get("best")
    if tier == "evidence-guided best":
        return {guided} if guided else set()
    if tier == "none":
        return set()
    keep = {(walk.get("default") or {}).get("key")}
    keep |= {(summary.get(n) or {}).get("best") for n in ("timing-only", "evidence-guided")}
    return {k for k in keep if k}


def gzip_file(path: Path) -> Path:
    packed = path.with_name(path.name + ".gz")
    with path.open("rb") as src, gzip.open(packed, "wb", compresslevel=6) as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    return packed


def pack_walk(evidence: Path, *, limit: int = LIMIT, name: str = NAME) -> dict[str, Any]:
    """Pack ``evidence/<name>.duckdb`` as the module docstring says; returns (and writes) the pack record."""
    from argus_lab.optimize.session import history
    from argus_lab.store import Store
    from argus_lab.store.compact import compact
    from argus_lab.store.trim import device_interval_counts, drop_device_intervals, keep_runs

    t0 = time.monotonic()
    store_path = evidence / f"{name}.duckdb"
    walk_file = evidence / f"{name}.json"
    if not store_path.exists():
        msg = f"no walk store at {str(store_path)!r}: the benchmark writes it for the walk configuration"
        raise FileNotFoundError(msg)
    walk = json.loads(walk_file.read_text()) if walk_file.exists() else {}
    target = walk.get("target")
    store = Store(store_path)
    rows = history(store)
    mine = [r for r in rows if target is None or r["target"] == target]
    removed = keep_runs(store, [r["run_id"] for r in mine])
    instrumented = {r["run_id"]: r["candidate"] for r in mine if r["variant"] == "instrumented"}
    counts = device_interval_counts(store)
    record: dict[str, Any] = {
        "schema": "argus_lab.optimize-walk-pack/1",
        "target": target,
        "runs": len(mine),
        "runs_removed": removed,
        "intervals": {run: {"candidate": instrumented.get(run), "rows": n} for run, n in sorted(counts.items())},
        "bytes_raw": store_path.stat().st_size,
        "limit": limit,
    }
    tiers = list(TIERS)
    estimate = {t: sum(n for run, n in counts.items() if _keeps(kept_candidates(walk, t), instrumented, run))
                for t in tiers}  # fmt: skip
    first = next((i for i, t in enumerate(tiers) if estimate[t] * ROW_BYTES <= 0.8 * limit), len(tiers) - 1)
    packed = store_path.with_name(store_path.name + ".gz")
    for tier in tiers[first:]:
        keep = kept_candidates(walk, tier)
        drop = [run for run in counts if not _keeps(keep, instrumented, run)]
        dropped = drop_device_intervals(store, drop) if drop else 0
        for run in drop:
            counts[run] = 0
        done = compact(store)
        packed = gzip_file(store_path)
        record.update(
            tier=tier,
            intervals_kept={run: n for run, n in counts.items() if n},
            intervals_dropped=record.get("intervals_dropped", 0) + dropped,
            bytes_compacted=done.bytes,
            bytes_gz=packed.stat().st_size,
        )
        if packed.stat().st_size <= limit:
            break
    store_path.unlink()
    for extra in (store_path.with_name(store_path.name + ".wal"), store_path.with_name(store_path.name + ".lock")):
        extra.unlink(missing_ok=True)
    record["seconds"] = time.monotonic() - t0
    record["note"] = (
        f"raw device intervals kept for: {record['tier']} (every launch keeps its dev.* values, per-SM and per-program "
        "rows; a launch without raw intervals has no per-SM timeline)"
    )
    (evidence / f"{name}.pack.json").write_text(json.dumps(record, indent=1))
    return record


def _keeps(keep: set[str] | None, instrumented: dict[str, str], run: str) -> bool:
    return keep is None or instrumented.get(run) in keep


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("evidence", help="the folder with optimize_walk.duckdb and optimize_walk.json")
    ap.add_argument("--limit", type=int, default=LIMIT, help=f"bytes the gzipped store aims under ({LIMIT})")
    args = ap.parse_args(argv)
    rec = pack_walk(Path(args.evidence), limit=args.limit)
    print(
        f"walk store packed in {rec['seconds']:.1f} s: {rec['runs']} runs of {rec['target']}, raw intervals kept "
        f"for {rec['tier']}, {rec['bytes_raw']:,} B -> {rec['bytes_compacted']:,} B compacted -> "
        f"{rec['bytes_gz']:,} B gzipped"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
