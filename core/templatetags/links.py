"""Links from stored data (core/link_urls.py decides which URLs may be links).

* ``{{ value|http_url }}``: the URL when it is an http(s) web address, else ``""``.
* ``{{ value|page_url }}``: the same, or a path on this site (links the server builds).
* ``{% web_link value "label" %}``: an ``<a>`` to an http(s) address, or, for anything
  else (``javascript:``, ``data:``, ...), the value as plain text in a ``<code>`` marked
  ``url-as-text``. The label defaults to the URL itself.
"""

from __future__ import annotations

from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

from core import link_urls

register = template.Library()


@register.filter
def http_url(value: object) -> str:
    return link_urls.http_url(value)


@register.filter
def page_url(value: object) -> str:
    return link_urls.page_url(value)


@register.simple_tag
def web_link(value: object, label: object = None, link_id: str = "") -> SafeString:
    href = link_urls.http_url(value)
    if href:
        return format_html(
            '<a{} href="{}" rel="noopener noreferrer nofollow" class="web-link">{}</a>',
            format_html(' id="{}"', link_id) if link_id else "",
            href,
            label or href,
        )
    return format_html(
        '<code class="url-as-text" title="not an http(s) address, shown as text">{}</code>',
        "" if value is None else value,
    )
