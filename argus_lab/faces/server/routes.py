"""URL routes of the server extension: ``<base_url>/argus-lab/<endpoint>``."""

from __future__ import annotations

from typing import Any

from jupyter_server.utils import url_path_join

from argus_lab.faces.server.handlers import HANDLERS

PREFIX = "argus-lab"


def setup_handlers(web_app: Any) -> None:
    """Add the argus_lab REST handlers to a Jupyter server's tornado application."""
    base_url = web_app.settings["base_url"]
    web_app.add_handlers(".*$", [(url_path_join(base_url, PREFIX, name), cls) for name, cls in HANDLERS])
