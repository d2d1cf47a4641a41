"""Exceptions raised by argus_lab.

Every message names what went wrong and how to fix it.  All exceptions derive from
:class:`ArgusError`, so a caller can catch the whole family in one place.
"""

from __future__ import annotations


class ArgusError(Exception):
    """Base class of every error argus_lab raises on purpose."""


class UnknownSignalError(ArgusError, ValueError):
    """A requested signal is not in the catalog."""


class ScopeSyntaxError(ArgusError, ValueError):
    """A scope string could not be parsed."""


class ScopeError(ArgusError, ValueError):
    """A well-formed scope that matched none of the regions a measurement recorded (the message names them)."""


class RegionMisuseError(ArgusError, RuntimeError):
    """A region marker was used wrongly (exit without enter, unbalanced nesting)."""


class CollectorBusyError(ArgusError, RuntimeError):
    """A collector is already active in this process."""


class StoreError(ArgusError, RuntimeError):
    """The evidence store cannot be opened or written."""


class QueryError(StoreError, ValueError):
    """A query the user sent to the store (``argus_lab.sql``, ``Store.sql``, ``%argus sql``) that DuckDB refused."""


class SchemaVersionError(StoreError):
    """The store was written with a schema this version of argus_lab does not know."""


class WorkloadError(ArgusError, ValueError):
    """The workload to measure cannot be found or loaded."""


class BackendUnavailableError(ArgusError, RuntimeError):
    """A backend cannot run on this machine (no GPU, tool missing, no permission)."""


class PlanError(ArgusError, ValueError):
    """A request cannot be turned into a plan."""


class ExportError(ArgusError, ValueError):
    """An export that cannot be done as asked (the message says how to ask, or where to write instead)."""


class ImportFormatError(ArgusError, ValueError):
    """A file given to ``argus-lab import`` is not a trace argus_lab can read (or not the format named)."""


class OptimizeError(ArgusError, ValueError):
    """A mistake in using the optimisation loop (unknown parameter, a value outside the space, a bad budget)."""


class CandidateError(ArgusError):
    """A target could not build or launch a candidate: ``kind`` is ``compile`` or ``launch``."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class DeviceBufferError(RegionMisuseError):
    """A probe buffer shows misuse of the device markers or a buffer too small; the message names the fix."""


class StorePathError(ValueError):
    """A store path that a request to the Jupyter server may not use (outside the server's root, not a store)."""
