"""HTML forms of a report: the ``text/html`` notebook fallback and the standalone exported page.

Both mount the one renderer, ``argus_lab/static/report-renderer.js`` (``ArgusReport.render(el, bundle,
options)``), over the bundle embedded as ``<script type="application/json">`` (escaped so that no name can close
the script element).  The standalone page inlines plotly.js once (:func:`plotly.offline.get_plotlyjs`) and works
offline without a kernel; the notebook fallback inlines only the renderer and a static summary table, and draws
its timeline when plotly.js is already on the page (JupyterLab with the argus extension, nbconvert exports of a
notebook that showed a plotly figure, or the exported page).
"""

from __future__ import annotations

import functools
import uuid
from importlib import resources
from typing import Any

from argus_lab.views.escape import html_text, json_for_script

RENDERER = "report-renderer.js"


@functools.cache
def renderer_js() -> str:
    """The source of the report renderer (one plain JavaScript file, no build step)."""
    return resources.files("argus_lab").joinpath("static", RENDERER).read_text(encoding="utf-8")


@functools.cache
def renderer_css() -> str:
    """The report's style sheet (shared by every embedding)."""
    return resources.files("argus_lab").joinpath("static", "report.css").read_text(encoding="utf-8")


def _static_summary(bundle: dict[str, Any]) -> str:
    rows = []
    for r in bundle.get("regions", [])[:40]:
        rows.append(
            "<tr>"
            + "".join(
                f"<td>{html_text(v)}</td>"
                for v in (r.get("path"), r.get("signal"), r.get("instances"), _num(r.get("median")), r.get("unit"))
            )
            + "</tr>"
        )
    head = "".join(f"<th>{h}</th>" for h in ("region", "signal", "instances", "median", "unit"))
    cov = "".join(f"<li>{html_text(c)}</li>" for c in bundle.get("summary", {}).get("coverage", []))
    return (
        f"<p><b>{html_text(bundle.get('title', 'argus report'))}</b></p>"
        f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
        + (f"<p>missing coverage:</p><ul>{cov}</ul>" if cov else "")
    )


def _num(v: Any) -> str:
    return f"{v:.6g}" if isinstance(v, float) else str(v)


def mount_script(el_id: str, data_id: str) -> str:
    """The script that mounts the renderer on ``el_id`` once the page has it (and plotly.js, if coming)."""
    return (
        "(function(){var el=document.getElementById('" + el_id + "');"
        "var d=JSON.parse(document.getElementById('" + data_id + "').textContent);"
        "function go(){if(window.ArgusReport){window.ArgusReport.render(el,d,{});}}"
        "if(document.readyState==='loading'){document.addEventListener('DOMContentLoaded',go);}else{go();}})();"
    )


def fallback_html(bundle: dict[str, Any]) -> str:
    """The ``text/html`` output of a report: a static summary, upgraded to the interactive view when scripts run."""
    uid = uuid.uuid4().hex[:12]
    el_id, data_id = f"argus-{uid}", f"argus-data-{uid}"
    return (
        f'<div class="argus-report-host" id="{el_id}">{_static_summary(bundle)}</div>'
        f'<script type="application/json" id="{data_id}">{json_for_script(bundle)}</script>'
        f"<style>{renderer_css()}</style>"
        f"<script>if(!window.ArgusReport){{{renderer_js()}}}</script>"
        f"<script>{mount_script(el_id, data_id)}</script>"
    )


COMPRESS_OVER = 1_000_000
"""A standalone page whose report data is larger than this (bytes of JSON) embeds its data and plotly.js gzipped
(base64): the page of a million-kernel run stays under 10 MB.  The browser inflates them when the page opens
(``DecompressionStream``, in Chromium 80+, Firefox 113+, Safari 16.4+), before the report is drawn."""

# inflates the gzip+base64 script elements, runs plotly.js, then mounts the renderer on the data
_INFLATE = (
    "(function(){var el=document.getElementById('argus-report');"
    "function bytes(id){var b=atob(document.getElementById(id).textContent.replace(/\\s+/g,''));"
    "var u=new Uint8Array(b.length);for(var i=0;i<b.length;i++){u[i]=b.charCodeAt(i);}return u;}"
    "function inflate(id){return new Response(new Blob([bytes(id)]).stream()"
    ".pipeThrough(new DecompressionStream('gzip'))).text();}"
    "function say(t){var p=document.createElement('p');p.textContent=t;el.appendChild(p);}"
    "if(!window.DecompressionStream){say('this browser cannot inflate the report data (no DecompressionStream); '"
    "+'open the page in a current Chrome, Firefox or Safari');return;}"
    "Promise.all([inflate('argus-plotly-gz'),inflate('argus-data-gz')]).then(function(r){"
    "var s=document.createElement('script');s.textContent=r[0];document.head.appendChild(s);"
    "window.ArgusReport.render(el,JSON.parse(r[1]),{});},"
    "function(e){say('the report data could not be inflated: '+e);});"
    "})();"
)


@functools.cache
def _plotly_gz(plotly_js: str) -> str:
    return _gz64(plotly_js)


def _gz64(text: str) -> str:
    import base64
    import gzip

    return base64.b64encode(gzip.compress(text.encode("utf-8"), 6)).decode("ascii")


def standalone_html(bundle: dict[str, Any], *, plotly_js: str | None = None, compress: bool | None = None) -> str:
    """One self-contained page: plotly.js once, the renderer once, the bundle; opens offline, no kernel needed.

    ``compress``: embed the data and plotly.js gzipped (default: when the data is over :data:`COMPRESS_OVER`).
    """
    if plotly_js is None:
        from plotly.offline import get_plotlyjs

        plotly_js = get_plotlyjs()
    title = html_text(bundle.get("title", "argus report"))
    data = json_for_script(bundle)
    if compress if compress is not None else len(data) > COMPRESS_OVER:
        return (
            '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f"<title>{title}</title>\n"
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f"<style>body{{margin:16px;font-family:system-ui,sans-serif}}\n{renderer_css()}</style>\n"
            f"<script>{renderer_js()}</script>\n"
            "</head>\n<body>\n"
            f'<div id="argus-report">{_static_summary(bundle)}</div>\n'
            f'<script type="application/gzip+base64" id="argus-plotly-gz">{_plotly_gz(plotly_js)}</script>\n'
            f'<script type="application/gzip+base64" id="argus-data-gz">{_gz64(data)}</script>\n'
            f"<script>{_INFLATE}</script>\n"
            "</body>\n</html>\n"
        )
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f"<title>{title}</title>\n"
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<style>body{{margin:16px;font-family:system-ui,sans-serif}}\n{renderer_css()}</style>\n"
        f"<script>{plotly_js}</script>\n"
        f"<script>{renderer_js()}</script>\n"
        "</head>\n<body>\n"
        f'<div id="argus-report">{_static_summary(bundle)}</div>\n'
        f'<script type="application/json" id="argus-data">{data}</script>\n'
        f"<script>{mount_script('argus-report', 'argus-data')}</script>\n"
        "</body>\n</html>\n"
    )
