"""Fault-suite workload: one repetition is a 0.15 s region ``step`` (time for a test to signal the processes).

With ``ARGUS_TEST_PIDFILE`` set, it writes its process id there (so a test can kill the child that runs it).
"""

import os
import time

import argus_lab

if os.environ.get("ARGUS_TEST_PIDFILE"):  # written whole, then renamed: a reader never sees it empty
    with open(os.environ["ARGUS_TEST_PIDFILE"] + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.replace(os.environ["ARGUS_TEST_PIDFILE"] + ".tmp", os.environ["ARGUS_TEST_PIDFILE"])
with argus_lab.region("step"):
    time.sleep(0.15)
