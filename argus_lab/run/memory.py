"""Giving freed memory back to the system after the large, short-lived arrays of a run's evidence.

glibc raises its mmap threshold after large blocks are freed, so later large arrays come from the heap and stay
there once freed: after decoding millions of records, hundreds of MB the process no longer uses would still count
in its RSS while the evidence is stored.  ``malloc_trim(0)`` returns them (glibc only; elsewhere nothing happens).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from typing import Any


@functools.cache
def _libc() -> Any:
    name = ctypes.util.find_library("c")
    try:
        lib = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return lib if lib is not None and hasattr(lib, "malloc_trim") else None


def release_freed_memory() -> bool:
    """Return freed heap memory to the system; whether it could be asked (glibc)."""
    lib = _libc()
    if lib is None:
        return False
    lib.malloc_trim(0)
    return True


__all__ = ["release_freed_memory"]
