"""Join the recorded stores of tests/data again with this tree's join, keeping their recorded evidence.

A store holds the raw evidence of its runs (instances, kernels, ncu kernels, samples, provenance) and the join's
derived tables (attributions, instance values, matches).  When the join's rules change (``JOIN_VERSION`` in
argus_lab/join/attribution_sql.py), the recorded stores still hold the older rules' values and a Report says so;
this script joins every request of every store again (``argus-lab join --store X --all``) and compacts it, the
gzipped ones in place (gunzip, join, compact, gzip).  The recorded evidence itself is not touched.

    PYTHONPATH=$PWD python scripts/rejoin_recorded.py [tests/data]      # every *.duckdb and *.duckdb.gz below
"""

from __future__ import annotations

import gzip
import shutil
import sys
import tempfile
from pathlib import Path

from argus_lab.app.measure import join_runs
from argus_lab.join.attribution_sql import JOIN_BACKEND_VERSION
from argus_lab.store import Store
from argus_lab.store.compact import compact


def _current(store: Store) -> bool:
    """Whether every run the join processed was joined by this tree's join."""
    rows = store.rows("SELECT DISTINCT backend_version FROM provenance WHERE backend = 'join'")
    return all(v == JOIN_BACKEND_VERSION for (v,) in rows)


def rejoin(path: Path) -> str:
    """Join one store again (a ``.gz`` through a temporary copy); returns what was done."""
    if path.suffix != ".gz":
        st = Store(path)
        if _current(st):
            return f"{path}: already {JOIN_BACKEND_VERSION}"
        joined = sum(len(s.run_ids) for s in join_runs(st, every=True))
        compact(path)
        path.with_name(path.name + ".lock").unlink(missing_ok=True)
        return f"{path}: joined {joined} run(s) again"
    with tempfile.TemporaryDirectory() as tmp:
        plain = Path(tmp) / path.name.removesuffix(".gz")
        with gzip.open(path) as f, plain.open("wb") as out:
            shutil.copyfileobj(f, out)
        st = Store(plain)
        if _current(st):
            return f"{path}: already {JOIN_BACKEND_VERSION}"
        joined = sum(len(s.run_ids) for s in join_runs(st, every=True))
        compact(plain)
        with plain.open("rb") as f, path.open("wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as out:
            shutil.copyfileobj(f, out)
        return f"{path}: joined {joined} run(s) again (gzipped)"


def main(argv: list[str]) -> int:
    root = Path(argv[0]) if argv else Path(__file__).resolve().parents[1] / "tests" / "data"
    older = root / "older_joins"  # kept as an older join left them, for the schema migration tests
    for path in sorted(p for p in [*root.rglob("*.duckdb"), *root.rglob("*.duckdb.gz")] if older not in p.parents):
        print(rejoin(path), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
