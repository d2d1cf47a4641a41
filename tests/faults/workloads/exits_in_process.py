"""Fault-suite workload: the process ends with os._exit in the second repetition (as a crash or kill -9 would)."""

import os

import argus_lab
from argus_lab.regions import active_recorder

rec = active_recorder()
with argus_lab.region("work"):
    if rec is not None and rec.repetition == 1:
        os._exit(3)
