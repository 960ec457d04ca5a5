"""Prolific integration settings (docs/prolific.md).

* ``PROLIFIC_API_URL`` (``https://api.prolific.com/api/v1/``): Prolific's public API; tests point
  it at a scripted server on 127.0.0.1.
* ``PROLIFIC_API_TOKEN`` (empty): a token used when the researcher has saved none of their own
  (per-user tokens are saved, encrypted, from /account/prolific/).
* ``PROLIFIC_SITE_URL`` (empty): the address participants reach this server at, used in the
  study URL of a draft published from a command or a background task (a page or an API call
  uses the address it was requested at). Empty: http://HOST:PORT.
* ``PROLIFIC_SYNC_SECONDS`` (300): how often the scheduler syncs every linked, active study.
* ``PROLIFIC_TIMEOUT_SECONDS`` (20): one request's timeout.
* ``PROLIFIC_MAX_ATTEMPTS`` (4): attempts of one request on 429, 5xx and network errors.
* ``PROLIFIC_RETRY_BASE_SECONDS`` (1.0) and ``PROLIFIC_RETRY_MAX_SECONDS`` (30): the backoff
  between attempts, doubling from the base; a ``Retry-After`` is obeyed up to the maximum, and a
  longer one ends the attempts with a message saying how long Prolific asked to wait.
* ``PROLIFIC_WEBHOOK_TOLERANCE_SECONDS`` (300): how far an event's signed request timestamp may
  be from this server's clock, either way; an older (or later) one is refused as stale.
* ``PROLIFIC_WEBHOOK_MAX_BYTES`` (65536): the largest webhook body read; Prolific's events are a
  few hundred bytes.
"""

from __future__ import annotations

from datetime import timedelta

from config.env import ImproperlyConfiguredEnv, env_float, env_positive_int, env_str


def prolific_settings() -> dict:
    api_url = env_str("PROLIFIC_API_URL", "https://api.prolific.com/api/v1/") or "https://api.prolific.com/api/v1/"
    if not api_url.startswith(("http://", "https://")):
        raise ImproperlyConfiguredEnv(f"PROLIFIC_API_URL={api_url!r} must start with http:// or https://")
    base = env_float("PROLIFIC_RETRY_BASE_SECONDS", 1.0)
    cap = env_float("PROLIFIC_RETRY_MAX_SECONDS", 30.0)
    if not (0 <= base <= 60) or not (0 <= cap <= 3600):
        raise ImproperlyConfiguredEnv("PROLIFIC_RETRY_BASE_SECONDS must be 0-60 and PROLIFIC_RETRY_MAX_SECONDS 0-3600")
    sync_seconds = env_positive_int("PROLIFIC_SYNC_SECONDS", 300)
    tolerance = env_positive_int("PROLIFIC_WEBHOOK_TOLERANCE_SECONDS", 300)
    if tolerance > 86_400:
        raise ImproperlyConfiguredEnv("PROLIFIC_WEBHOOK_TOLERANCE_SECONDS must be 1-86400")
    max_bytes = env_positive_int("PROLIFIC_WEBHOOK_MAX_BYTES", 65_536)
    if max_bytes > 1_048_576:
        raise ImproperlyConfiguredEnv("PROLIFIC_WEBHOOK_MAX_BYTES must be 1-1048576")
    return {
        "PROLIFIC_API_URL": api_url if api_url.endswith("/") else api_url + "/",
        "PROLIFIC_API_TOKEN": env_str("PROLIFIC_API_TOKEN", "") or "",
        "PROLIFIC_SITE_URL": env_str("PROLIFIC_SITE_URL", "") or "",
        "PROLIFIC_SYNC_SECONDS": sync_seconds,
        "PROLIFIC_TIMEOUT_SECONDS": env_positive_int("PROLIFIC_TIMEOUT_SECONDS", 20),
        "PROLIFIC_MAX_ATTEMPTS": env_positive_int("PROLIFIC_MAX_ATTEMPTS", 4),
        "PROLIFIC_RETRY_BASE_SECONDS": base,
        "PROLIFIC_RETRY_MAX_SECONDS": cap,
        "PROLIFIC_WEBHOOK_TOLERANCE_SECONDS": tolerance,
        "PROLIFIC_WEBHOOK_MAX_BYTES": max_bytes,
        # The scheduler (celery beat, started by `manage.py serve`) syncs linked studies.
        "CELERY_BEAT_SCHEDULE": {
            "prolific-sync": {"task": "prolific.sync_all", "schedule": timedelta(seconds=sync_seconds)},
        },
    }
