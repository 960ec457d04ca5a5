"""Error reports that never show a secret (DEFAULT_EXCEPTION_REPORTER and
DEFAULT_EXCEPTION_REPORTER_FILTER in config/django/base.py).

Django's own filter hides settings whose *name* looks sensitive (``*_KEY``, ``*PASSWORD``,
...), but not a password inside a URL: ``CELERY_BROKER_URL``, ``CELERY_RESULT_BACKEND``,
``DATABASE_URL`` or ``LLM_BASE_URL`` with ``user:password@`` were shown in full, in the
settings, in the request's environment (runserver copies the process environment into
``request.META``), in a traceback's local variables and in exception messages. Here:

* every setting, META entry, cookie and local variable goes through
  :func:`core.secret_masking.mask_secrets` as well as Django's name rule;
* the filter is active with DEBUG on too, so sensitive POST parameters (the login
  password) are hidden on the technical page as well;
* the rendered report (HTML or text, the technical 500 page and e-mailed reports alike) is
  masked once more as a whole, which catches a secret wherever the page repeats it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from functools import lru_cache
from typing import Any
from urllib.parse import unquote

from django.conf import settings
from django.views.debug import ExceptionReporter, SafeExceptionReporterFilter

from core.secret_masking import mask_secrets, registered_secrets, secret_variants, url_password

# Environment variables whose value is a secret by their name. Narrower than Django's rule for
# settings: "AUTH" would take paths such as SSH_AUTH_SOCK or XAUTHORITY.
_SECRET_ENV_NAME = re.compile(r"API|TOKEN|SECRET|PASS|SIGNATURE|KEY", re.IGNORECASE)


def _walk_strings(value: Any, depth: int = 0) -> Iterator[tuple[str, str]]:
    """(key, string) pairs found in a setting's value, nested dicts and sequences included."""
    if depth > 6:
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, str):
                yield str(key), item
            else:
                yield from _walk_strings(item, depth + 1)
    elif isinstance(value, (list, tuple)):
        for item in value:
            if isinstance(item, str):
                yield "", item
            else:
                yield from _walk_strings(item, depth + 1)


def _collect_secrets() -> list[str]:
    hidden = SafeExceptionReporterFilter.hidden_settings
    found: list[str] = []

    def consider(name: str, value: Any, rule: re.Pattern = hidden) -> None:
        if type(value) is not str:  # a lazy object passes isinstance(value, str)
            try:
                value = str(value)
            except Exception:
                return
        password = url_password(value)
        if password:
            found.extend([password, unquote(password)])
        if name and rule.search(name):
            found.append(value)

    for name in dir(settings):
        if not name.isupper():
            continue
        value = getattr(settings, name, None)
        if isinstance(value, str):
            consider(name, value)
        else:
            for key, item in _walk_strings(value):
                consider(key, item)
    # Variables read by libraries rather than settings (OPENAI_API_KEY, ...).
    for name, value in os.environ.items():
        consider(name, value, _SECRET_ENV_NAME)
    return secret_variants(found)


@lru_cache(maxsize=1)
def known_secrets() -> tuple[str, ...]:
    """Secret values of this process (settings and environment), computed once. Never raises:
    a setting that cannot be read yet only leaves its value out (URL credentials are still
    masked by their shape)."""
    try:
        return tuple(_collect_secrets())
    except Exception:
        return ()


def mask(text: str) -> str:
    return mask_secrets(text, (*known_secrets(), *registered_secrets()))


class MaskingReporterFilter(SafeExceptionReporterFilter):
    """Django's filter, plus URL credentials and known secret values masked in every value."""

    def is_active(self, request) -> bool:
        # Hide sensitive POST parameters and variables with DEBUG on, too.
        return True

    def cleanse_setting(self, key, value):
        cleansed = super().cleanse_setting(key, value)
        if isinstance(cleansed, str):
            return mask(cleansed)
        return cleansed

    def get_traceback_frame_variables(self, request, tb_frame):
        variables = super().get_traceback_frame_variables(request, tb_frame)
        cleansed = []
        for name, value in variables:
            if isinstance(name, str) and self.hidden_settings.search(name) and value is not None:
                value = self.cleansed_substitute
            elif isinstance(value, str):
                value = mask(value)
            cleansed.append((name, value))
        return cleansed


class MaskingExceptionReporter(ExceptionReporter):
    """The technical error report with every secret masked in its final text."""

    def get_traceback_html(self):
        return mask(str(super().get_traceback_html()))

    def get_traceback_text(self):
        return mask(str(super().get_traceback_text()))
