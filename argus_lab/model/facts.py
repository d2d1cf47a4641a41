"""The ``compile.*`` signals and the ``kernel_facts`` column each reads: the compiler backend writes the metrics of
a binary from these columns and the join gives a launch the facts of its binary by the same table (units: the
catalog's, :func:`argus_lab.plan.catalog.unit`)."""

from __future__ import annotations

COMPILE_FACTS: tuple[tuple[str, str], ...] = (
    ("compile.registers", "registers"),
    ("compile.spills", "local_words"),
    ("compile.shared", "shared_bytes"),
    ("compile.num_warps", "num_warps"),
    ("compile.num_stages", "num_stages"),
    ("compile.sass_instructions", "sass_instructions"),
)
"""(signal, ``kernel_facts`` column) of every ``compile.*`` signal of the catalog."""

__all__ = ["COMPILE_FACTS"]
