"""Exported traces opened by Perfetto's own trace processor (PyPI ``perfetto`` driving ``trace_processor_shell``).

The processor's binary is not on PyPI (the library downloads it on first use, and neither this machine nor CI has
network); ``scripts/build-trace-processor`` builds it from Perfetto's source (Debian's build tools, SQLite from
npm).  With ``ARGUS_TRACE_PROCESSOR`` pointing at that binary, ``test_perfetto_reads_the_export`` loads every case's
export into the real processor.  ``scripts/perfetto_record.py`` kept what the processor reported in
``tests/data/perfetto/processor_facts.json``; without the binary, the tests below check that report (no import
problem; every flow from the launching call to its GPU record) and that a fresh export still reads, under the replay
of the importer's rules, exactly as the processor read the recorded one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from perfetto_facts import BROKEN_TRACE, CASES_BUILT, FACTS_FILE, SPILLED, UNBOUND, from_file, read_in_processor

SHELL = os.environ.get("ARGUS_TRACE_PROCESSOR", "")
WITH_KERNELS = ("nested", "two_streams", "backward", "two_runs", "ddp_pdl", "kineto_gpt2", "nsys_regions",
                "zero_length", "nan_samples")  # fmt: skip


def _recorded() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(FACTS_FILE.read_text())
    return doc


def test_the_recording_covers_every_case() -> None:
    doc = _recorded()
    assert set(doc["cases"]) == set(CASES_BUILT)
    assert doc["trace_processor"].startswith("Perfetto v")


@pytest.mark.parametrize("case", sorted(CASES_BUILT))
def test_the_processor_read_the_recorded_export_without_a_problem(case: str) -> None:
    facts = _recorded()["cases"][case]
    assert facts["problems"] == []  # no import error, no data loss
    assert facts["flows"] == facts["flows_launch_to_record"]  # every arrow: launching call -> its GPU record
    if case in WITH_KERNELS:
        assert facts["flows"] > 0 and sum(n for _, n in facts["classes"]) > 0
        assert all(cls in ("exact", "temporal", "ambiguous", "unattributed") for cls, _ in facts["classes"])


def test_the_processor_reported_the_problems_of_a_broken_trace() -> None:
    """The problem query is not blind: on a SYNTHETIC trace with a partial overlap and a flow outside any slice the
    processor reported both, and the replay names the same problems."""
    broken = _recorded()["broken"]
    assert [p[0] for p in broken["problems"]] == [UNBOUND, SPILLED]
    assert from_file(BROKEN_TRACE) == broken


@pytest.mark.parametrize("case", sorted(CASES_BUILT))
def test_a_fresh_export_reads_as_the_processor_read_it(case: str, tmp_path: Path) -> None:
    """Every slice on the same track with the same total ns, the same flows bound to the same slices, the same
    counter tracks and classes: what the replay of the importer's rules makes of today's export is what the real
    processor made of the recorded one."""
    out = CASES_BUILT[case](tmp_path)
    assert from_file(json.loads(out.read_text())) == _recorded()["cases"][case]


def test_the_facts_see_a_change_of_track_or_time(tmp_path: Path) -> None:
    """The comparison above fails when a slice moves to another track or by one nanosecond."""
    doc = json.loads(CASES_BUILT["zero_length"](tmp_path).read_text())
    before = from_file(doc)
    kernel = next(e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] == "kernel")
    kernel["ts"] = round(kernel["ts"] + 0.001, 3)
    assert from_file(doc)["tracks"] != before["tracks"]
    kernel["tid"] += 1
    assert from_file(doc) != before


@pytest.mark.parametrize("case", sorted(CASES_BUILT))
def test_perfetto_reads_the_export(case: str, tmp_path: Path) -> None:
    if not SHELL:
        pytest.skip("set ARGUS_TRACE_PROCESSOR to a trace_processor_shell (scripts/build-trace-processor builds one)")
    out = CASES_BUILT[case](tmp_path)
    facts = read_in_processor(SHELL, out)
    assert facts["problems"] == []
    assert facts == from_file(json.loads(out.read_text()))


def test_perfetto_reports_a_broken_trace(tmp_path: Path) -> None:
    if not SHELL:
        pytest.skip("set ARGUS_TRACE_PROCESSOR to a trace_processor_shell (scripts/build-trace-processor builds one)")
    path = tmp_path / "broken.json"
    path.write_text(json.dumps(BROKEN_TRACE))
    facts = read_in_processor(SHELL, path)
    assert [p[0] for p in facts["problems"]] == [UNBOUND, SPILLED]
    assert facts == from_file(BROKEN_TRACE)
