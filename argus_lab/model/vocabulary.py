"""The attribution vocabulary: the classes a piece of evidence is attributed with, what each means, and the kinds
of evidence the ``attributions`` table holds."""

from __future__ import annotations

CLASSES: tuple[str, ...] = ("exact", "ordinal", "temporal", "ambiguous", "unattributed", "mismatch")
"""The attribution classes, most certain first."""

CLASS_MEANINGS: dict[str, str] = {
    "exact": "the evidence carries the instance's own identity: a kernel launched by the thread that opened the "
    "instance, while it was open (its launch carried the instance id); an NVTX range of the instance in ncu",
    "ordinal": "an ncu kernel matched to the timing run's kernel by region path, instance index, ordinal and name",
    "temporal": "placed by time, never by identity: the only candidate open then; kernels of autograd's thread go "
    "to the region of the thread in backward() (the reason says so); samples split over the instances they overlap",
    "ambiguous": "several instances remain (e.g. the launching thread is not known and regions were open on several "
    "threads): all are kept, with weights that add up to 1",
    "unattributed": "outside every region, or launched by a thread with no region of its own (a thread is never "
    "given another thread's region); the reason names what was open elsewhere",
    "mismatch": "the runs disagree about the instance (another kernel sequence): kept and flagged, not forced",
}
"""What each class means (docs/join.md), shown with the Report's attribution tables."""

EVIDENCE_KINDS = ("kernel", "memcpy", "memset", "ncu_kernel", "sample", "instance", "compiler", "device_launch")
"""The ``attributions.evidence`` values the join writes (and replaces when it runs again)."""

__all__ = ["CLASSES", "CLASS_MEANINGS", "EVIDENCE_KINDS"]
