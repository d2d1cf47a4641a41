"""Fault-suite workload: in its third repetition it overwrites the first repetition's shard with bytes that are not
Parquet (a damaged file in the run folder, as a failing disk or a stray tool would leave it)."""

import os
from pathlib import Path

import argus_lab
from argus_lab.regions import active_recorder

rec = active_recorder()
with argus_lab.region("work"):
    if rec is not None and rec.repetition == 2:
        folder = Path(os.environ["ARGUS_TEST_RUNS"]) / os.environ["ARGUS_RUN_ID"]
        (folder / "instances-00000.parquet").write_bytes(b"PAR1 this is not a parquet file" * 10)
