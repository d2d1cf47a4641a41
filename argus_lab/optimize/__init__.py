"""The optimisation loop: measure variants of one region with argus_lab and search them by their evidence.

``argus_lab.optimize`` is this module (loaded on first use)::

    import argus_lab
    opt = argus_lab.optimize
    session = opt.Session(target, "opt.duckdb", budget=opt.Budget(candidates=8))
    ev = session.evaluate({"block_m": 128, "block_n": 256, ...})     # an Evaluation; ev.to_dict() is JSON
    print(session.evaluate_json('{"params": {"block_m": 64, ...}}'))  # JSON in, JSON out (for agents)
    guided = opt.run_search(opt.EvidenceGuided(space, default, opt.RuleContext(space, target.model, spec)),
                            session.evaluate, opt.Budget(candidates=8))

A *target* (:class:`Target`) is one region with its variants: a default candidate, a space of candidates, how to
build and launch one, how to check its output against a reference; see docs/optimize.md (the API, the evidence
JSON, the rule set of the evidence-guided search, and how the benchmark holds both searches to one budget).
"""

from __future__ import annotations

from argus_lab.optimize.candidates import ROLES, Budget, Candidate, OptimizeError, Param, Space
from argus_lab.optimize.evidence import (
    DEVICES,
    SCHEMA,
    STATUSES,
    Compiled,
    DeviceSpec,
    Evaluation,
    Model,
    Occupancy,
    PhaseRow,
    Phases,
    Roofline,
    StaticFacts,
    Timing,
    Work,
    device_spec,
    occupancy,
    phases_from_device,
    phases_of,
    roofline,
)
from argus_lab.optimize.rules import RULES, Proposal, RuleContext, done, propose, prune
from argus_lab.optimize.search import (
    Decision,
    EvidenceGuided,
    Search,
    SearchResult,
    SearchRun,
    Step,
    TimingOnly,
    run_search,
)
from argus_lab.optimize.session import (
    DEFAULT_SIGNALS,
    DEVICE_SIGNALS,
    CandidateError,
    Prepared,
    Session,
    Target,
    Timer,
    history,
    load_evaluation,
)

__all__ = [
    "DEFAULT_SIGNALS",
    "DEVICES",
    "DEVICE_SIGNALS",
    "ROLES",
    "RULES",
    "SCHEMA",
    "STATUSES",
    "Budget",
    "Candidate",
    "CandidateError",
    "Compiled",
    "Decision",
    "DeviceSpec",
    "Evaluation",
    "EvidenceGuided",
    "Model",
    "Occupancy",
    "OptimizeError",
    "Param",
    "PhaseRow",
    "Phases",
    "Prepared",
    "Proposal",
    "Roofline",
    "RuleContext",
    "Search",
    "SearchResult",
    "SearchRun",
    "Session",
    "Space",
    "StaticFacts",
    "Step",
    "Target",
    "Timer",
    "Timing",
    "TimingOnly",
    "Work",
    "device_spec",
    "done",
    "history",
    "load_evaluation",
    "occupancy",
    "phases_from_device",
    "phases_of",
    "propose",
    "prune",
    "roofline",
    "run_search",
]
