"""Test workload: checks that script arguments arrive."""

import sys

import argus_lab

with argus_lab.region("args"):
    assert sys.argv[1:] == ["--steps", "3"], sys.argv
