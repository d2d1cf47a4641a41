"""Backend settings are checked when a run is planned, not when it starts: a value a backend does not take stops
the plan with the setting, the values it takes and the fix (the backend checks again when it starts, with the same
words, for a run spec that did not come from a plan)."""

from __future__ import annotations

import dataclasses

import pytest

import argus_lab
from argus_lab.errors import BackendUnavailableError, PlanError
from argus_lab.plan.backends import SETTING_CHOICES, setting_problem
from argus_lab.plan.model import PlannedRun


def test_a_planned_run_with_a_setting_its_backend_does_not_take_is_refused_at_plan_time() -> None:
    plan = argus_lab.plan("host.wall,gpu.time")
    run = next(r for r in plan.runs if "cupti" in r.backends)
    with pytest.raises(PlanError, match=r"launch_identity must be 'clock', 'probes' or 'callbacks', got 'kernels'"):
        dataclasses.replace(run, settings={**run.settings, "cupti": {"launch_identity": "kernels"}})
    ok = dataclasses.replace(run, settings={**run.settings, "cupti": {"launch_identity": "probes"}})
    assert ok.settings["cupti"]["launch_identity"] == "probes"


def test_every_choice_is_accepted_and_free_settings_are_left_to_their_backend() -> None:
    for backend, names in SETTING_CHOICES.items():
        for name, choices in names.items():
            assert all(setting_problem(backend, name, c) is None for c in choices)
            assert setting_problem(backend, name, "not-a-choice") is not None
    assert setting_problem("cupti", "buffer_bytes", 1 << 20) is None
    assert setting_problem("nvml", "interval_s", 0.01) is None
    run = PlannedRun(0, ("host",), ("host.wall",), 1, 0, "", settings={"cupti": {"native_callback": "empty"}})
    assert run.settings["cupti"]["native_callback"] == "empty"


def test_the_backend_says_the_same_when_a_run_spec_skipped_the_plan() -> None:
    from argus_lab.backends.cupti import native

    with pytest.raises(BackendUnavailableError, match=r"native_callback must be 'record' or 'empty' \(benchmarks\)"):
        native.choose(object(), {"native_callback": "loud"}, [], "")
    assert setting_problem("cupti", "native_callback", "loud") == (
        "the cupti setting native_callback must be 'record' or 'empty' (benchmarks), got 'loud'"
    )
