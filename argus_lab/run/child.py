"""Entry point of a child-process run: ``python -m argus_lab.run.child SPEC.json``.

The parent (:mod:`argus_lab.run.runtime`) writes the spec, starts this module (possibly under a tool such as
``ncu``), and ingests the shards it leaves in the run folder.  Keep this module light: it starts once per
ncu invocation.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path
from types import FrameType

from argus_lab import config
from argus_lab.errors import ArgusError
from argus_lab.run import clock_sync, shards
from argus_lab.run.clock_sync import Phase
from argus_lab.run.driver import drive
from argus_lab.run.loader import load_backend
from argus_lab.run.workload import Workload


def main(argv: list[str] | None = None) -> int:
    """Run the spec's workload and write its shards; exit status 0 when the run finished ok."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m argus_lab.run.child SPEC.json", file=sys.stderr)
        return 2
    spec = json.loads(Path(args[0]).read_text())
    os.environ[config.ARGUS_CHILD] = "1"
    for sig in (signal.SIGINT, signal.SIGTERM):  # stop once, then finish writing what was measured
        signal.signal(sig, _stop_once)
    folder = Path(spec["out_dir"])
    ranks = int(os.environ.get("WORLD_SIZE", "1") or 1)
    if ranks > 1:  # one of several ranks: a shard folder of its own
        folder = folder / f"rank-{os.environ.get('RANK', '0')}"
    folder.mkdir(parents=True, exist_ok=True)
    if ranks > 1:  # this rank's host-clock offset against rank 0, before the workload runs
        _clock_offset(folder, spec["run_id"], "before")
    workload = Workload.from_dict(spec["workload"])
    if workload.kind == "script":
        os.chdir(workload.cwd)
    try:
        collectors = [load_backend(name) for name in spec.get("collectors", [])]
    except ArgusError as exc:  # said in the status, so the parent stores the run as failed with the cause
        shards.write_status(folder, "failed", str(exc), 0)
        print(exc, file=sys.stderr)
        return 1
    outcome = drive(
        spec["run_id"],
        workload,
        collectors,
        spec["signals"],
        spec.get("settings", {}),
        int(spec["repeat"]),
        int(spec["warmup"]),
        folder,
        after_repetition=lambda rep, evidence: shards.write_repetition(folder, rep, evidence),
        after_workers=lambda evidence: shards.write_parts(folder, "workers", evidence),
    )
    shards.write_evidence(folder, outcome.evidence)
    shards.write_status(folder, outcome.status, outcome.cause, outcome.reps_done)
    # and after it (drift), once the status is written (a rank killed while it waits keeps its run); a rank
    # whose workload did not finish tells rank 0 not to wait for it
    if ranks > 1:
        skip = "" if outcome.status == "ok" else f"the workload did not finish on this rank ({outcome.status})"
        _clock_offset(folder, spec["run_id"], "after", skip)
    if outcome.cause:
        print(outcome.cause, file=sys.stderr)
    return 0 if outcome.status == "ok" else 1


def _stop_once(signum: int, _frame: FrameType | None) -> None:
    """The first SIGINT or SIGTERM interrupts the workload (the run ends ``interrupted`` and keeps its repetitions);
    later ones are ignored, so that a second Ctrl-C (or the parent passing the first one on) cannot cut the writing
    of the shards and the status short."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt(signal.Signals(signum).name)


def _clock_offset(folder: Path, run_id: str, phase: Phase, skip: str = "") -> None:
    """Estimate this rank's clock offset (the estimate never raises) and write it as a provenance row at once."""
    offset = clock_sync.estimate(run_id, phase, skip=skip)
    shards.write_part(folder, "provenance", f"clock-{phase}", offset.provenance_columns(run_id))


if __name__ == "__main__":
    sys.exit(main())
