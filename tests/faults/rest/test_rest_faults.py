"""The read-only REST API under faults (issue 16, items 3 and 6): damaged stores answer 4xx with the cause, and no
GET creates a file (not beside the store, not through a planted link), against a real Jupyter server."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import tornado.httpclient

import argus_lab
from argus_lab.store import Store

pytestmark = pytest.mark.filterwarnings(r"ignore:Extension endpoints without[\s\S]*GET of TermSocket registered")


@pytest.fixture
def jp_server_config() -> dict[str, Any]:
    return {"ServerApp": {"jpserver_extensions": {"argus_lab": True}, "allow_unauthenticated_access": False}}


def _measured(path: Path) -> None:
    def step() -> None:
        with argus_lab.region("step"):
            pass

    argus_lab.measure(step, signals="host.wall", repeat=2, warmup=0, store=str(path))


async def _answer(jp_fetch: Any, endpoint: str, **params: str) -> tuple[int, Any]:
    try:
        response = await jp_fetch("argus-lab", endpoint, params=params)
    except tornado.httpclient.HTTPClientError as exc:
        body = exc.response.body if exc.response is not None else b"{}"
        return exc.code, json.loads(body or b"{}")
    return response.code, json.loads(response.body)


@pytest.mark.parametrize("kind", ["empty", "truncated", "overwritten", "schema text"])
async def test_a_damaged_store_answers_4xx_with_the_cause(jp_fetch: Any, jp_root_dir: Path, kind: str) -> None:
    store = jp_root_dir / "bad.duckdb"
    if kind == "empty":
        store.write_bytes(b"")
    else:
        _measured(store)
        data = store.read_bytes()
        if kind == "truncated":
            store.write_bytes(data[: len(data) // 2])
        elif kind == "overwritten":
            store.write_bytes(data[:12288] + b"\xff" * (len(data) - 12288))  # every block after the headers
        else:
            Store(store).execute("UPDATE meta SET value = 'one' WHERE key = 'schema_version'")
    codes = {}
    for endpoint in ("sessions", "runs", "regions"):
        code, body = await _answer(jp_fetch, endpoint, store="bad.duckdb")
        codes[endpoint] = code
        assert code == 200 or 400 <= code < 500, (endpoint, code, body)  # never a 500
        if code != 200:
            message = body.get("message", "")
            assert "bad.duckdb" in message
            assert any(w in message for w in ("is damaged", "empty file (0 bytes)", "unknown schema version")), message
    assert codes["regions"] >= 400  # (a cut-short file may still hold the small tables a listing reads)


async def test_gets_create_no_file_not_even_through_a_planted_link(
    jp_fetch: Any, jp_root_dir: Path, tmp_path: Path
) -> None:
    folder = jp_root_dir / "work"
    folder.mkdir()
    store = folder / "argus.duckdb"
    _measured(store)
    for extra in folder.iterdir():
        if extra.is_file() and extra != store:
            extra.unlink()
        elif extra.is_dir():
            for f in sorted(extra.rglob("*"), reverse=True):
                f.rmdir() if f.is_dir() else f.unlink()
            extra.rmdir()
    outside = tmp_path / "outside-the-root"
    os.symlink(outside, folder / "argus.duckdb.lock")  # dangling, pointing out of the root
    before = sorted(p.name for p in folder.iterdir())
    code, sessions = await _answer(jp_fetch, "sessions", store="work/argus.duckdb")
    assert code == 200
    code, runs = await _answer(jp_fetch, "runs", store="work/argus.duckdb")
    assert code == 200 and len(runs) == 1
    for endpoint, params in (
        ("run", {"run": runs[0]["run_id"]}),
        ("regions", {}),
        ("region", {"path": "step"}),
    ):
        code, _ = await _answer(jp_fetch, endpoint, store="work/argus.duckdb", **params)
        assert code == 200, endpoint
    assert sorted(p.name for p in folder.iterdir()) == before
    assert not outside.exists()
    assert sessions
