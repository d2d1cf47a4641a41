"""Importers: traces recorded by other tools turned into the raw evidence tables a real run writes.

Each importer reads one file and returns an :class:`~argus_lab.importers.common.ImportedTrace`: Arrow
tables for ``region_instances``, ``regions``, ``kernels`` (or ``ncu_kernels`` and ``metrics``), ``provenance``
and ``artifacts``, all for one run id, so that the join attributes them exactly as it attributes a measured run.
Nothing here opens the store: the caller (``argus_lab.import_trace``) inserts the run, writes the tables and runs
the join.

* :mod:`~argus_lab.importers.kineto`: torch.profiler / Kineto Chrome-trace JSON (``.json``, ``.json.gz``);
* :mod:`~argus_lab.importers.nsys`: Nsight Systems reports (``.nsys-rep`` through ``nsys export --type
  sqlite``, or the exported ``.sqlite``);
* :mod:`~argus_lab.importers.ncu_rep`: Nsight Compute reports (``.ncu-rep``).
"""

from __future__ import annotations

from pathlib import Path

from argus_lab.errors import ImportFormatError
from argus_lab.importers.common import FORMATS, ImportedTrace, check_trace_file, detect_format


def read_trace(path: str | Path, run_id: str, fmt: str | None = None, **options: object) -> ImportedTrace:
    """The evidence of one trace file as tables for run ``run_id`` (``fmt``: one of :data:`FORMATS`, or detected)."""
    if fmt is not None:
        check_trace_file(path)
    kind = fmt or detect_format(path)
    if kind == "kineto":
        from argus_lab.importers import kineto

        return kineto.read(path, run_id, **options)  # type: ignore[arg-type]
    if kind == "nsys":
        from argus_lab.importers import nsys

        return nsys.read(path, run_id, **options)  # type: ignore[arg-type]
    if kind == "ncu":
        from argus_lab.importers import ncu_rep

        return ncu_rep.read(path, run_id, **options)  # type: ignore[arg-type]
    msg = f"unknown trace format {kind!r}; use one of {', '.join(FORMATS)}"
    raise ImportFormatError(msg)


__all__ = ["FORMATS", "ImportedTrace", "check_trace_file", "detect_format", "read_trace"]
