"""A notebook as one HTML page that needs no network: nbconvert's lab template minus its CDN scripts.

``jupyter nbconvert --to html`` loads require.js and MathJax from a CDN and widgets from unpkg; the ``argus``
template (``argus_lab/templates/argus``) leaves those out, so an exported notebook with argus reports and plotly
figures (plotly.js is in the notebook once, see :func:`argus_lab.views.init_notebook`) opens offline.  LaTeX in
Markdown cells is then shown as source text.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

TEMPLATE = "argus"


def template_dir() -> str:
    """The folder that holds the ``argus`` nbconvert template."""
    return str(resources.files("argus_lab").joinpath("templates"))


def notebook_to_html(notebook: str | Path | Any) -> str:
    """The HTML page of ``notebook`` (a path or an ``nbformat`` node), with its outputs as they are."""
    import nbformat
    from nbconvert import HTMLExporter
    from traitlets.config import Config

    nb = nbformat.read(str(notebook), as_version=4) if isinstance(notebook, str | Path) else notebook  # type: ignore[no-untyped-call]
    config = Config()
    config.TemplateExporter.extra_template_basedirs = [template_dir()]
    exporter = HTMLExporter(config=config, template_name=TEMPLATE)  # type: ignore[no-untyped-call]
    body, _ = exporter.from_notebook_node(nb)
    return str(body)
