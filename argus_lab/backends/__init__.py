"""Backend implementations: one subpackage or module per backend, each producing raw evidence only.

``host``, ``cupti/`` (activity tracing; bulk decode of the records), ``ncu/`` (the Nsight Compute launcher and its
report reader), ``compiler/`` (Triton metadata and SASS facts), ``nvml`` and ``pm`` (time samples).  Each module
named by a declaration in :mod:`argus_lab.plan.backends` has a ``make()`` that returns a collector or launcher
(:mod:`argus_lab.run.protocols`); the runtime imports it only when a run uses the backend.  Nothing here attributes
evidence to region instances or aggregates it per instance: that is the join's work (:mod:`argus_lab.join`).
"""
