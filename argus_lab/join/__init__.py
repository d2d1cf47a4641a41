"""The join: the only place evidence becomes per-instance values.

Attribution of every piece of evidence to region instances (:mod:`.attribution`, its SQL in
:mod:`.attribution_sql`), the instances' kernel-sequence signatures (:mod:`.signatures`), sample windows
(:mod:`.windows`), communication kernels against compute (:mod:`.comm`), cross-rank skew (:mod:`.skew`), device
regions of instrumented launches (:mod:`.device`).
It works on a store's DuckDB connection but imports nothing of the store package (it is upstream of it): the
caller hands it anything with ``connect(write=...)`` and ``rows(...)``.
"""

from argus_lab.join.attribution import LEVEL_UNITS, JoinSummary, JoinTarget, attribute_request, joined_runs
from argus_lab.model.vocabulary import CLASS_MEANINGS, CLASSES
from argus_lab.plan.catalog import NON_ADDITIVE

__all__ = [
    "CLASSES",
    "CLASS_MEANINGS",
    "LEVEL_UNITS",
    "NON_ADDITIVE",
    "JoinSummary",
    "JoinTarget",
    "attribute_request",
    "joined_runs",
]
