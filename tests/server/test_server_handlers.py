"""The server extension's REST handlers, against a real Jupyter server (pytest-jupyter) and real stores.

The store is written by a real host-clock measurement; one test adds GPU-shaped raw evidence (kernels, an ncu
counter, compiler facts), labelled synthetic and joined, to exercise the drill-down columns on a machine without a
GPU; tests/test_panel_equals_report.py checks the drill-down against the Report on evidence recorded on the H200.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import tornado.httpclient

import argus_lab
from argus_lab import join
from argus_lab.report import Report
from argus_lab.store import Store

# jupyter_server_terminals' websocket handler warns at every server start; the argus handlers are checked by
# test_every_verb_is_authenticated with the same rule the server applies.
pytestmark = pytest.mark.filterwarnings(r"ignore:Extension endpoints without[\s\S]*GET of TermSocket registered")


@pytest.fixture(scope="module")
def measured_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with one real host-clock measurement of step -> attn, mlp."""
    path = tmp_path_factory.mktemp("measured") / "argus.duckdb"

    @argus_lab.region("step")
    def step() -> None:
        with argus_lab.region("attn"):
            time.sleep(0.003)
        with argus_lab.region("mlp"):
            time.sleep(0.001)

    argus_lab.measure(step, signals="host.wall,host.cpu", repeat=3, warmup=1, store=str(path))
    return path


@pytest.fixture
def jp_server_config() -> dict[str, Any]:
    return {"ServerApp": {"jpserver_extensions": {"argus_lab": True}, "allow_unauthenticated_access": False}}


@pytest.fixture
def root_store(jp_root_dir: Path, measured_store: Path) -> str:
    """The measured store copied into the server root, as its root-relative path."""
    sub = jp_root_dir / "work"
    sub.mkdir()
    shutil.copy(measured_store, sub / "argus.duckdb")
    return "work/argus.duckdb"


async def get(jp_fetch: Any, endpoint: str, **params: str) -> Any:
    response = await jp_fetch("argus-lab", endpoint, params=params)
    assert response.code == 200
    return json.loads(response.body)


async def error(jp_fetch: Any, endpoint: str, **params: str) -> tuple[int, str]:
    with pytest.raises(tornado.httpclient.HTTPClientError) as info:
        await jp_fetch("argus-lab", endpoint, params=params)
    body = info.value.response.body if info.value.response is not None else b"{}"
    return info.value.code, json.loads(body or b"{}").get("message", "")


async def test_stores_lists_store_files_under_root(jp_fetch: Any, root_store: str, jp_root_dir: Path) -> None:
    (jp_root_dir / ".hidden").mkdir()
    shutil.copy(jp_root_dir / root_store, jp_root_dir / ".hidden" / "x.duckdb")
    data = await get(jp_fetch, "stores")
    assert [s["path"] for s in data["stores"]] == [root_store]
    assert data["stores"][0]["size"] > 0


async def test_sessions_runs_and_run_detail(jp_fetch: Any, root_store: str) -> None:
    sessions = await get(jp_fetch, "sessions", store=root_store)
    assert len(sessions) == 1
    assert sessions[0]["runs"] == 1
    runs = await get(jp_fetch, "runs", store=root_store, session=sessions[0]["session_id"])
    assert [(r["status"], r["backends"]) for r in runs] == [("ok", ["host"])]
    assert "host.wall" in runs[0]["signals"]
    detail = await get(jp_fetch, "run", store=root_store, run=runs[0]["run_id"])
    assert detail["run"]["reps_done"] == 4
    assert detail["run"]["versions"]["argus_lab"]
    provenance = {p["backend"]: p for p in detail["provenance"]}
    assert provenance["host"]["clocks"]["host_clock"] == "CLOCK_REALTIME"
    assert provenance["host"]["timestamps"] == "measured"
    assert "plan: 1 run(s)" in detail["plan"]["text"]
    assert [r["run_id"] for r in detail["plan_runs"]] == [runs[0]["run_id"]]
    assert await get(jp_fetch, "runs", store=root_store, session="no-such-session") == []


async def test_regions_have_share_of_time(jp_fetch: Any, root_store: str) -> None:
    regions = {r["path"]: r for r in await get(jp_fetch, "regions", store=root_store)}
    assert set(regions) == {"step", "step/attn", "step/mlp"}
    assert regions["step"]["share"] == pytest.approx(1.0)
    attn, mlp = regions["step/attn"], regions["step/mlp"]
    assert attn["share_signal"] == "host.wall"
    # attn sleeps 3 ms and mlp 1 ms inside a step of about 4 ms
    assert 0.5 < attn["share"] < 0.95
    assert 0.1 < mlp["share"] < 0.45
    assert attn["share"] > mlp["share"]
    # the count is the latest run's measured instances, as its report says; warm-up apart; every run's beside it
    assert (attn["instances"], attn["warmup"], attn["all_instances"]) == (3, 1, 4)
    assert attn["median"] == pytest.approx(attn["mean"], rel=0.5) and attn["median"] >= 3e6


async def test_regions_carry_quartiles_and_the_share_of_their_parent(jp_fetch: Any, root_store: str) -> None:
    regions = {r["path"]: r for r in await get(jp_fetch, "regions", store=root_store)}
    step, attn = regions["step"], regions["step/attn"]
    assert step["parent"] is None and step["parent_share"] is None  # a top-level region has no parent
    assert attn["parent"] == "step"
    # step is the only top-level region: attn's share of its parent equals its share of the run
    assert attn["parent_share"] == pytest.approx(attn["share"])
    assert attn["p25"] <= attn["median"] <= attn["p75"]


async def test_runs_are_titled_by_what_they_measured(jp_fetch: Any, root_store: str) -> None:
    runs = await get(jp_fetch, "runs", store=root_store)
    # the fixture measured the function step() of this test module
    assert runs[0]["title"] == f"step() in {__name__}"
    assert runs[0]["workload"].endswith(":measured_store.<locals>.step")
    detail = await get(jp_fetch, "run", store=root_store, run=runs[0]["run_id"])
    assert detail["run"]["title"] == runs[0]["title"]


def test_run_title_names_a_script_relative_to_the_project_and_a_cell_by_its_label() -> None:
    from argus_lab.report.browse import run_title

    # SYNTHETIC workload texts, as argus_lab.run.workload.Workload.describe writes them
    assert run_title("python /home/u/proj/examples/nested.py --n 3", "/home/u/proj") == "examples/nested.py --n 3"
    assert run_title("python /elsewhere/train.py", "/home/u/proj") == "train.py"
    assert run_title("/home/u/proj/traces/step.json", "/home/u/proj") == "imported traces/step.json"
    assert run_title("cell [5] of quickstart.ipynb", "/home/u/proj") == "cell [5] of quickstart.ipynb"
    assert run_title("__main__:<lambda>") == "a lambda"
    assert run_title("mypkg.bench:step") == "step() in mypkg.bench"
    assert run_title("") == "(workload not recorded)"


async def test_region_drill_down(jp_fetch: Any, root_store: str) -> None:
    detail = await get(jp_fetch, "region", store=root_store, path="step/attn")
    assert detail["path"] == "step/attn"
    assert len(detail["instances"]) == 4
    assert sum(1 for i in detail["instances"] if i["warmup"]) == 1
    assert all(i["values"]["host.wall"] >= 3e6 for i in detail["instances"])
    signals = {s["signal"]: s for s in detail["summary"]}
    assert signals["host.wall"]["n"] == 3
    assert signals["host.wall"]["median"] >= 3e6
    assert detail["kernels"] == []
    code, message = await error(jp_fetch, "region", store=root_store, path="never/ran")
    assert code == 404
    assert "refresh" in message


async def test_region_drill_down_gpu_columns(jp_fetch: Any, root_store: str, jp_root_dir: Path) -> None:
    store = Store(jp_root_dir / root_store)
    measured = store.rows(
        "SELECT run_id, instance_id, instance_index FROM region_instances WHERE path = 'step/attn' AND NOT warmup "
        "ORDER BY instance_index"
    )
    run_id, _, index = measured[0]
    ids = [m[1] for m in measured]
    n = len(ids)
    # SYNTHETIC raw evidence shaped like the GPU backends' (no GPU on the test machine): in every measured instance
    # two launches of one kernel carrying the instance's id, the ncu kernel profiled in the first one with a counter,
    # and the kernel's compiler facts; then the join, as after a real run
    store.write(
        {
            "kernels": {
                "run_id": [run_id] * 2 * n,
                "kind": ["kernel"] * 2 * n,
                "kernel_key": [f"0/1/{7 + k}/0" for k in range(2 * n)],
                "correlation_id": [7 + k for k in range(2 * n)],
                "instance_id": [i for i in ids for _ in (0, 1)],
                "name": ["gemm_kernel"] * 2 * n,
                "start_ns": [1000 * k + off for k in range(n) for off in (100, 400)],
                "end_ns": [1000 * k + off for k in range(n) for off in (300, 500)],
                "registers": [64] * 2 * n,
            },
            "ncu_kernels": {
                "run_id": [run_id],
                "kernel_key": ["ncu-0"],
                "path": ["step/attn"],
                "instance_index": [index],
                "ordinal": [0],
                "name": ["gemm_kernel"],
            },
            "metrics": {
                "run_id": [run_id],
                "kernel_key": ["ncu-0"],
                "signal": ["hw:dram__bytes_read.sum"],
                "value": [1024.0],
                "unit": ["byte"],
                "backend": ["ncu"],
            },
            "kernel_facts": {"run_id": [run_id], "name": ["gemm_kernel"], "source": ["triton"], "registers": [64]},
        }
    )
    # as a GPU run that recorded this evidence would have asked (a value nobody asked for is not shown)
    store.execute(
        "UPDATE runs SET signals = list_concat(signals, ['gpu.*', 'hw:dram__bytes_read.sum', 'compile.*']) "
        "WHERE run_id = ?",
        [run_id],
    )
    join.attribute_request(store, [run_id])
    detail = await get(jp_fetch, "region", store=root_store, path="step/attn", run=run_id)
    assert detail["kernels"][0]["name"] == "gemm_kernel"
    assert detail["kernels"][0]["launches"] == 2 * n
    assert detail["kernels"][0]["total_ns"] == 300 * n
    assert [(c["signal"], c["median"]) for c in detail["counters"]] == [("hw:dram__bytes_read.sum", 1024.0)]
    assert ("triton", "compile.registers", 64.0) in [(f["source"], f["signal"], f["value"]) for f in detail["facts"]]
    signals = {r["signal"]: r for r in detail["summary"]}
    assert signals["gpu.kernels"]["attribution"] == "exact"
    assert {a["class"] for a in detail["attributions"]} == {"exact"}


async def test_plan_preview(jp_fetch: Any) -> None:
    body = json.dumps({"signals": "host.wall,host.cpu", "scope": "step/*", "repeat": 3, "warmup": 1})
    response = await jp_fetch("argus-lab", "plan", method="POST", body=body)
    data = json.loads(response.body)
    assert data["explain"].startswith("plan: 1 run(s)")
    assert data["plan"]["runs"][0]["backends"] == ["host"]
    assert data["plan"]["request"]["repeat"] == 3


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"signals": "host.wal"}, "host.wall"),  # the closest known name
        ({"signals": "host.wall", "scope": "instances=x:"}, "scope"),
        ({"signals": "host.wall", "repeat": "5; DROP TABLE runs"}, "repeat"),
        ({"signals": 3}, "signals"),
    ],
)
async def test_plan_preview_bad_input(jp_fetch: Any, body: dict[str, Any], needle: str) -> None:
    with pytest.raises(tornado.httpclient.HTTPClientError) as info:
        await jp_fetch("argus-lab", "plan", method="POST", body=json.dumps(body))
    assert info.value.code == 400
    assert info.value.response is not None
    assert needle in json.loads(info.value.response.body)["message"]


async def test_measure_code_comes_from_the_python_function(jp_fetch: Any) -> None:
    """The extension's kernel code and %%argus line are argus_lab.app.cell_code's, served as they are."""
    from argus_lab.app.cell_code import kernel_code, measure_line

    cells = [{"name": "attn", "body": 'print("hi \\"there\\"")'}, {"name": "it's", "body": "y = 1"}]
    req = {"signals": "host.wall", "scope": "a/*", "repeat": 5, "warmup": 0, "store": "/r/x y.duckdb", "title": "t"}
    response = await jp_fetch("argus-lab", "measure-code", method="POST", body=json.dumps({**req, "cells": cells}))
    data = json.loads(response.body)
    assert data["line"] == measure_line("host.wall", "a/*", 5, 0, "/r/x y.duckdb", title="t")
    assert data["line"] == "%%argus -s host.wall --scope 'a/*' -n 5 -w 0 --store '/r/x y.duckdb' --title t"
    pairs = [(c["name"], c["body"]) for c in cells]
    assert data["code"] == kernel_code(pairs, "host.wall", "a/*", 5, 0, "/r/x y.duckdb", "t")
    compile(data["code"], "<kernel code>", "exec")  # valid Python, whatever the cells hold


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"signals": "host.wal", "cells": [{"name": "a", "body": ""}]}, "host.wall"),
        ({"signals": "host.wall", "cells": []}, "%%argus_region NAME"),
        ({"signals": "host.wall", "cells": [{"name": 1}]}, "cells"),
        ({"signals": "host.wall", "store": 7, "cells": [{"name": "a", "body": ""}]}, "store"),
    ],
)
async def test_measure_code_bad_input(jp_fetch: Any, body: dict[str, Any], needle: str) -> None:
    with pytest.raises(tornado.httpclient.HTTPClientError) as info:
        await jp_fetch("argus-lab", "measure-code", method="POST", body=json.dumps(body))
    assert info.value.code == 400
    assert info.value.response is not None
    assert needle in json.loads(info.value.response.body)["message"]


async def test_signals_catalog(jp_fetch: Any) -> None:
    names = {s["name"]: s for s in (await get(jp_fetch, "signals"))["signals"]}
    assert names["host.wall"]["needs_gpu"] is False
    assert names["gpu.time"]["needs_gpu"] is True


@pytest.mark.parametrize("token", ["", "token not-the-token"])
@pytest.mark.parametrize(
    "endpoint", ["stores", "sessions", "runs", "run", "regions", "region", "signals", "plan", "measure-code"]
)
async def test_request_without_token_is_refused(jp_fetch: Any, root_store: str, endpoint: str, token: str) -> None:
    posted = ("plan", "measure-code")
    method, body = ("POST", json.dumps({"signals": "host.wall"})) if endpoint in posted else ("GET", None)
    with pytest.raises(tornado.httpclient.HTTPClientError) as info:
        await jp_fetch(
            "argus-lab",
            endpoint,
            params={"store": root_store, "path": "step", "run": "x"},
            headers={"Authorization": token},
            method=method,
            body=body,
        )
    assert info.value.code == 403


@pytest.mark.parametrize(
    "store",
    [
        "../outside.duckdb",
        "/etc/passwd",
        "work/../../outside.duckdb",
        "work/argus.duckdb\x00.txt",
        "work/notes.txt",
        "link/outside.duckdb",
        "",
    ],
)
async def test_store_paths_outside_root_are_refused(
    jp_fetch: Any, root_store: str, jp_root_dir: Path, store: str
) -> None:
    outside = jp_root_dir.parent / "outside.duckdb"
    shutil.copy(jp_root_dir / root_store, outside)
    (jp_root_dir / "work" / "notes.txt").write_text("not a store")
    (jp_root_dir / "link").symlink_to(jp_root_dir.parent)
    code, message = await error(jp_fetch, "runs", store=store)
    assert code == 400
    assert "store" in message


@pytest.mark.parametrize(
    "hostile",
    [
        "step' OR '1'='1",
        "step/attn'; DROP TABLE runs; --",
        "%",
        "*",
        '" UNION SELECT * FROM meta --',
        "../../../../etc/passwd",
        "\u202estep",
    ],
)
async def test_hostile_query_values_are_harmless(
    jp_fetch: Any, root_store: str, jp_root_dir: Path, hostile: str
) -> None:
    code, _ = await error(jp_fetch, "region", store=root_store, path=hostile)
    assert code == 404
    assert await get(jp_fetch, "runs", store=root_store, session=hostile) == []
    code, _ = await error(jp_fetch, "run", store=root_store, run=hostile)
    assert code == 404
    # nothing was changed: the store still has its one run and its three region paths
    store = Store(jp_root_dir / root_store)
    assert store.rows("SELECT count(*) FROM runs") == [(1,)]
    assert len(await get(jp_fetch, "regions", store=root_store)) == 3


async def test_store_that_is_not_duckdb(jp_fetch: Any, jp_root_dir: Path) -> None:
    (jp_root_dir / "broken.duckdb").write_text("this is not a database")
    code, message = await error(jp_fetch, "runs", store="broken.duckdb")
    assert code == 409
    assert "not a DuckDB evidence store" in message or "broken.duckdb" in message


async def test_too_long_parameter(jp_fetch: Any, root_store: str) -> None:
    code, _ = await error(jp_fetch, "region", store=root_store, path="x" * 5000)
    assert code == 400


def test_every_verb_is_authenticated() -> None:
    """The check Jupyter server runs at start-up (it warns about handlers that skip authentication)."""
    from jupyter_server.serverapp import ServerWebApplication

    from argus_lab.faces.server.handlers import HANDLERS

    missing = [m for name, cls in HANDLERS for m in ServerWebApplication._check_handler_auth(None, name, cls)]  # type: ignore[arg-type]
    assert missing == []
    assert len(HANDLERS) == 10


def test_extension_entry_points() -> None:
    assert argus_lab._jupyter_server_extension_points() == [{"module": "argus_lab"}]
    assert argus_lab._jupyter_labextension_paths() == [{"src": "labextension", "dest": "argus-lab"}]
    config = Path(__file__).parents[2] / "jupyter-config" / "server-config" / "argus_lab.json"
    assert json.loads(config.read_text()) == {"ServerApp": {"jpserver_extensions": {"argus_lab": True}}}


async def test_locked_store_does_not_stall_the_server(jp_fetch: Any, root_store: str, jp_root_dir: Path) -> None:
    """A kernel writing the store holds DuckDB's lock on the file; the read waits in a worker thread (retrying,
    creating no lock file), other requests go on, and the read answers once the writer lets go."""
    writer = subprocess.Popen(
        [sys.executable, "-c", "import duckdb, sys; c = duckdb.connect(sys.argv[1]); print('held', flush=True); "
         "sys.stdin.read(); c.close()", str(jp_root_dir / root_store)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert writer.stdout is not None and writer.stdout.readline().strip() == "held"
        waiting = asyncio.ensure_future(get(jp_fetch, "runs", store=root_store))
        await asyncio.sleep(0.3)
        assert not waiting.done()
        t0 = time.monotonic()
        stores = await get(jp_fetch, "stores")
        assert time.monotonic() - t0 < 2.0
        assert stores["stores"][0]["path"] == root_store
    finally:
        assert writer.stdin is not None
        writer.stdin.close()
        writer.wait(30)
    runs = await asyncio.wait_for(waiting, timeout=10)
    assert len(runs) == 1
    assert sorted(p.name for p in (jp_root_dir / root_store).parent.iterdir()) == ["argus.duckdb"]


async def test_region_drill_down_of_a_two_rank_run_names_each_instances_rank(jp_fetch: Any, jp_root_dir: Path) -> None:
    """The panel's drill-down of the recorded two-H200 store (tests/data/gpu/two_ranks): every instance carries
    its rank, both ranks are there, equally often."""
    src = Path(__file__).resolve().parents[1] / "data" / "gpu" / "two_ranks" / "nccl_overlap_2r.duckdb"
    shutil.copy(src, jp_root_dir / "two.duckdb")
    detail = await get(jp_fetch, "region", store="two.duckdb", path="train")
    ranks = [i["rank"] for i in detail["instances"]]
    assert sorted(set(ranks)) == [0, 1] and ranks.count(0) == ranks.count(1)


async def test_region_drill_down_says_how_values_combine_and_keeps_other_kernel_groups_apart(
    jp_fetch: Any, jp_root_dir: Path
) -> None:
    """The recorded autotuned matmul (tests/data/gpu/issue15/autotune.duckdb, its instance 0 autotuned: 1,274 kernels
    against 1 in the other instances): every summary and counter row says how it combines as the report words it, a
    launch attribute carries its range over the kernels, the kernels carry their ncu counters, and the kernels of the
    instance of another kernel sequence are marked apart from the main group's, with the group's note."""
    src = Path(__file__).resolve().parents[1] / "data" / "gpu" / "issue15" / "autotune.duckdb"
    shutil.copy(src, jp_root_dir / "autotune.duckdb")
    detail = await get(jp_fetch, "region", store="autotune.duckdb", path="matmul")
    combined = {(r["signal"], r["combined"]) for r in detail["summary"]}
    assert ("gpu.time", "sum") in combined and ("compile.registers", "largest per kernel") in combined
    counters = {c["signal"]: c for c in detail["counters"]}
    assert counters["hw:launch__grid_size"]["combined"] == "largest per kernel"
    assert counters["hw:launch__grid_size"]["kernel_range"] == [16.0, 16.0]
    assert (
        counters["hw:dram__bytes_read.sum"]["agg"] == "sum"
        and counters["hw:dram__bytes_read.sum"]["kernel_range"] is None
    )
    main = [k for k in detail["kernels"] if k["main_group"]]
    other = [k for k in detail["kernels"] if not k["main_group"]]
    assert {k["display_name"] for k in main} == {"matmul_kernel"} and all(k["launches"] == 3 for k in main)
    assert sum(k["launches"] for k in other) > 1000  # the autotuning instance's launches, apart
    assert detail["kernels"][: len(main)] == main  # the main group first
    assert all(k["counters"]["hw:dram__bytes_read.sum"] == [1056512.0, "byte"] for k in main)
    notes = [g["note"] for g in detail["groups"] if not g["majority"]]
    assert notes and notes[0].startswith("instance 0: 1,274 kernels")


async def test_regions_name_the_declaring_source_as_the_report_does(jp_fetch: Any, jp_root_dir: Path) -> None:
    """The walkthrough's regions were declared in a notebook cell: `IPython input [3]`, never the raw
    `<ipython-input-3-...>` file name; a script's region is named relative to the folder the run started in."""
    data = Path(__file__).resolve().parents[1] / "data"
    shutil.copy(data / "notebooks" / "gpu_walkthrough_h200.duckdb", jp_root_dir / "gw.duckdb")
    files = {r["path"]: r["file"] for r in await get(jp_fetch, "regions", store="gw.duckdb")}
    assert files["decode/layer/attn"] == "IPython input [3]"
    shutil.copy(data / "gpu" / "issue15" / "autotune.duckdb", jp_root_dir / "at.duckdb")
    files = {r["path"]: r["file"] for r in await get(jp_fetch, "regions", store="at.duckdb")}
    assert files["matmul"] == "autotuned_matmul.py"


async def test_regions_count_the_main_kernel_sequence_group_as_the_report_does(
    jp_fetch: Any, jp_root_dir: Path
) -> None:
    """The autotuned matmul's latest run: 4 measured instances, instance 0 of another kernel sequence; the panel's
    list says 3 instances and their median, as the report's region table (it said 4, the autotuning one pooled in)."""
    src = Path(__file__).resolve().parents[1] / "data" / "gpu" / "issue15" / "autotune.duckdb"
    shutil.copy(src, jp_root_dir / "at.duckdb")
    matmul = next(r for r in await get(jp_fetch, "regions", store="at.duckdb") if r["path"] == "matmul")
    store = Store(jp_root_dir / "at.duckdb")
    report = Report(store, [matmul["share_run"]])
    row = next(r for r in report.regions if r.path == "matmul" and r.signal == matmul["share_signal"])
    assert matmul["instances"] == row.instances == 3
    assert matmul["median"] == pytest.approx(row.median)
