"""Small formatting filters of the CoScript pages (``percent`` is core's share_format)."""

from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def score(value, digits: int = 4) -> str:
    if value is None:
        return "—"
    return f"{float(value):.{int(digits)}f}"


@register.filter
def get_item(mapping, key):
    """mapping[key], or "" when absent (for dictionaries keyed by ids)."""
    if not mapping or key is None:
        return ""
    return mapping.get(key, "")
