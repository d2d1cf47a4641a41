"""Test workload: its process is killed (SIGKILL) during the third repetition."""

import os
import signal

import argus_lab
from argus_lab.regions import active_recorder

rec = active_recorder()
with argus_lab.region("work"):
    if rec is not None and rec.repetition == 2:
        os.kill(os.getpid(), signal.SIGKILL)
