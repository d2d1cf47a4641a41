"""What the JupyterLab browser tests share: a Jupyter configuration that loads the freshly built extension, the
headless chromium flags, and the few user gestures (run a cell, open the panel, wait for a kernel).

Debian's chromium only (``/usr/bin/chromium``, or ``CHROMIUM_PATH``); Playwright never downloads a browser here.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
LABEXTENSION = REPO / "argus_lab" / "labextension"
CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
SHOTS = Path(os.environ.get("ARGUS_SCREENSHOTS", "/tmp/argus-ui"))


def need_browser() -> None:
    """Skip without chromium; fail when the labextension was not built (the panel would silently be missing)."""
    if not Path(CHROMIUM).exists():
        pytest.skip(f"no chromium at {CHROMIUM}: `apt-get install -y chromium` (or set CHROMIUM_PATH)")
    if not (LABEXTENSION / "package.json").exists():
        pytest.fail("the labextension is not built: run `cd extension && jlpm install && jlpm build` first")


def jupyter_env(base: Path) -> dict[str, str]:
    """Environment of a Jupyter server that loads this checkout's extension (built labextension first) and keeps
    its settings, workspaces and runtime files under ``base``; no news, no update check."""
    ext_dir = base / "labextensions"
    ext_dir.mkdir(exist_ok=True)
    link = ext_dir / "argus-lab"
    if not link.exists():
        link.symlink_to(LABEXTENSION)
    config = base / "config"
    config.mkdir(exist_ok=True)
    settings = {
        "ServerApp": {"jpserver_extensions": {"argus_lab": True}},
        "LabApp": {
            "extra_labextensions_path": [str(ext_dir)],
            "news_url": "",
            "check_for_updates_class": "jupyterlab.NeverCheckForUpdate",
        },
    }
    (config / "jupyter_server_config.json").write_text(json.dumps(settings))
    notify = base / "settings" / "@jupyterlab" / "apputils-extension"
    notify.mkdir(parents=True, exist_ok=True)
    (notify / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))
    env = dict(
        os.environ,
        JUPYTER_CONFIG_DIR=str(config),
        JUPYTERLAB_SETTINGS_DIR=str(base / "settings"),
        JUPYTERLAB_WORKSPACES_DIR=str(base / "workspaces"),
        JUPYTER_RUNTIME_DIR=str(base / "runtime"),
        PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH", "")])),
    )
    env.pop("ARGUS_STORE", None)
    return env


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_server(url: str, token: str, proc: Any, log: Path, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail("jupyter lab did not start:\n" + log.read_text(errors="replace")[-3000:])
        time.sleep(0.3)


def api(url: str, token: str, path: str) -> Any:
    """A GET of the server's REST API (as JSON)."""
    sep = "&" if "?" in path else "?"
    with urllib.request.urlopen(f"{url}/{path}{sep}token={token}", timeout=30) as r:
        return json.loads(r.read())


def run_cell(page: Any, index: int, timeout: int = 60_000) -> Any:
    """Select cell ``index`` of the active notebook, run it (Shift+Enter) and wait for its execution count."""
    cell = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell").nth(index)
    for _ in range(3):
        cell.locator(".jp-InputPrompt").click()
        page.wait_for_function(
            "i => document.querySelectorAll('.jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook .jp-Cell')[i]"
            "?.classList.contains('jp-mod-active')",
            arg=index,
        )
        page.keyboard.press("Shift+Enter")
        try:
            cell.locator(".jp-InputPrompt").filter(has_text=re.compile(r"\[\d+\]")).wait_for(timeout=timeout)
            return cell
        except Exception:  # the key press was lost while the notebook was still settling: select and run again
            continue
    pytest.fail(f"cell {index} did not run after three attempts")


def wait_idle(page: Any, timeout: int = 300_000) -> None:
    """Wait until the active notebook has a kernel and it is idle (the status bar says ``| Idle``)."""
    page.wait_for_selector(
        ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=timeout
    )
    page.locator(".jp-StatusBar-TextItem", has_text="(ipykernel) | Idle").first.wait_for(timeout=timeout)


def open_panel(page: Any) -> Any:
    tab = page.locator(".jp-SideBar .lm-TabBar-tab[data-id='argus-lab-panel']")
    if "lm-mod-current" not in (tab.get_attribute("class") or ""):
        tab.click()
    panel = page.locator("#argus-lab-panel")
    panel.wait_for(state="visible")
    return panel


def shot(page: Any, name: str, **kw: Any) -> Path:
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / name
    page.screenshot(path=str(path), **kw)
    return path


@contextmanager
def serve_lab(base: Path, root: Path, env: dict[str, str]) -> Iterator[dict[str, Any]]:
    """A real ``jupyter lab`` rooted at ``root`` (its log in ``base/lab.log``) for the length of the block:
    ``{url, token, root, log}``."""
    token = secrets.token_hex(16)
    port = free_port()
    cmd = [
        sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", f"--IdentityProvider.token={token}",
        f"--ServerApp.port={port}", "--ServerApp.port_retries=0", "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.root_dir={root}",
    ]  # fmt: skip
    log_path = base / "lab.log"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=root)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_for_server(url, token, proc, log_path)
            yield {"url": url, "token": token, "root": root, "log": log_path}
        finally:
            stop(proc, 15)


def stop(proc: Any, timeout: float) -> None:
    """End a server this test started: SIGTERM, then SIGKILL after ``timeout`` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()


@contextmanager
def browser_page(width: int = 1400, height: int = 1000) -> Iterator[Any]:
    """A page of headless chromium; ``page.errors`` collects the page's uncaught errors."""
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        context = browser.new_context(viewport={"width": width, "height": height})
        page = context.new_page()
        page.set_default_timeout(60_000)
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.errors = errors
        try:
            yield page
        finally:
            context.close()
            browser.close()
