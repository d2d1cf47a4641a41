"""Columns of store tables as they travel from a run to the store: JSON columns and Arrow-ready values.

Shared by the run's shards (:mod:`argus_lab.run.shards`) and the store's writer (:mod:`argus_lab.store.db`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, cast

JSON_COLUMNS = frozenset({"settings", "clocks", "spec", "env", "versions"})
"""Columns stored as JSON text; list columns ``backends`` and ``signals`` stay lists."""


def jsonable_columns(data: Mapping[str, Sequence[Any]]) -> dict[str, Sequence[Any]]:
    """Columns ready for Arrow: dicts and lists in JSON columns (or in any column led by one) become JSON text.

    Merged evidence can mix dicts and JSON text in one column (one collector gives a dict, another text), so each
    value is converted on its own and text is left as it is.
    """
    out: dict[str, Sequence[Any]] = {}
    for key, col in data.items():
        if getattr(getattr(col, "dtype", None), "kind", "") == "T":
            # numpy's variable-width strings (StringDType, e.g. the CUPTI collector's kernel keys): the pyarrow of the
            # H200's image cannot read them ("Unsupported numpy type 2056"; the CPU machine's 26.0 can), so they go
            # as fixed-width unicode, which every pyarrow reads without a Python object per value
            import numpy as np

            arr = np.asarray(col)
            width = int(np.strings.str_len(arr).max()) if len(arr) else 1
            out[key] = cast("Sequence[Any]", arr.astype(f"<U{max(width, 1)}"))
            continue
        if (
            len(col) > 0
            and isinstance(col, list | tuple)  # arrays (numpy, Arrow) hold no dicts: they go to Arrow as they are
            and (isinstance(col[0], dict | list) or key in JSON_COLUMNS)
            and key not in {"backends", "signals"}
        ):
            out[key] = [json.dumps(v) if isinstance(v, dict | list) else v for v in col]
        else:
            out[key] = col
    return out
