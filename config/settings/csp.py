"""The Content-Security-Policy of every response (django-csp's CSPMiddleware).

Scripts come only from this site, from files: no inline ``<script>``, no ``on...=``
attribute, no ``eval``. Data a page's script needs travels as
``<script type="application/json">`` blocks (``json_script``, core/charts.py), which are
not executed. Styles keep ``'unsafe-inline'``: plotly and Swagger UI set inline styles,
and a style cannot run code. Images may be ``data:`` URLs (plotly's heat maps, the
favicon). Nothing may frame the pages, forms post only to this site, and ``<base>`` cannot
redirect relative links. The API's Redoc page alone adds ``blob:`` workers (its search
index) in config/urls.py. Reports of violations go to the browser console.
"""

from __future__ import annotations

from typing import Any

from csp.constants import NONE, SELF


def csp_settings() -> dict[str, Any]:
    return {
        "CONTENT_SECURITY_POLICY": {
            "DIRECTIVES": {
                "default-src": [SELF],
                "script-src": [SELF],
                "style-src": [SELF, "'unsafe-inline'"],
                "img-src": [SELF, "data:"],
                "font-src": [SELF, "data:"],
                "connect-src": [SELF],
                "object-src": [NONE],
                "base-uri": [SELF],
                "form-action": [SELF],
                "frame-ancestors": [NONE],
            },
        },
    }
