"""``GET argus-lab/export``: the panel's export button gets the runs as a file (Perfetto trace, HTML, Parquet zip)."""

from __future__ import annotations

import io
import json
import zipfile
from typing import Any

import pytest
import tornado.httpclient
from test_server_handlers import error, get, jp_server_config, measured_store, root_store

__all__ = ["jp_server_config", "measured_store", "root_store"]

pytestmark = pytest.mark.filterwarnings(r"ignore:Extension endpoints without[\s\S]*GET of TermSocket registered")


async def _run_id(jp_fetch: Any, store: str) -> str:
    return str((await get(jp_fetch, "runs", store=store))[0]["run_id"])


async def test_export_perfetto_is_a_trace_of_the_run(jp_fetch: Any, root_store: str) -> None:
    run = await _run_id(jp_fetch, root_store)
    response = await jp_fetch("argus-lab", "export", params={"store": root_store, "run": run})
    assert response.code == 200
    assert response.headers["Content-Disposition"] == f'attachment; filename="argus-{run}.json"'
    trace = json.loads(response.body)
    assert trace["otherData"] == {"argus_run": run}
    slices = [e for e in trace["traceEvents"] if e.get("cat") == "user_annotation"]
    assert sorted({e["name"] for e in slices}) == ["attn", "mlp", "step"]
    assert len(slices) == 12  # 4 repetitions (1 warm-up) of step, attn, mlp


async def test_export_html_and_parquet(jp_fetch: Any, root_store: str) -> None:
    run = await _run_id(jp_fetch, root_store)
    page = await jp_fetch("argus-lab", "export", params={"store": root_store, "run": run, "format": "html"})
    assert page.headers["Content-Type"].startswith("text/html")
    assert b"<html" in page.body[:2000].lower()
    pq = await jp_fetch("argus-lab", "export", params={"store": root_store, "run": run, "format": "parquet"})
    names = set(zipfile.ZipFile(io.BytesIO(pq.body)).namelist())
    assert {"runs.parquet", "region_instances.parquet", "attributions.parquet"} <= names


@pytest.mark.parametrize(
    ("params", "code", "needle"),
    [
        ({"format": "pdf"}, 400, "unknown export format"),
        ({"run": ""}, 400, "run="),
        ({"run": "no-such-run"}, 409, "no run 'no-such-run'"),
        ({"store": "../outside.duckdb"}, 400, "store"),
    ],
)
async def test_export_bad_requests(
    jp_fetch: Any, root_store: str, params: dict[str, str], code: int, needle: str
) -> None:
    run = await _run_id(jp_fetch, root_store)
    got_code, message = await error(jp_fetch, "export", **{"store": root_store, "run": run, **params})
    assert got_code == code
    assert needle in message


async def test_export_without_token_is_refused(jp_fetch: Any, root_store: str) -> None:
    with pytest.raises(tornado.httpclient.HTTPClientError) as info:
        await jp_fetch("argus-lab", "export", params={"store": root_store, "run": "x"}, headers={"Authorization": ""})
    assert info.value.code == 403
