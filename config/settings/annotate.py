"""Limits of the annotator entry (/a/<study>/?PROLIFIC_PID=...), against one client taking
every slot of a study with made-up participant ids.

* ``ANNOTATE_ENTRY_LIMIT_PER_ADDRESS`` (10): new participants one client address may start in
  one study per window; more get a "too many new participants" page with HTTP 429. A
  participant who comes back (same PID) is never counted. 0 turns the limit off.
* ``ANNOTATE_ENTRY_WINDOW_SECONDS`` (3600): the window, sliding.

The client address is ``core.client_ip`` (REMOTE_ADDR, or X-Forwarded-For when
TRUST_PROXY_HEADERS says a proxy sets it); IPv6 addresses count per /64 network. The counts
live in the shared cache (config/settings/cache.py)."""

from __future__ import annotations

from config.env import ImproperlyConfiguredEnv, env_int


def annotate_settings() -> dict:
    limit = env_int("ANNOTATE_ENTRY_LIMIT_PER_ADDRESS", 10)
    window = env_int("ANNOTATE_ENTRY_WINDOW_SECONDS", 3600)
    if limit < 0:
        raise ImproperlyConfiguredEnv(f"ANNOTATE_ENTRY_LIMIT_PER_ADDRESS={limit} must be 0 (off) or more")
    if window < 1:
        raise ImproperlyConfiguredEnv(f"ANNOTATE_ENTRY_WINDOW_SECONDS={window} must be at least 1")
    return {"ANNOTATE_ENTRY_LIMIT_PER_ADDRESS": limit, "ANNOTATE_ENTRY_WINDOW_SECONDS": window}
