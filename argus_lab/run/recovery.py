"""What a run folder holds, turned into a run's outcome; and whether the process behind a run is still alive.

One code path ingests a child-process run, whether its parent reads the folder when the child ends
(:mod:`argus_lab.run.runtime`) or a later process finds it left behind (:mod:`argus_lab.app.recovery`):
:func:`collect` reads every shard that can be read (a damaged file is named in the cause, the others kept), asks
the launcher backend for its evidence (the ncu report), and says the run's status, cause and repetitions.

:func:`process_alive` tells whether the process that owns a ``running`` run still runs (same host only): a pid
that no longer exists, or that a younger process has taken over, is dead.  :data:`ACTIVE_RUNS` holds the runs this
process is executing now, so that recovery never takes a run from under a measurement of its own process.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from argus_lab.run import shards
from argus_lab.run.protocols import RunContext

ACTIVE_RUNS: set[str] = set()
"""Ids of the runs this process is executing now (added and removed by the runtime)."""


@dataclass(frozen=True)
class Ingest:
    """A run folder's tables and the outcome they make."""

    tables: dict[str, Any]
    status: str
    cause: str
    reps_done: int


def collect(
    folder: Path,
    ctx: RunContext,
    launcher: Any = None,
    *,
    ended: str = "",
    interrupted: bool = False,
) -> Ingest:
    """The tables of ``folder`` and the run's outcome.

    ``launcher`` (a :class:`~argus_lab.run.protocols.Launcher`, or ``None``) adds its evidence when the child left a
    status; ``ended`` says how the child process ended (``"exited with status 1"``, ``"was killed by SIGKILL"``),
    and ``interrupted`` that the user stopped the run (the run is then ``interrupted`` whatever the child said).
    """
    read = shards.read_folder(folder)
    tables = dict(read.tables)
    problems = list(read.problems)
    status = read.status
    if launcher is not None and status is not None:
        inst = tables.get("region_instances")
        cols = inst.to_pydict() if inst is not None else {"instance_id": []}
        try:
            for table, data in launcher.evidence(ctx, cols).items():
                tables[table] = _concat(tables.get(table), data)
        except Exception as exc:  # the tool's report is missing or unreadable: the shards are still kept
            problems.append(f"{launcher.info.name} evidence: {exc}")
    reps = read.repetitions
    saved = f"{reps} repetition(s) were saved"
    if status is None:
        torn = any(p.split(":", 1)[0].endswith(shards.STATUS_FILE) for p in problems)
        if interrupted:
            st, cause, done = "interrupted", f"interrupted by the user; the child process {ended or 'stopped'}", reps
        elif torn:
            st, cause, done = "failed", f"the child process {ended or 'ended'} but its status could not be read", reps
        else:
            tail = _tail(folder / "child.log")
            how = ended or "ended"
            st, cause, done = "died", f"the child process {how} before it finished; {saved}", reps
            if tail:
                cause += f". Last output:\n{tail}"
    else:
        st, cause, done = str(status["status"]), str(status["cause"]), int(status["reps_done"])
        if interrupted and st == "ok":
            st = "interrupted"
            cause = f"interrupted by the user after the child finished its {done} repetition(s)"
        elif interrupted:
            st = "interrupted"
    if problems:
        if st in ("ok", "partial"):
            st = "failed"
        listed = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
        cause = (cause + "\n" if cause else "") + (
            f"{len(problems)} file(s) of the run folder {folder} could not be read and were left out ({listed}); "
            f"everything else in it is stored ({saved})"
        )
    return Ingest(tables, st, cause, done)


def process_alive(pid: int | None, started_ns: int | None = None) -> bool:
    """Whether process ``pid`` (of this host) still runs and is not younger than ``started_ns`` (a younger
    process holding the pid took it over after the owner died)."""
    if not pid or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, owned by someone else
    state, born = _proc_stat(pid)
    if state in ("Z", "X"):  # exited, not yet reaped (an orphan whose new parent does not reap)
        return False
    return not (started_ns and born is not None and born > started_ns / 1e9 + 2.0)


def _proc_stat(pid: int) -> tuple[str, float | None]:
    """The state of process ``pid`` and when it started (seconds since the epoch), from Linux ``/proc``; ``("",
    None)`` elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = int(fields[19])
        btime = next(int(ln.split()[1]) for ln in Path("/proc/stat").read_text().splitlines() if ln.startswith("btime"))
        return fields[0], btime + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return "", None


def _concat(a: Any, data: Any) -> Any:
    import pyarrow as pa

    b = data if isinstance(data, pa.Table) else shards._table(data)
    return b if a is None else pa.concat_tables([a, b], promote_options="default")


def _tail(path: Path, lines: int = 8) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


__all__ = ["ACTIVE_RUNS", "Ingest", "collect", "process_alive"]
