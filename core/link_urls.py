"""Which stored URLs may become links (pure: no Django).

A URL from imported data (a procedure's source page, a corpus document's address) is data,
not code: it is rendered as a link only when a browser would open it as an ``http`` or
``https`` page, and shown as text otherwise. The check reads the value the way a browser's
URL parser does before it looks at the scheme: it drops leading and trailing control
characters and spaces, removes tabs and line breaks anywhere (so ``java\\tscript:`` is
``javascript:``), and ignores case. An HTML character reference (``&#106;avascript:``) is
checked decoded as well, in case a value ever reaches a page unescaped. Anything else
(``javascript:``, ``data:``, ``vbscript:``, a scheme-relative ``//host``, a bare word) is
refused: an allowlist, not a list of known-bad schemes.
"""

from __future__ import annotations

import html
import re
from urllib.parse import urlsplit

WEB_SCHEMES = frozenset({"http", "https"})

# What the WHATWG URL parser strips from both ends (C0 controls and space) and removes
# everywhere (ASCII tab and newline) before it reads the scheme.
_EDGE = "".join(chr(code) for code in range(0x21))
_TAB_OR_NEWLINE = re.compile(r"[\t\n\r]")
# Control characters left inside the value after that: never part of a link we draw.
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):")


def browser_form(value: object) -> str:
    """The value as a browser's URL parser sees it before reading the scheme."""
    if value is None:
        return ""
    return _TAB_OR_NEWLINE.sub("", str(value).strip(_EDGE))


def _is_web_url(text: str) -> bool:
    match = _SCHEME.match(text)
    if match is None or match.group(1).lower() not in WEB_SCHEMES or _CONTROL.search(text):
        return False
    try:
        return bool(urlsplit(text).netloc)
    except ValueError:  # e.g. an unbalanced IPv6 bracket
        return False


def _is_site_path(text: str) -> bool:
    # "/page" stays on this site; "//host" and "/\host" leave it (browsers read "\" as "/").
    return text.startswith("/") and not text.startswith(("//", "/\\")) and _CONTROL.search(text) is None


def _forms(value: object) -> tuple[str, str]:
    seen = browser_form(value)
    return seen, browser_form(html.unescape(seen))


def http_url(value: object) -> str:
    """The URL (as the browser reads it) when it is an absolute http(s) URL with a host;
    otherwise ``""``, meaning: show the value as text, never as a link."""
    seen, decoded = _forms(value)
    return seen if _is_web_url(seen) and _is_web_url(decoded) else ""


def page_url(value: object) -> str:
    """Like :func:`http_url`, but a path on this site (``/studies/x/``) is allowed too:
    for links the server builds itself (back links, next steps)."""
    seen, decoded = _forms(value)
    if all(_is_web_url(form) or _is_site_path(form) for form in (seen, decoded)):
        return seen
    return ""
