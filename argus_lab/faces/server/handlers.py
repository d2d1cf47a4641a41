"""Authenticated REST handlers over the evidence stores under the Jupyter root (read-only).

Every verb carries ``@tornado.web.authenticated``.  Store look-ups run in a worker thread
(``asyncio.to_thread``) so that a store locked by a writing kernel never stalls the server's event loop.
Errors answer with a JSON ``{"message": ...}`` that says how to fix the request.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import shutil
import weakref
from typing import TYPE_CHECKING, Any

import tornado.web
from jupyter_server.base.handlers import APIHandler

from argus_lab.errors import ArgusError, StorePathError
from argus_lab.faces.server.paths import find_stores, notebook_store, resolve_store
from argus_lab.report import browse
from argus_lab.views.escape import bidi_restored, bidi_safe, bidi_safe_json

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

MAX_TEXT = 2000  # longest accepted request parameter


class _Base(APIHandler):
    """Shared plumbing: the server root, store resolution, JSON replies."""

    @property
    def root_dir(self) -> str:
        root = self.settings.get("server_root_dir") or self.settings.get("root_dir") or "."
        return str(root)

    def text_arg(self, name: str, default: str | None = None) -> str | None:
        """A request parameter; a name the panel showed with its bidi controls escaped is looked up as stored."""
        value = self.get_argument(name, default)
        if value is not None and len(value) > MAX_TEXT:
            raise tornado.web.HTTPError(400, reason=f"the parameter {name} is longer than {MAX_TEXT} characters")
        return None if value is None else bidi_restored(value)

    def fail(self, status: int, message: str) -> None:
        self.set_status(status)
        self.finish(json.dumps({"message": bidi_safe(message)}))

    async def answer(self, fn: Callable[..., Any], *args: Any) -> None:
        """Resolve the ``store`` argument, run ``fn(store, *args)`` off the event loop, reply with its JSON."""
        from argus_lab.store import Store

        try:
            path = resolve_store(self.root_dir, self.text_arg("store") or "")
        except StorePathError as exc:
            self.fail(400, str(exc))
            return
        try:
            result = await asyncio.to_thread(fn, Store(path), *args)
        except ArgusError as exc:
            self.fail(409, str(exc))
            return
        if result is None:
            self.fail(404, "nothing of that name in the store; refresh the panel")
            return
        self.finish(json.dumps(bidi_safe_json(result), default=str))  # a U+202E in a name reverses nothing shown


class StoresHandler(_Base):
    """``GET stores[?notebook=PATH]``: the ``*.duckdb`` files under the server root; with a notebook, also the store
    its kernel writes by default (``$ARGUS_STORE`` of the server, else ``argus.duckdb`` in the notebook's folder),
    and the expression that asks a kernel which store it writes (``probe``, evaluated by the panel)."""

    @tornado.web.authenticated
    async def get(self) -> None:
        from argus_lab.app.cell_code import STORE_PROBE

        found = await asyncio.to_thread(find_stores, self.root_dir)
        answer: dict[str, Any] = {
            "root_dir": self.root_dir,
            "stores": [s.to_dict() for s in found],
            "probe": STORE_PROBE,
        }
        notebook = self.text_arg("notebook")
        if notebook:
            answer["notebook_store"] = notebook_store(self.root_dir, notebook).to_dict()
        self.finish(json.dumps(bidi_safe_json(answer)))


class SessionsHandler(_Base):
    """``GET sessions?store=``."""

    @tornado.web.authenticated
    async def get(self) -> None:
        await self.answer(browse.sessions)


class RunsHandler(_Base):
    """``GET runs?store=[&session=]``."""

    @tornado.web.authenticated
    async def get(self) -> None:
        await self.answer(browse.runs, self.text_arg("session"))


class RunHandler(_Base):
    """``GET run?store=&run=``: status, provenance, plan."""

    @tornado.web.authenticated
    async def get(self) -> None:
        run_id = self.text_arg("run")
        if not run_id:
            self.fail(400, "pass `run=<run id>` (the panel lists them)")
            return
        await self.answer(browse.run_detail, run_id)


class RegionsHandler(_Base):
    """``GET regions?store=[&session=]``: region paths with their latest share of time."""

    @tornado.web.authenticated
    async def get(self) -> None:
        await self.answer(browse.regions, self.text_arg("session"))


class RegionHandler(_Base):
    """``GET region?store=&path=[&run=]``: the drill-down of one region path."""

    @tornado.web.authenticated
    async def get(self) -> None:
        path = self.text_arg("path")
        if not path:
            self.fail(400, "pass `path=<region path>`, e.g. `path=decode/layer/attn`")
            return
        await self.answer(browse.region_detail, path, self.text_arg("run") or None)


class SignalsHandler(_Base):
    """``GET signals``: the signal catalog (name, unit, backend, description, needs_gpu)."""

    @tornado.web.authenticated
    def get(self) -> None:
        from argus_lab.app.signals import catalog

        self.finish(json.dumps({"signals": [dataclasses.asdict(s) for s in catalog()]}))


class PlanHandler(_Base):
    """``POST plan`` with ``{"signals", "scope", "repeat", "warmup"}``: the plan and its explanation."""

    @tornado.web.authenticated
    async def post(self) -> None:
        try:
            body: Any = self.get_json_body() or {}
        except tornado.web.HTTPError:
            self.fail(400, "the body is not JSON; send {'signals': 'host.wall', 'scope': '', 'repeat': 5}")
            return
        if not isinstance(body, dict):
            self.fail(400, "the body must be a JSON object such as {'signals': 'host.wall'}")
            return
        signals = body.get("signals", "")
        scope = body.get("scope", "")
        repeat, warmup = body.get("repeat", 5), body.get("warmup", 1)
        if isinstance(signals, list) and all(isinstance(s, str) for s in signals):
            signals = ",".join(signals)
        if not isinstance(signals, str) or not isinstance(scope, str) or len(signals) + len(scope) > MAX_TEXT:
            self.fail(400, "`signals` and `scope` must be short strings, e.g. 'host.wall,host.cpu' and 'step/*'")
            return
        if not (isinstance(repeat, int) and isinstance(warmup, int) and 1 <= repeat <= 10000 and 0 <= warmup <= 1000):
            self.fail(400, "`repeat` must be an integer in 1..10000 and `warmup` in 0..1000")
            return
        from argus_lab.app.measure import explained_plan

        try:
            result = await asyncio.to_thread(explained_plan, signals, scope, repeat, warmup)
        except ArgusError as exc:
            self.fail(400, str(exc))
            return
        self.finish(json.dumps(bidi_safe_json(dataclasses.asdict(result))))


MAX_CELLS = 200
MAX_CELL_TEXT = 1_000_000  # the region cells' sources together


class MeasureCodeHandler(_Base):
    """``POST measure-code`` with ``{"signals", "scope", "repeat", "warmup", "store", "title", "cells": [{"name",
    "body"}]}``: the ``%%argus`` line and the code that measures the region cells in the notebook's kernel, both
    from :mod:`argus_lab.app.cell_code` (the extension writes no Python of its own)."""

    @tornado.web.authenticated
    async def post(self) -> None:
        try:
            body: Any = self.get_json_body() or {}
        except tornado.web.HTTPError:
            self.fail(400, "the body is not JSON; send {'signals': 'host.wall', 'cells': [{'name': 'a', 'body': ''}]}")
            return
        if not isinstance(body, dict):
            self.fail(400, "the body must be a JSON object such as {'signals': 'host.wall', 'cells': [...]}")
            return
        texts = {k: body.get(k, "") for k in ("signals", "scope", "store", "title", "notebook")}
        repeat, warmup = body.get("repeat", 3), body.get("warmup", 1)
        cells = body.get("cells", [])
        if not all(isinstance(v, str) and len(v) <= MAX_TEXT for v in texts.values()):
            self.fail(
                400,
                f"`signals`, `scope`, `store`, `title` and `notebook` must be strings of at most {MAX_TEXT} characters",
            )
            return
        if not (isinstance(repeat, int) and isinstance(warmup, int) and 1 <= repeat <= 10000 and 0 <= warmup <= 1000):
            self.fail(400, "`repeat` must be an integer in 1..10000 and `warmup` in 0..1000")
            return
        if not (
            isinstance(cells, list)
            and len(cells) <= MAX_CELLS
            and all(
                isinstance(c, dict)
                and isinstance(c.get("name"), str)
                and isinstance(c.get("body"), str)
                and isinstance(c.get("id", ""), str)
                and len(c.get("id", "")) <= 200
                and (isinstance(c.get("index", 0), int) and not isinstance(c.get("index", 0), bool))
                for c in cells
            )
            and sum(len(c["name"]) + len(c["body"]) for c in cells) <= MAX_CELL_TEXT
        ):
            self.fail(400, f"`cells` must be a list of at most {MAX_CELLS} {{'name': str, 'body': str}} objects")
            return
        from argus_lab.app.cell_code import RegionCell, measure_code

        picked = [RegionCell(c["name"], c["body"], c.get("id", ""), c.get("index")) for c in cells]
        store = texts["store"] or None
        try:
            result = await asyncio.to_thread(
                measure_code, picked, texts["signals"], texts["scope"], repeat, warmup, store, texts["title"],
                texts["notebook"],
            )  # fmt: skip
        except ArgusError as exc:
            self.fail(400, str(exc))
            return
        self.finish(json.dumps(bidi_safe_json(dataclasses.asdict(result))))


CONTENT_TYPES = {"perfetto": "application/json", "html": "text/html; charset=utf-8", "parquet": "application/zip"}
"""The HTTP content type of each export format's download (its suffix: ``app.exporting.DOWNLOAD_SUFFIX``)."""


class ExportHandler(_Base):
    """``GET export?store=&run=[&run=...][&format=perfetto|html|parquet]``: runs exported by
    :func:`argus_lab.app.exporting.export` (default: a Perfetto trace), sent as a file to download (Parquet as a
    zip of one file per table)."""

    @tornado.web.authenticated
    async def get(self) -> None:
        from argus_lab.app.exporting import DOWNLOAD_SUFFIX, export_download
        from argus_lab.store import Store

        fmt = self.text_arg("format") or "perfetto"
        if fmt not in CONTENT_TYPES:
            self.fail(400, f"unknown export format {fmt!r}; use format=perfetto, html or parquet")
            return
        runs = [bidi_restored(r) for r in self.get_arguments("run") if r]
        if not runs or any(len(r) > MAX_TEXT for r in runs):
            self.fail(400, "pass `run=<run id>` (repeatable; the panel lists the runs)")
            return
        try:
            path = resolve_store(self.root_dir, self.text_arg("store") or "")
        except StorePathError as exc:
            self.fail(400, str(exc))
            return
        if _EXPORTS.waiting >= EXPORTS_WAITING:
            self.fail(503, f"{_EXPORTS.waiting} exports are waiting for the one under way; try again when it ends")
            return
        try:
            async with _EXPORTS.slot():  # one export at a time: each reads its store with DuckDB's memory for reads
                download = await asyncio.to_thread(export_download, Store(path), runs, fmt)
        except ArgusError as exc:
            self.fail(409, str(exc))
            return
        except Exception as exc:  # a failure no message was written for: still one, never a bare 500
            self.log.exception("argus-lab export of %s from %s failed", runs, path)
            self.fail(
                500,
                f"the export failed: {type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}; "
                f"export from a terminal to see the whole error (`argus-lab export --store {path} --run "
                f"{runs[0]} out.{DOWNLOAD_SUFFIX[fmt]}`) and report it",
            )
            return
        try:
            name = f"argus-{runs[0] if len(runs) == 1 else f'{len(runs)}-runs'}.{DOWNLOAD_SUFFIX[fmt]}"
            self.set_header("Content-Type", CONTENT_TYPES[fmt])
            self.set_header("Content-Disposition", f'attachment; filename="{name}"')
            with download.path.open("rb") as f:
                while chunk := f.read(1 << 20):
                    self.write(chunk)
                    await self.flush()
            self.finish()
        finally:
            await asyncio.to_thread(shutil.rmtree, download.folder, True)


EXPORTS_AT_ONCE = 1
"""Panel exports that run at once in this server; the others wait their turn (three at once of a store of 10^6
instances ran out of DuckDB's memory for reads together)."""
EXPORTS_WAITING = 8
"""Exports that may wait for their turn; one more is answered 503 with a message instead of queueing forever."""


class _ExportQueue:
    """The server's turn-taking of exports: :meth:`slot` waits for one of :data:`EXPORTS_AT_ONCE` slots."""

    def __init__(self) -> None:
        self.waiting = 0
        self._slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()  # (a semaphore belongs to one event loop; a test server has its own)
        sem = self._slots.setdefault(loop, asyncio.Semaphore(EXPORTS_AT_ONCE))
        self.waiting += 1
        try:
            await sem.acquire()
        finally:
            self.waiting -= 1
        try:
            yield
        finally:
            sem.release()


_EXPORTS = _ExportQueue()


HANDLERS: tuple[tuple[str, type[APIHandler]], ...] = (
    ("stores", StoresHandler),
    ("sessions", SessionsHandler),
    ("runs", RunsHandler),
    ("run", RunHandler),
    ("regions", RegionsHandler),
    ("region", RegionHandler),
    ("signals", SignalsHandler),
    ("plan", PlanHandler),
    ("measure-code", MeasureCodeHandler),
    ("export", ExportHandler),
)
