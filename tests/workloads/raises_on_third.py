"""Test workload: raises during its third repetition, after entering a region."""

import argus_lab
from argus_lab.regions import active_recorder

rec = active_recorder()
with argus_lab.region("work"):
    if rec is not None and rec.repetition == 2:
        raise RuntimeError("boom in repetition 2")
