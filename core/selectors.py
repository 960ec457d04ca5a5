"""Reads of the core app."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings
from django.db import connection
from django.db.models import QuerySet

from core.api_tokens import MAX_SECRET_LENGTH, secret_digest
from core.models import ApiToken
from core.workers import queues_by_name


def _mask_url(url: str) -> str:
    """Hide the password in a URL such as redis://:secret@host/0."""
    parts = urlsplit(url)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return urlunsplit(parts._replace(netloc=netloc))
    return url


# Who says where each LLM role's endpoint comes from: the llm app registers a provider in its
# AppConfig.ready (endpoint records or environment variables; core cannot import llm).
_llm_role_rows_provider: Callable[[], list[dict]] | None = None


def llm_role_rows_provider_register(provider: Callable[[], list[dict]]) -> None:
    global _llm_role_rows_provider
    _llm_role_rows_provider = provider


def system_status_get() -> dict:
    db = settings.DATABASES["default"]
    if _llm_role_rows_provider is not None:
        roles = _llm_role_rows_provider()
    else:
        roles = [
            {
                "role": role,
                "base_url": endpoint["base_url"] or "(not configured)",
                "model": endpoint["model"] or "(not configured)",
                "api_key": "set" if endpoint["api_key"] else "not set",
                "source": "environment",
            }
            for role, endpoint in settings.LLM_ROLES.items()
        ]
    return {
        "database_vendor": connection.vendor,
        "database_name": str(db.get("NAME", "")),
        "broker_url": _mask_url(settings.CELERY_BROKER_URL),
        "result_backend": _mask_url(settings.CELERY_RESULT_BACKEND),
        "llm_roles": roles,
        "debug": settings.DEBUG,
        "var_dir": str(settings.VAR_DIR),
        "queues": queues_by_name(),
    }


def api_token_list(*, user) -> QuerySet[ApiToken]:
    """``user``'s API tokens, newest first (expired ones included, marked by ``is_expired``)."""
    return ApiToken.objects.filter(user=user).order_by("-created_at", "-id")


def api_token_get_by_secret(*, secret: str) -> ApiToken | None:
    """The token whose secret this is (with its user), or None. Expiry is the caller's to check."""
    if not secret or len(secret) > MAX_SECRET_LENGTH:
        return None
    # get(): the digest is unique, so no ORDER BY (``first()`` would sort by the model's
    # ordering, on every API call).
    try:
        return ApiToken.objects.select_related("user").get(digest=secret_digest(secret))
    except ApiToken.DoesNotExist:
        return None
