"""Small files written whole or not at all: a reader (another process, recovery after a kill) never sees half of
one."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def write_json(path: Path, value: Mapping[str, Any]) -> None:
    """Write a small JSON file atomically: to a temporary name beside it, flushed to disk, then renamed."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w") as f:
        json.dump(value, f)
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)


__all__ = ["write_json"]
