"""Fault-suite workload: forks inside a region and the child returns without os._exit (a common mistake)."""

import os

import argus_lab

with argus_lab.region("fork"):
    pid = os.fork()
    if pid:
        os.waitpid(pid, 0)
