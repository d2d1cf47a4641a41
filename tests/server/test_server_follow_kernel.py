"""The server's side of "the panel follows the store of the active notebook's kernel" and of a run's link back to
its cells (issue 12): the store a notebook's kernel writes by default, the expression that asks a kernel, a run's
origin, and the origin the panel's measure-code carries.  Against a real Jupyter server (pytest-jupyter)."""

from __future__ import annotations

import ast
import json
import shlex
import time
from pathlib import Path
from typing import Any

import pytest

import argus_lab
from argus_lab.app.measure import plan, run_plan
from argus_lab.faces.server.paths import notebook_store
from argus_lab.run.workload import Workload

pytestmark = pytest.mark.filterwarnings(r"ignore:Extension endpoints without[\s\S]*GET of TermSocket registered")


@pytest.fixture
def jp_server_config() -> dict[str, Any]:
    return {"ServerApp": {"jpserver_extensions": {"argus_lab": True}, "allow_unauthenticated_access": False}}


async def get(jp_fetch: Any, endpoint: str, **params: str) -> Any:
    response = await jp_fetch("argus-lab", endpoint, params=params)
    assert response.code == 200
    return json.loads(response.body)


def test_notebook_store_is_argus_store_of_the_server_or_the_notebooks_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "root"
    (root / "nb").mkdir(parents=True)
    monkeypatch.delenv("ARGUS_STORE", raising=False)
    default = notebook_store(root, "nb/q.ipynb")
    assert (default.path, default.exists, default.source) == ("nb/argus.duckdb", False, "default")
    monkeypatch.setenv("ARGUS_STORE", str(root / "argus.duckdb"))  # what `make demo` sets: kernels inherit it
    (root / "argus.duckdb").write_bytes(b"")
    demo = notebook_store(root, "nb/q.ipynb")
    assert (demo.path, demo.exists, demo.source) == ("argus.duckdb", True, "ARGUS_STORE")
    monkeypatch.setenv("ARGUS_STORE", "../stores/s.duckdb")  # relative: from the kernel's folder, the notebook's
    assert notebook_store(root, "nb/q.ipynb").path == "stores/s.duckdb"
    monkeypatch.setenv("ARGUS_STORE", str(tmp_path / "elsewhere.duckdb"))
    outside = notebook_store(root, "nb/q.ipynb")
    assert outside.path is None and outside.abs_path == str(tmp_path / "elsewhere.duckdb")


async def test_stores_answers_the_notebook_store_and_the_kernel_probe(
    jp_fetch: Any, jp_root_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from argus_lab.app.cell_code import STORE_PROBE

    monkeypatch.delenv("ARGUS_STORE", raising=False)
    data = await get(jp_fetch, "stores", notebook="notebooks/quickstart.ipynb")
    assert data["probe"] == STORE_PROBE
    assert data["notebook_store"]["path"] == "notebooks/argus.duckdb"
    assert data["notebook_store"]["exists"] is False
    assert not (jp_root_dir / "notebooks").exists()  # asking creates nothing
    assert "notebook_store" not in await get(jp_fetch, "stores")


def test_store_probe_names_the_kernels_store(
    ipython_shell: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The probe is an expression that evaluates, in a shell with the magics, to the store the kernel writes."""
    from argus_lab.app.cell_code import STORE_PROBE

    ip = ipython_shell
    magics = ip.magics_manager.registry["ArgusMagics"]
    saved = magics.store_path
    monkeypatch.chdir(tmp_path)
    try:
        magics.store_path = None
        monkeypatch.setenv("ARGUS_STORE", "env.duckdb")
        assert eval(STORE_PROBE, ip.user_ns)._repr_json_()["store"] == str(tmp_path / "env.duckdb")
        ip.run_line_magic("argus", f"store {tmp_path / 'mine.duckdb'}")
        answer = eval(STORE_PROBE, ip.user_ns)._repr_json_()
        assert answer["store"] == str(tmp_path / "mine.duckdb") and answer["source"] == "%argus store"
    finally:
        magics.store_path = saved


async def test_run_detail_carries_the_cells_it_measured(jp_fetch: Any, jp_root_dir: Path) -> None:
    store = jp_root_dir / "argus.duckdb"
    origin = {"notebook": "nb/q.ipynb", "cells": [{"id": "c-1", "execution_count": 5}]}

    def cell() -> None:
        with argus_lab.region("r"):
            time.sleep(0.001)

    workload = Workload.of_callable(cell)
    workload = Workload("callable", workload.target, func=cell, label="cell [5] of q.ipynb", origin=json.dumps(origin))
    done = run_plan(plan("host.wall", repeat=1, warmup=0), workload, str(store))
    data = await get(jp_fetch, "run", store="argus.duckdb", run=done.execution.run_ids[0])
    assert data["run"]["workload"] == "cell [5] of q.ipynb"
    assert data["run"]["origin"] == origin


async def test_measure_code_carries_the_notebook_and_cell_ids(jp_fetch: Any) -> None:
    body = {
        "signals": "host.wall",
        "notebook": "nb/q.ipynb",
        "cells": [{"name": "attn", "body": "x = 1", "id": "c-7", "index": 2}],
    }
    response = await jp_fetch("argus-lab", "measure-code", method="POST", body=json.dumps(body))
    code = json.loads(response.body)["code"]
    call = ast.parse(code).body[-1].value  # get_ipython().run_cell_magic('argus', OPTIONS, BODY)
    options = shlex.split(ast.literal_eval(call.args[1]))  # type: ignore[attr-defined]
    origin = json.loads(options[options.index("--origin") + 1])
    assert origin == {"notebook": "nb/q.ipynb", "cells": [{"id": "c-7", "name": "attn", "index": 2}]}
