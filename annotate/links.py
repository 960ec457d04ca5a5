"""Entry links: the URL a researcher pastes into Prolific, and the local server's address."""

from __future__ import annotations

import os

from django.urls import reverse

PROLIFIC_QUERY = "?PROLIFIC_PID={{%PROLIFIC_PID%}}&STUDY_ID={{%STUDY_ID%}}&SESSION_ID={{%SESSION_ID%}}"


def default_base_url() -> str:
    """Where `make run` serves (HOST and PORT, as the serve command reads them)."""
    return f"http://{os.environ.get('HOST', '127.0.0.1')}:{os.environ.get('PORT', '8000')}"


def prolific_entry_url(base_url: str, slug: str) -> str:
    """The study URL with Prolific's placeholders, which Prolific fills in per participant."""
    return f"{base_url.rstrip('/')}{reverse('annotate:entry', args=[slug])}{PROLIFIC_QUERY}"
