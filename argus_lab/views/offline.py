"""plotly's ``notebook`` renderer without network requests.

Its HTML output loads MathJax from a CDN for LaTeX labels (hard-coded ``include_mathjax="cdn"``), which is a
failed request in an offline page.  argus figures have no LaTeX, so the script element is dropped.
"""

from __future__ import annotations

import re
from typing import Any

from plotly.io._base_renderers import NotebookRenderer

_CDN_SCRIPT = re.compile(r'<script src="https://cdn[^"]*mathjax[^"]*"></script>', re.IGNORECASE)


class OfflineNotebookRenderer(NotebookRenderer):  # type: ignore[misc]
    """plotly.js inlined once per notebook, no MathJax CDN script."""

    def to_mimebundle(self, fig_dict: Any) -> dict[str, Any]:
        """plotly's bundle with the MathJax CDN script removed from its ``text/html``."""
        bundle: dict[str, Any] = super().to_mimebundle(fig_dict)
        html = bundle.get("text/html")
        if isinstance(html, str):
            bundle["text/html"] = _CDN_SCRIPT.sub("", html)
        return bundle
