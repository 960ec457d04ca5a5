"""Small formatting filters of the CoScript pages."""
from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def percent(value, digits: int = 1) -> str:
    """0.5 -> "50.0 %"; None (nothing to divide) -> "—"."""
    if value is None or value == "":
        return "—"
    return f"{100 * float(value):.{int(digits)}f} %"


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
