"""The scope reaches ncu: the recorder's ``argus-scope`` ranges mark exactly the in-scope instances (issue 15).

ncu replays a kernel when ``--nvtx-include argus-scope@in/`` matches the launching thread's push/pop stack of that
domain: an ``in`` range anywhere on it (Nsight Compute CLI docs, "NVTX Filtering": ``A/`` = a push/pop range
``A``, without ``[``/``]`` anchoring it to the bottom or top of the stack).  These tests drive real region markers
and a real :class:`~argus_lab.regions.Recorder` with an NVTX domain that records the pushes and pops (SYNTHETIC:
no NVTX tool is attached on a machine without a GPU), and apply that rule at each simulated kernel launch.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

import argus_lab.regions as regions_mod
from argus_lab import region
from argus_lab.backends.ncu.launcher import NcuLauncher, check_log, find_ncu, read_scope_state
from argus_lab.errors import WorkloadError
from argus_lab.plan import Request, plan
from argus_lab.plan.scope import Scope
from argus_lab.regions import NVTX_SCOPE_DOMAIN, NVTX_SCOPE_ENV, Recorder
from argus_lab.run.driver import drive
from argus_lab.run.nvtx_scope import STATE_FILE, ScopeGate, gate_from_env
from argus_lab.run.protocols import RunContext
from argus_lab.run.workload import Workload


class _Domain:
    """A recording NVTX domain (SYNTHETIC): per-thread push/pop stacks of messages."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.stacks: dict[int, list[str]] = {}

    def get_event_attributes(self, message: str, payload: int | None = None) -> tuple[str, int | None]:
        return (message, payload)

    def push_range(self, attr: tuple[str, int | None]) -> None:
        self.stacks.setdefault(threading.get_ident(), []).append(attr[0])

    def pop_range(self) -> None:
        self.stacks[threading.get_ident()].pop()

    def stack(self) -> list[str]:
        return list(self.stacks.get(threading.get_ident(), []))


@pytest.fixture
def nvtx_under_ncu() -> Iterator[tuple[_Domain, _Domain]]:
    """The marker's NVTX state as ncu + ARGUS_NVTX_PAYLOAD + ARGUS_NVTX_SCOPE make it (SYNTHETIC domains)."""
    nv = regions_mod._nvtx
    saved = (nv.mode, nv.gated, nv.domain, nv.scope_domain, nv.scope_attrs, nv.pop)
    argus, scope = _Domain("argus"), _Domain("argus-scope")
    nv.mode, nv.gated, nv.domain, nv.scope_domain = 3, True, argus, scope
    nv.scope_attrs = (scope.get_event_attributes("out"), scope.get_event_attributes("in"))
    nv.pop = nv._pop_both
    try:
        yield argus, scope
    finally:
        nv.mode, nv.gated, nv.domain, nv.scope_domain, nv.scope_attrs, nv.pop = saved


def _replayed(scope_domain: _Domain) -> bool:
    """ncu's rule for ``argus-scope@in/``: an ``in`` range anywhere on this thread's stack of that domain."""
    return "in" in scope_domain.stack()


def _workload(scope_domain: _Domain, launches: list[tuple[str, bool]]) -> None:
    def launch(what: str) -> None:
        launches.append((what, _replayed(scope_domain)))

    with region("matmul"):
        launch("matmul")
        with region("epilogue"):
            launch("matmul/epilogue")
    with region("other"):
        launch("other")
    launch("outside")


def test_only_kernels_of_in_scope_measured_instances_are_replayed(nvtx_under_ncu: tuple[_Domain, _Domain]) -> None:
    argus, scope_domain = nvtx_under_ncu
    launches: list[tuple[str, bool]] = []
    # the model is built before the first region and before the recorder starts: never replayed
    launches.append(("build", _replayed(scope_domain)))
    gate = ScopeGate(Scope.parse("matmul; instances=1:"), warmup=1)
    rec = Recorder("r", cpu_clock=False, nvtx_gate=gate)
    with rec:
        for rep in range(4):  # 1 warm-up + 3 measured repetitions
            rec.repetition = rep
            _workload(scope_domain, launches)
    replayed = [(i, what) for i, (what, yes) in enumerate(launches) if yes]
    # repetition r's launches are at 1 + 4 r ...; warm-up (r=0) and measured instance 0 (r=1) are skipped; the
    # nested epilogue is replayed inside an in-scope matmul although its own path is not in the scope
    assert replayed == [
        (9, "matmul"),
        (10, "matmul/epilogue"),
        (13, "matmul"),
        (14, "matmul/epilogue"),
    ]
    assert not any(yes for what, yes in launches if what in ("build", "outside", "other"))
    # every range was popped, in both domains
    assert argus.stack() == [] and scope_domain.stack() == []
    # instance indexes still travel as payloads in the argus domain: the ncu run's instance 2 is the timing run's
    assert [i.instance_index for i in rec.instances() if i.path == "matmul"] == [0, 1, 2, 3]


def test_no_scope_means_every_recorded_instance_and_nothing_outside(nvtx_under_ncu: tuple[_Domain, _Domain]) -> None:
    _, scope_domain = nvtx_under_ncu
    launches: list[tuple[str, bool]] = []
    with region("model_build"):  # a region entered with no recorder active is not an instance: `out`
        launches.append(("before", _replayed(scope_domain)))
    rec = Recorder("r", cpu_clock=False, nvtx_gate=ScopeGate(Scope.parse(""), warmup=0))
    with rec:
        _workload(scope_domain, launches)
    assert launches == [
        ("before", False),
        ("matmul", True),
        ("matmul/epilogue", True),
        ("other", True),
        ("outside", False),
    ]


def test_scope_gate_counts_measured_instances_per_path() -> None:
    gate = ScopeGate(Scope.parse("a; b/c; instances=0,2"), warmup=2, rank=0)
    seen = [gate(path, rep) for rep in range(5) for path in ("a", "b/c", "b")]
    # reps 0-1 are warm-up; measured index 0 (rep 2) and 2 (rep 4) are in scope for a and b/c, never for b
    assert seen == [False] * 6 + [True, True, False] + [False] * 3 + [True, True, False]


def test_scope_gate_ranks_and_threads() -> None:
    assert not ScopeGate(Scope.parse("ranks=1"), rank=0)("a", 0)
    assert ScopeGate(Scope.parse("ranks=1"), rank=1)("a", 0)
    name = threading.current_thread().name
    assert ScopeGate(Scope.parse(f"threads={name}"), rank=0)("a", 0)
    assert not ScopeGate(Scope.parse("threads=elsewhere"), rank=0)("a", 0)


def test_gate_comes_from_the_launcher_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(NVTX_SCOPE_ENV, raising=False)
    assert gate_from_env(1) is None
    monkeypatch.setenv(NVTX_SCOPE_ENV, "matmul; instances=1:")
    gate = gate_from_env(1)
    assert gate is not None and str(gate.scope) == "matmul; instances=1:" and gate.warmup == 1


def test_ncu_command_carries_the_scope_and_the_one_filter(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARGUS_NCU", "/bin/true")
    run = plan(Request.build("hw:dram__bytes_read.sum", "matmul; instances=1:", repeat=3, warmup=1)).runs[0]
    ctx = RunContext("r-1", tuple(run.signals), run.settings["ncu"], tmp_path)
    cmd = NcuLauncher().command(ctx, ["python", "-m", "argus_lab.run.child", "spec.json"])
    assert cmd[:3] == ["env", "ARGUS_NVTX_PAYLOAD=1", "ARGUS_NVTX_SCOPE=matmul; instances=1:"]
    includes = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--nvtx-include"]
    assert includes == ["argus-scope@in/"]
    assert "--nvtx" in cmd


@pytest.fixture
def ncu_child_without_scope_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[_Domain, _Domain]]:
    """The NVTX state of an ncu child whose ``ARGUS_NVTX_SCOPE`` did not arrive (SYNTHETIC recording domains).

    On the H200 the model case's ncu run (no scope, so ``ARGUS_NVTX_SCOPE=`` with an empty value on the command,
    ``--warmup 1``) profiled nothing while the autotune case (a non-empty scope) worked: NVTX was on with payloads,
    but the child opened no ``argus-scope`` range.  Here NVTX is on, the variable is absent, and ``nvtx.get_domain``
    hands out recording domains."""
    nvtx = pytest.importorskip("nvtx")
    monkeypatch.delenv(NVTX_SCOPE_ENV, raising=False)
    nv = regions_mod._nvtx
    saved = (nv.mode, nv.gated, nv.domain, nv.scope_domain, nv.scope_attrs, nv.pop, nv.want_scope)
    argus, scope = _Domain("argus"), _Domain("argus-scope")
    nv.mode, nv.gated, nv.domain, nv.pop, nv.want_scope = 3, False, argus, argus.pop_range, False
    monkeypatch.setattr(nvtx, "get_domain", lambda name=None: scope if name == NVTX_SCOPE_DOMAIN else argus)
    try:
        yield argus, scope
    finally:
        nv.mode, nv.gated, nv.domain, nv.scope_domain, nv.scope_attrs, nv.pop, nv.want_scope = saved


def test_an_ncu_child_takes_its_scope_from_the_spec_not_only_the_environment(
    ncu_child_without_scope_env: tuple[_Domain, _Domain], tmp_path: Any
) -> None:
    argus, scope_domain = ncu_child_without_scope_env
    ncu_run = next(
        r
        for r in plan(Request.build("gpu.time,hw:dram__bytes_read.sum", "", repeat=2, warmup=1)).runs
        if "ncu" in r.backends
    )
    launches: list[tuple[int, str, bool]] = []
    reps = iter(range(3))

    def step() -> None:  # the model case: model built before, one `decode` instance per repetition
        rep = next(reps)
        launches.append((rep, "outside", _replayed(scope_domain)))
        with region("decode"):
            launches.append((rep, "decode", _replayed(scope_domain)))

    out = drive("r-ncu", Workload.of_callable(step), [], list(ncu_run.signals), ncu_run.settings, 2, 1, tmp_path)
    assert out.status == "ok", out.cause
    # warm-up repetition 0 is `out`; both measured instances are replayed; nothing outside the region
    assert [(rep, what) for rep, what, yes in launches if yes] == [(1, "decode"), (2, "decode")]
    assert argus.stack() == [] and scope_domain.stack() == []
    state = json.loads((tmp_path / STATE_FILE).read_text())
    assert state["scope_from"] == "run settings" and state["scope_ranges"] is True
    assert (state["opened_in"], state["opened_out"], state["warmup"]) == (2, 1, 1)
    assert state["nvtx"].startswith("on")


def test_the_ncu_command_never_sets_the_scope_to_an_empty_value(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARGUS_NCU", "/bin/true")
    run = plan(Request.build("hw:dram__bytes_read.sum", "", repeat=2, warmup=1)).runs[0]
    ctx = RunContext("r-1", tuple(run.signals), run.settings["ncu"], tmp_path)
    cmd = NcuLauncher().command(ctx, ["python", "-m", "argus_lab.run.child", "spec.json"])
    env = [a for a in cmd[: cmd.index(find_ncu())] if "=" in a]
    assert f"{NVTX_SCOPE_ENV}=**" in env and not any(a.endswith("=") for a in env)
    gate = ScopeGate(Scope.parse("**"), warmup=1)
    # `**` covers every region path, nested ones too, like an empty scope
    assert [gate(p, r) for r in (0, 1) for p in ("decode", "decode/attn")] == [False, False, True, True]


def test_an_ncu_run_that_profiled_nothing_says_why(tmp_path: Any) -> None:
    log = "==PROF== Connected to process 1\n==WARNING== No kernels were profiled.\n"  # as on the H200
    missing = tmp_path / "report.ncu-rep"
    cases = [
        (None, "left no record of its NVTX scope ranges"),
        ({"nvtx": "off (no NVTX tool is attached to the process)", "scope_ranges": False}, "pip install nvtx"),
        ({"nvtx": "on", "scope_ranges": False}, "opened no `argus-scope` ranges"),
        ({"nvtx": "on", "scope_ranges": True, "opened_in": 0, "opened_out": 3, "scope": "x"}, "3 out of scope"),
        ({"nvtx": "on", "scope_ranges": True, "opened_in": 2, "opened_out": 1}, "another thread"),
    ]
    for state, words in cases:
        with pytest.raises(WorkloadError, match="ncu profiled no kernel") as err:
            check_log(log, missing, scope_state=state)
        assert words in str(err.value)
    (tmp_path / STATE_FILE).write_text(json.dumps(cases[-1][0]))
    assert read_scope_state(tmp_path) == cases[-1][0]
