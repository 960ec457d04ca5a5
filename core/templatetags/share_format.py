"""Formatting of shares for every page: ``percent`` and the ``share_estimate`` include
(templates/includes/share_estimate.html)."""

from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def percent(value, digits: int = 1) -> str:
    """0.5 -> "50.0 %"; None (nothing to divide) -> "—"."""
    if value is None or value == "":
        return "—"
    return f"{100 * float(value):.{int(digits)}f} %"
