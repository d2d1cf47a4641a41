"""The panel's exports and names under faults, against a real Jupyter server: exports asked for at once take turns
(three at once shared DuckDB's memory for reads and all failed), one past those allowed to wait is refused with a
message, an export that fails where no message was written
for still answers with one, and a bidi control in a name (U+202E) reaches the panel as a visible escape."""

from __future__ import annotations

import asyncio
import json
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
import tornado.httpclient

import argus_lab

pytestmark = pytest.mark.filterwarnings(r"ignore:Extension endpoints without[\s\S]*GET of TermSocket registered")


@pytest.fixture
def jp_server_config() -> dict[str, Any]:
    return {"ServerApp": {"jpserver_extensions": {"argus_lab": True}, "allow_unauthenticated_access": False}}


def _measured(path: Path, iterations: int, name: str = "step") -> str:
    outer, inner = argus_lab.region(name), argus_lab.region("inner")

    def work() -> None:
        for _ in range(iterations):
            with outer, inner:
                pass

    argus_lab.measure(work, signals="host.wall,host.cpu", repeat=1, warmup=0, store=str(path))
    return str(argus_lab.Report(argus_lab.open_store(str(path))).run_ids[0])


async def _answer(jp_fetch: Any, endpoint: str, **params: str) -> tuple[int, bytes]:
    try:
        response = await jp_fetch("argus-lab", endpoint, params=params, request_timeout=600)  # (queued ones wait)
    except tornado.httpclient.HTTPClientError as exc:
        return exc.code, exc.response.body if exc.response is not None else b""
    return response.code, response.body


async def test_exports_asked_for_at_once_take_turns(
    jp_fetch: Any, jp_root_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 10^5 instances under a 64 MB read limit: one export fits, three reading at once do not (measured: all three
    # ran out of DuckDB's memory, which the readers of one file in one process share)
    run = _measured(jp_root_dir / "big.duckdb", 50_000)
    monkeypatch.setenv("ARGUS_READ_MEMORY", "64MB")
    answers = await asyncio.gather(
        *(_answer(jp_fetch, "export", store="big.duckdb", run=run, format="html") for _ in range(3))
    )
    for code, body in answers:
        assert code == 200, body[:2000]
        assert b"</html>" in body[-200:]


async def test_an_export_past_the_ones_allowed_to_wait_is_refused_with_a_message(
    jp_fetch: Any, jp_root_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from argus_lab.app import exporting
    from argus_lab.faces.server import handlers

    run = _measured(jp_root_dir / "s.duckdb", 2)
    release, real = threading.Event(), exporting.export_download

    def held(*args: Any, **kwargs: Any) -> Any:  # the export under way lasts until the test lets it go
        release.wait(120)
        return real(*args, **kwargs)

    monkeypatch.setattr(exporting, "export_download", held)
    monkeypatch.setattr(handlers, "EXPORTS_WAITING", 1)

    def ask() -> asyncio.Future[tuple[int, bytes]]:
        return asyncio.ensure_future(_answer(jp_fetch, "export", store="s.duckdb", run=run, format="html"))

    try:
        queued = [ask(), ask()]  # one exporting, one waiting its turn
        for _ in range(600):
            if handlers._EXPORTS.waiting == 1:
                break
            await asyncio.sleep(0.05)
        assert handlers._EXPORTS.waiting == 1
        third = ask()
        done, _ = await asyncio.wait({third}, timeout=30)
        assert done, "the export past the waiting one was queued instead of refused"
        code, body = third.result()
    finally:
        release.set()
    assert code == 503, body[:2000]
    assert json.loads(body)["message"] == "1 exports are waiting for the one under way; try again when it ends"
    for answer in await asyncio.gather(*queued):
        assert answer[0] == 200 and b"</html>" in answer[1][-200:]


async def test_an_export_failure_without_a_message_of_its_own_still_answers_one(
    jp_fetch: Any, jp_root_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = _measured(jp_root_dir / "s.duckdb", 2)
    monkeypatch.setattr(tempfile, "tempdir", str(jp_root_dir / "no-such-temp-folder"))  # a temp folder gone
    code, body = await _answer(jp_fetch, "export", store="s.duckdb", run=run, format="perfetto")
    assert code == 500
    message = json.loads(body)["message"]
    assert "the export failed: FileNotFoundError" in message and "argus-lab export --store" in message


async def test_a_bidi_control_in_a_name_reaches_the_panel_escaped(jp_fetch: Any, jp_root_dir: Path) -> None:
    _measured(jp_root_dir / "s.duckdb", 2, name="st\u202eep")
    code, body = await _answer(jp_fetch, "regions", store="s.duckdb")
    assert code == 200
    assert "\u202e" not in json.dumps(json.loads(body), ensure_ascii=False)  # not one reversing character
    paths = [r["path"] for r in json.loads(body)]
    assert "st\\u202eep/inner" in paths, paths
    code, body = await _answer(jp_fetch, "region", store="s.duckdb", path="st\\u202eep/inner")  # as shown
    assert code == 200, body[:1000]
    assert json.loads(body)["path"] == "st\\u202eep/inner"
