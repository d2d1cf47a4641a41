"""Running a plan: in-process and child-process runs, workloads, shards, the machine, cross-rank clock sync.

Everything here may run inside a measured process, so it stays light (no polars, plotly, ipywidgets or DuckDB).
It imports nothing downstream: backends are loaded by the module their declaration names
(:mod:`argus_lab.run.loader`), and evidence and run records go to a :class:`~argus_lab.run.sink.Sink` that the
store side implements.  The join runs where the runs end, called by whoever drives the plan
(:mod:`argus_lab.app.measure`).
"""
