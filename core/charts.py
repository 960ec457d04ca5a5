"""How every app puts a plotly figure on a page without inline JavaScript.

A chart is a ``<div>`` plus the figure as JSON in a ``<script type="application/json">``
block (data, not code: the Content-Security-Policy allows no inline script).
``static/js/charts.js`` draws every such block with ``Plotly.newPlot``; a page with
charts loads it with ``{% include "includes/chart_scripts.html" %}`` in its head.
"""

from __future__ import annotations

import json
from typing import Any

from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

# The figure's JSON goes inside a <script> element: "<", ">" and "&" are written as JSON
# escapes so no string in it can close the element ("</script>") or open a comment.
_SCRIPT_SAFE = {ord("<"): "\\u003C", ord(">"): "\\u003E", ord("&"): "\\u0026"}
_CONFIG = {"displaylogo": False, "responsive": True}


def figure_html(figure: Any, *, div_id: str, config: dict[str, Any] | None = None) -> SafeString:
    """The chart's HTML fragment: the div it is drawn in and its JSON block."""
    payload = (
        '{"figure": ' + figure.to_json() + ', "config": ' + json.dumps({**_CONFIG, **(config or {})}) + "}"
    ).translate(_SCRIPT_SAFE)
    height = figure.layout.height
    style = f"height:{int(height)}px; width:100%;" if height else "width:100%;"
    return format_html(
        '<div id="{}" class="plotly-graph-div" style="{}"></div>'
        '<script type="application/json" class="plotly-figure" data-target="{}">{}</script>',
        div_id,
        style,
        div_id,
        mark_safe(payload),
    )
