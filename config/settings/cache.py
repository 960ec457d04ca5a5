"""The cache shared by every web process (rate limits of the annotator entry, and anything
else that must agree across processes).

* ``CACHE_URL`` unset (default): a file cache under ``VAR_DIR/cache``, shared by every process
  on the machine and needing no server.
* ``CACHE_URL=redis://host:6379/1`` (or ``rediss://``): Redis, shared across machines; counters
  are then incremented atomically.
* ``CACHE_URL=locmem://``: memory of one process (only for a single-process server)."""

from __future__ import annotations

from typing import Any

from config.env import ImproperlyConfiguredEnv, env_str, var_dir


def cache_settings() -> dict:
    url = (env_str("CACHE_URL") or "").strip()
    if url.startswith(("redis://", "rediss://")):
        default: dict[str, Any] = {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": url}
    elif url.startswith("locmem://"):
        default = {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": url[len("locmem://") :]}
    elif url == "":
        location = var_dir() / "cache"
        location.mkdir(parents=True, exist_ok=True)
        default = {
            "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
            "LOCATION": str(location),
            "OPTIONS": {"MAX_ENTRIES": 100_000},
        }
    else:
        raise ImproperlyConfiguredEnv(f"CACHE_URL={url!r}: use redis://..., rediss://..., locmem:// or leave it unset")
    return {"CACHES": {"default": default}}
