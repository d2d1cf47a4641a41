"""Test workload (SYNTHETIC): region instances of every shape the store keeps per instance: nested paths, a path
entered more often in later repetitions (instance_index counts on), a named thread's instances, an instance that
raised (its error kept), and one path reached from two parents."""

import threading

import argus_lab
from argus_lab.regions import active_recorder

rec = active_recorder()
rep = rec.repetition if rec is not None else 0


def load() -> None:
    for _ in range(2):
        with argus_lab.region("load"), argus_lab.region("read"):
            pass


with argus_lab.region("step"):
    for _ in range(rep + 1):
        with argus_lab.region("inner"), argus_lab.region("leaf"):
            pass
    worker = threading.Thread(target=load, name="loader")
    worker.start()
    worker.join()
    try:
        with argus_lab.region("fails"):
            raise KeyError(rep)
    except KeyError:
        pass
with argus_lab.region("other"), argus_lab.region("leaf"):
    pass
