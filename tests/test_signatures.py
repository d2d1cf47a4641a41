"""SYNTHETIC: the kernel-sequence signature of each instance (``instance_signatures``), checked by hand.

An instance's sequence is the names of its own exactly attributed kernels and each nested instance's sequence as one
block, ordered by first launch; its signature is the md5 of the names joined by chr(31), a kernel without a name
left out, and ``''`` for an instance that launched nothing.  Guards the array passes of ``argus_lab.join.signatures``
(interning one nesting level at a time, spelling each distinct sequence once, the way round a missing name).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from argus_lab.join import attribute_request
from argus_lab.store import Store
from tests.join_synth import Inst, Kern, SynthRun, write


def _md5(*names: str) -> str:
    return hashlib.md5("\x1f".join(names).encode()).hexdigest()


def test_each_instance_is_signed_by_its_names_in_launch_order(tmp_path: Path) -> None:
    st = Store(tmp_path / "s.duckdb")
    instances = [
        Inst(1, "a", 0, 1000),
        Inst(2, "a/b", 100, 400, parent=1),
        Inst(3, "a/c", 500, 900, parent=1),
        Inst(4, "a/d", 950, 990, parent=1),  # launches nothing
        Inst(5, "a", 2000, 3000, index=1),  # the same sequence as a's first instance
        Inst(6, "a/b", 2100, 2400, parent=5),
        Inst(7, "a/c", 2500, 2900, parent=5),
    ]
    kernels = [
        Kern(1, "x", 10, 20, 1),
        Kern(2, "y", 110, 120, 2),
        Kern(3, None, 130, 140, 2),  # type: ignore[arg-type]  # a record without a name
        Kern(4, "z", 510, 520, 3),
        Kern(5, "w", 920, 930, 1),  # a's own, after its children
        Kern(11, "x", 2010, 2020, 5),
        Kern(12, "y", 2110, 2120, 6),
        Kern(13, None, 2130, 2140, 6),  # type: ignore[arg-type]
        Kern(14, "z", 2510, 2520, 7),
        Kern(15, "w", 2920, 2930, 5),
    ]
    write(st, [SynthRun("r", instances=instances, kernels=kernels)])
    attribute_request(st, ["r"])
    got = dict((i, (k, s)) for i, k, s in st.rows("SELECT instance_id, kernels, signature FROM instance_signatures"))
    whole = _md5("x", "y", "z", "w")  # x (1), b's block (2, 3), c's block (4), w (5)
    assert got == {
        1: (5, whole),
        2: (2, _md5("y")),
        3: (1, _md5("z")),
        4: (0, ""),
        5: (5, whole),
        6: (2, _md5("y")),
        7: (1, _md5("z")),
    }
