"""The statuses a run is stored with (``runs.status``)."""

from __future__ import annotations

from typing import Literal

RunStatus = Literal["running", "ok", "partial", "skipped", "failed", "died", "interrupted"]

RUN_STATUSES: tuple[str, ...] = ("running", "ok", "partial", "skipped", "failed", "died", "interrupted")
"""``running``: not finished (or its process died and nobody recovered it yet); ``ok``: every backend measured;
``partial``: some backends measured, the others could not (the cause says why); ``skipped``: nothing could run
here (no GPU, tool missing); ``failed``: the workload or a backend raised; ``died``: the process ended without
finishing (found by recovery); ``interrupted``: stopped by the user, with the repetitions it finished."""

MEASURED: tuple[str, ...] = ("ok", "partial")
"""The statuses of a run whose evidence can be read as a measurement."""

FAILED: tuple[str, ...] = ("failed", "died")
"""The statuses of a run that ended by a fault (``on_error="stop"`` stops a plan at them)."""

__all__ = ["FAILED", "MEASURED", "RUN_STATUSES", "RunStatus"]
