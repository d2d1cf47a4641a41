"""The join of a long run in a fresh process, so that the measured process never holds it.

:func:`argus_lab.app.measure.run_plan` joins where the runs end: for ``argus_lab.measure`` (a run in the measured
process) that is the process whose memory the workload needs.  Joining millions of kernel records takes a few hundred
bytes per record at its peak (DuckDB's hash tables and the join's array passes; docs/benchmarks.md, "memory per kernel
record"), so runs holding at least :data:`FRESH_PROCESS_RECORDS` kernel records are joined by
``python -m argus_lab.app.join_process STORE RUN_ID...`` instead, which exits when done; a join that fails there is
run again in this process (whose message then says what failed), so nothing is lost either way.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from argus_lab.join import attribute_request
from argus_lab.report.runs import kernel_records
from argus_lab.store import Store

FRESH_PROCESS_RECORDS = 200_000
"""Kernel records and region instances from which the runs are joined in a fresh process (below, starting one costs
more than it saves)."""


def join_measured_runs(store: Store, run_ids: Sequence[str], instances: int = 0) -> str:
    """Join ``run_ids`` (:func:`attribute_request`): in a fresh process when they hold many kernel records and region
    instances (``instances``: how many the runs stored, as the run driver counted them), else here.  Returns where it
    ran (``"fresh process"`` or ``"this process"``)."""
    ids = list(run_ids)
    long = ids and (
        instances >= FRESH_PROCESS_RECORDS or instances + kernel_records(store, ids) >= FRESH_PROCESS_RECORDS
    )
    if long and _in_fresh_process(store, ids):
        return "fresh process"
    attribute_request(store, ids)
    return "this process"


def _in_fresh_process(store: Store, run_ids: list[str]) -> bool:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[2]), env.get("PYTHONPATH")]))
    cmd = [sys.executable, "-m", "argus_lab.app.join_process", str(store.path), *run_ids]
    try:  # Ctrl-C ends the child too (subprocess.run kills it before the interrupt goes on)
        done = subprocess.run(cmd, env=env, stdin=subprocess.DEVNULL, capture_output=True, check=False)
    except OSError:
        return False
    return done.returncode == 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2:
        print("usage: python -m argus_lab.app.join_process STORE RUN_ID...", file=sys.stderr)
        return 2
    attribute_request(Store(args[0], recover=False), args[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
