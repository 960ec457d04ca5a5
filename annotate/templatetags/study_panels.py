"""``{% study_panels study %}``: the panels other apps registered for the study page
(annotate/panels.py), each rendered from its template with its context as ``panel``."""

from __future__ import annotations

from django import template
from django.template.loader import render_to_string
from django.utils.safestring import mark_safe

from annotate.panels import study_panels as registered_panels

register = template.Library()


@register.simple_tag(takes_context=True)
def study_panels(context, study):
    request = context.get("request")
    html = [
        render_to_string(name, {"panel": panel, "study": study}, request=request)
        for name, panel in registered_panels(study, request)
    ]
    return mark_safe("".join(html))
