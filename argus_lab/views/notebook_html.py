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


def exporter_class() -> type:
    """``ArgusHTMLExporter``: nbconvert's HTML exporter with the ``argus`` template (for the entry point
    ``nbconvert.exporters: argus-html``, so that ``jupyter nbconvert --to argus-html NB.ipynb`` works)."""
    from nbconvert import HTMLExporter
    from traitlets import default

    class ArgusHTMLExporter(HTMLExporter):
        """HTML without CDN scripts (require.js, MathJax, widget manager)."""

        export_from_notebook = "HTML (argus, offline)"

        @default("template_name")
        def _argus_template_name(self) -> str:
            return TEMPLATE

        @default("extra_template_basedirs")
        def _argus_template_dirs(self) -> list[str]:
            return [template_dir()]

    return ArgusHTMLExporter


def __getattr__(name: str) -> Any:
    if name == "ArgusHTMLExporter":  # imported lazily: nbconvert is heavy
        return exporter_class()
    msg = f"module {__name__!r} has no attribute {name!r}"
    raise AttributeError(msg)


def notebook_to_html(notebook: str | Path | Any) -> str:
    """The HTML page of ``notebook`` (a path or an ``nbformat`` node), with its outputs as they are."""
    import nbformat

    read: Any = nbformat.read
    nb = read(str(notebook), as_version=4) if isinstance(notebook, str | Path) else notebook
    exporter = exporter_class()()
    body, _ = exporter.from_notebook_node(nb)
    return str(body)
