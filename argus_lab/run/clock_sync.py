"""Host-clock offsets of the ranks of a multi-rank run against rank 0 (Cristian / NTP-style ping-pong).

Runs inside each rank's child process (:mod:`argus_lab.run.child`), once before the workload and once after it, so
that drift can be seen.  Kept light: no polars, plotly or ipywidgets; torch is imported only when a rank of
several estimates its offset.

The exchange goes through the store that torchrun's agent hosts for its workers (``MASTER_ADDR:MASTER_PORT``,
``TORCHELASTIC_USE_AGENT_STORE=True``), as a plain :class:`torch.distributed.TCPStore` client, so it needs no
process group and runs before the workload creates one.  Rank ``r > 0`` sends ping ``i`` (sets a key) at
``t_send`` on its clock, rank 0 answers with its own clock reading ``t_ref`` (sets the pong key), and rank ``r``
reads it at ``t_recv``.  Of all samples, the one with the smallest round trip gives

    offset = t_ref - (t_send + t_recv) / 2        uncertainty = (t_recv - t_send) / 2

so that ``rank-0 time = rank-r time + offset``.  Rank 0's offset is 0 by definition.  When the estimation cannot
run (no launcher store, torch missing, a rank that never answers) every affected rank records ``not estimated``
with the reason, and the run goes on: nothing measured depends on it.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from argus_lab import config

METHOD_VERSION = "1"
DEFAULT_SAMPLES = 32
DEFAULT_TIMEOUT_S = 30.0
"""How long rank 0 waits for another rank's first ping (and a rank for rank 0's answer): ranks reach the
exchange at different times (imports, an uneven workload).  ``ARGUS_CLOCK_SYNC_TIMEOUT_S`` overrides it."""
SAMPLE_TIMEOUT_S = 5.0
"""How long a later ping or pong may take once the first one went through."""

Phase = Literal["before", "after"]
Status = Literal["reference", "estimated", "not estimated"]

_SKIP = "skip"  # a rank that will not exchange samples tells rank 0 so, instead of its first ping
_GONE = "gone"  # rank 0 stopped waiting for a rank: the pong it finds instead of a clock reading


@dataclass(frozen=True)
class Sample:
    """One ping-pong: the rank's send and receive times and rank 0's reading in between (CLOCK_REALTIME ns)."""

    t_send_ns: int
    t_ref_ns: int
    t_recv_ns: int

    @property
    def round_trip_ns(self) -> int:
        """Time from sending the ping to receiving the pong, on the rank's clock."""
        return self.t_recv_ns - self.t_send_ns

    @property
    def offset_ns(self) -> int:
        """Rank 0's clock minus this rank's clock, assuming the two legs took equally long."""
        return self.t_ref_ns - (self.t_send_ns + self.t_recv_ns) // 2

    @property
    def uncertainty_ns(self) -> int:
        """Half the round trip: the true offset lies within ``offset ± uncertainty`` whatever the legs took."""
        return (self.round_trip_ns + 1) // 2


def best_sample(samples: Sequence[Sample]) -> Sample:
    """The sample with the smallest round trip (the earliest of equal ones); ``ValueError`` when empty."""
    if not samples:
        msg = "no clock samples to choose from"
        raise ValueError(msg)
    return min(samples, key=lambda s: s.round_trip_ns)


@dataclass(frozen=True)
class ClockOffset:
    """The estimate of one rank in one phase, as recorded in the run's provenance."""

    rank: int
    world_size: int
    phase: Phase
    status: Status
    offset_ns: int | None
    uncertainty_ns: int | None
    round_trip_ns: int | None
    samples: int
    at_ns: int | None
    """When the chosen sample was taken (midpoint, on this rank's clock): the time the offset holds at."""
    reason: str = ""
    endpoint: str = ""

    @staticmethod
    def from_samples(
        rank: int, world_size: int, phase: Phase, samples: Sequence[Sample], endpoint: str = "", reason: str = ""
    ) -> ClockOffset:
        """The estimate from the samples a rank collected (``not estimated`` with ``reason`` when there are none)."""
        if not samples:
            return ClockOffset.missing(rank, world_size, phase, reason or "no sample was exchanged", endpoint)
        best = best_sample(samples)
        return ClockOffset(
            rank,
            world_size,
            phase,
            "estimated",
            best.offset_ns,
            best.uncertainty_ns,
            best.round_trip_ns,
            len(samples),
            (best.t_send_ns + best.t_recv_ns) // 2,
            reason,
            endpoint,
        )

    @staticmethod
    def missing(rank: int, world_size: int, phase: Phase, reason: str, endpoint: str = "") -> ClockOffset:
        """A rank whose offset could not be estimated, and why."""
        return ClockOffset(rank, world_size, phase, "not estimated", None, None, None, 0, None, reason, endpoint)

    def provenance_id(self, run_id: str) -> str:
        """``<run>:clock:rank<r>:<phase>``: one provenance record per rank and phase."""
        return f"{run_id}:clock:rank{self.rank}:{self.phase}"

    def settings(self) -> dict[str, Any]:
        """The provenance settings (JSON): the estimate, how it was made, and why not when it was not."""
        return {
            "rank": self.rank,
            "world_size": self.world_size,
            "phase": self.phase,
            "status": self.status,
            "offset_ns": self.offset_ns,
            "uncertainty_ns": self.uncertainty_ns,
            "round_trip_ns": self.round_trip_ns,
            "samples": self.samples,
            "at_ns": self.at_ns,
            "method": (
                "Cristian ping-pong against rank 0 over the launcher's TCPStore"
                + (f" at {self.endpoint}" if self.endpoint else "")
                + "; the sample with the smallest round trip: offset = rank0_time - (t_send + t_recv) / 2, "
                "uncertainty = round_trip / 2; rank-0 time = this rank's time + offset"
            ),
            "reason": self.reason,
        }

    def provenance_columns(self, run_id: str) -> dict[str, list[Any]]:
        """One row of the ``provenance`` store table."""
        return {
            "provenance_id": [self.provenance_id(run_id)],
            "run_id": [run_id],
            "backend": ["clock"],
            "backend_version": [f"argus_lab.run.clock_sync {METHOD_VERSION}"],
            "settings": [json.dumps(self.settings(), sort_keys=True)],
            "clocks": [json.dumps({"host_clock": "CLOCK_REALTIME", "reference": "rank 0's CLOCK_REALTIME"})],
            "timestamps": ["none (nothing exchanged)" if self.status == "not estimated" else "measured"],
        }


class KeyValueStore(Protocol):
    """What the exchange needs of a store (a ``torch.distributed.TCPStore`` client, or a fake in tests)."""

    def set(self, key: str, value: str) -> None:
        """Set ``key``."""

    def get(self, key: str) -> bytes:
        """The value of ``key``, waiting until it is set (up to the store's timeout)."""

    def set_timeout(self, timeout: Any) -> None:
        """The timeout of later blocking calls (a ``datetime.timedelta``)."""


@dataclass(frozen=True)
class Endpoint:
    """Where the launcher's store listens, and this process's place among the ranks."""

    host: str
    port: int
    rank: int
    world_size: int
    prefix: str
    """Key prefix unique to the run, the launcher's restart and the phase."""


def endpoint_from_env(env: Mapping[str, str], run_id: str, phase: Phase) -> Endpoint | str:
    """The store to use, or the reason there is none (a launcher other than torchrun, variables missing)."""
    world = _int(env.get("WORLD_SIZE"), 1)
    if config.get(config.ARGUS_CLOCK_SYNC, env) == "0":
        return "disabled by ARGUS_CLOCK_SYNC=0 (unset it to estimate the ranks' clock offsets)"
    missing = [k for k in ("RANK", "MASTER_ADDR", "MASTER_PORT") if not env.get(k)]
    if missing:
        return (
            f"{', '.join(missing)} not set: the launcher is not torchrun, so there is no store to exchange clock "
            f"readings through; launch with `torchrun` (e.g. `--launch 'torchrun --nproc-per-node {world}'`) "
            "to get the offsets"
        )
    if env.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() != "true":
        return (
            "TORCHELASTIC_USE_AGENT_STORE is not True: no launcher agent hosts a store at MASTER_ADDR:MASTER_PORT "
            "before the workload starts; launch with `torchrun` (torch.distributed.run) to get the offsets"
        )
    port = _int(env.get("MASTER_PORT"), -1)
    if port <= 0:
        return f"MASTER_PORT={env.get('MASTER_PORT')!r} is not a port number"
    restart = env.get("TORCHELASTIC_RESTART_COUNT", "0")
    elastic = env.get("TORCHELASTIC_RUN_ID", "")
    prefix = f"argus/clock/{run_id}/{elastic}/{restart}/{phase}"
    return Endpoint(env["MASTER_ADDR"], port, _int(env.get("RANK"), 0), world, prefix)


def exchange(
    store: KeyValueStore,
    ep: Endpoint,
    phase: Phase,
    *,
    samples: int = DEFAULT_SAMPLES,
    first_timeout_s: float = DEFAULT_TIMEOUT_S,
    sample_timeout_s: float = SAMPLE_TIMEOUT_S,
    skip: str = "",
    clock: Callable[[], int] = time.time_ns,
) -> ClockOffset:
    """Run this rank's side of the ping-pong (rank 0 answers every other rank) and return its estimate.

    ``skip`` (a reason) makes a rank tell rank 0 at once that it will not take part (e.g. its workload failed),
    so that rank 0 does not wait for it.
    """
    import datetime

    where = f"{ep.host}:{ep.port}"

    def key(kind: str, rank: int, i: int) -> str:
        return f"{ep.prefix}/{kind}/{rank}/{i}"

    if ep.rank == 0:
        pending = list(range(1, ep.world_size))
        dropped: dict[int, str] = {}
        answered: dict[int, int] = {}
        for i in range(samples):
            for r in list(pending):
                store.set_timeout(datetime.timedelta(seconds=first_timeout_s if i == 0 else sample_timeout_s))
                try:
                    value = store.get(key("ping", r, i))
                except Exception as exc:  # a timeout: that rank never came (or stopped)
                    dropped[r] = f"no ping {i} within the timeout ({_short(exc)})"
                    pending.remove(r)
                    _quiet(store.set, key("pong", r, i), _GONE)
                    continue
                if value == _SKIP.encode():
                    dropped[r] = "did not take part"
                    pending.remove(r)
                    continue
                store.set(key("pong", r, i), str(clock()))
                answered[r] = answered.get(r, 0) + 1
        notes = [f"rank {r}: {why}" for r, why in sorted(dropped.items())]
        return ClockOffset(
            0, ep.world_size, phase, "reference", 0, 0, 0, sum(answered.values()), clock(), "; ".join(notes), where
        )
    if skip:
        _quiet(store.set, key("ping", ep.rank, 0), _SKIP)
        return ClockOffset.missing(ep.rank, ep.world_size, phase, skip, where)
    got: list[Sample] = []
    reason = ""
    for i in range(samples):
        store.set_timeout(datetime.timedelta(seconds=first_timeout_s if i == 0 else sample_timeout_s))
        t_send = clock()
        try:
            store.set(key("ping", ep.rank, i), "1")
            value = store.get(key("pong", ep.rank, i))
        except Exception as exc:
            reason = f"rank 0 did not answer ping {i} ({_short(exc)})"
            break
        t_recv = clock()
        if value == _GONE.encode():
            reason = f"rank 0 stopped waiting for this rank at ping {i}"
            break
        got.append(Sample(t_send, int(value), t_recv))
    if got and reason:
        reason = f"{len(got)} of {samples} samples: {reason}"
    return ClockOffset.from_samples(ep.rank, ep.world_size, phase, got, where, reason)


def estimate(
    run_id: str,
    phase: Phase,
    env: Mapping[str, str] | None = None,
    *,
    skip: str = "",
    samples: int = DEFAULT_SAMPLES,
) -> ClockOffset:
    """This rank's clock offset against rank 0, or ``not estimated`` with the reason.  Never raises."""
    env = os.environ if env is None else env
    rank, world = _int(env.get("RANK"), 0), _int(env.get("WORLD_SIZE"), 1)
    found = endpoint_from_env(env, run_id, phase)
    if isinstance(found, str):
        return ClockOffset.missing(rank, world, phase, found)
    ep = found
    timeout_s = _float(config.value(config.ARGUS_CLOCK_SYNC_TIMEOUT_S, env), DEFAULT_TIMEOUT_S)
    try:
        import datetime

        from torch.distributed import TCPStore  # type: ignore[attr-defined, unused-ignore]
    except Exception as exc:
        return ClockOffset.missing(rank, world, phase, f"torch.distributed is not importable ({_short(exc)})")
    try:
        store = TCPStore(
            ep.host,
            ep.port,
            is_master=False,
            timeout=datetime.timedelta(seconds=timeout_s),
            wait_for_workers=False,
        )
    except Exception as exc:
        why = f"cannot connect to the launcher's store at {ep.host}:{ep.port} ({_short(exc)})"
        return ClockOffset.missing(rank, world, phase, why)
    try:
        return exchange(
            store,
            ep,
            phase,
            samples=samples,
            first_timeout_s=timeout_s,
            sample_timeout_s=min(timeout_s, SAMPLE_TIMEOUT_S),
            skip=skip,
        )
    except Exception as exc:  # never lose a run to the clock estimate
        return ClockOffset.missing(rank, world, phase, f"the exchange failed ({_short(exc)})")
    finally:
        del store


def _int(text: str | None, default: int) -> int:
    try:
        return int(text) if text not in (None, "") else default
    except ValueError:
        return default


def _float(text: str | None, default: float) -> float:
    try:
        return float(text) if text not in (None, "") else default
    except ValueError:
        return default


def _short(exc: BaseException) -> str:
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {first[:200]}" if first else type(exc).__name__


def _quiet(fn: Callable[[str, str], object], key: str, value: str) -> None:
    try:
        fn(key, value)
    except Exception:  # best effort: the other side times out on its own
        return


__all__ = [
    "ClockOffset",
    "Endpoint",
    "Sample",
    "best_sample",
    "endpoint_from_env",
    "estimate",
    "exchange",
]
