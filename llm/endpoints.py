"""Which endpoint (base URL, API key, model, limits, prices) a role uses, with per-run overrides.

Resolution happens at call time, so a change made on the LLM pages applies to the next run
without a restart:

1. a run's explicit overrides (``base_url``, ``model``, ``api_key_env``) win;
2. then the endpoint record assigned to the role (``EndpointRoleAssignment``), unless it is
   retired;
3. then the role's environment variables (``<PREFIX>_BASE_URL``, ... falling back to
   ``LLM_BASE_URL``, ...; config/settings/llm.py).

The limits and prices of an endpoint record apply to every request sent to the record's base
URL (prices only for the record's own model); a run that overrides the base URL with a
record's URL and names no key variable uses that record's key."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import DatabaseError

from core.app_errors import InvalidInput, Unavailable
from llm.key_env import api_key_from_env
from llm.limits import EndpointLimits, endpoint_limits_default

if TYPE_CHECKING:
    from llm.models import EndpointRecord


class EndpointNotConfigured(Unavailable, RuntimeError):
    """No LLM endpoint is configured for a role: a request that needs one now is answered 503
    (a launch whose configuration names the role is refused with a 400, docs/api.md)."""


class UnknownLLMRole(InvalidInput, KeyError):
    """A role the settings do not define (400; a ``KeyError`` too, as it was before)."""


@dataclass(frozen=True)
class Endpoint:
    """A resolved endpoint: where a request goes and with which key, limits and prices.
    (``EndpointRecord`` is the stored, editable record a role may be assigned to.)"""

    role: str
    base_url: str
    api_key: str = field(repr=False)
    model: str
    record_id: int | None = None  # the endpoint record it came from, if any
    limits: EndpointLimits | None = None  # the record's limits; None: the LLM_* settings
    price_input: Decimal | None = None  # USD per million tokens; None: the price table
    price_output: Decimal | None = None
    context_length: int | None = None  # tokens; None: learned from the server (llm/capabilities.py)
    timeout_seconds: float | None = None  # None: LLM_TIMEOUT_SECONDS, adapted to a slow endpoint
    disable_thinking: bool = False  # send chat_template_kwargs {"enable_thinking": false}

    @property
    def configured(self) -> bool:
        return bool(self.base_url and self.model)


def normalized_url(url: str) -> str:
    return (url or "").strip().rstrip("/")


def record_limits(record: EndpointRecord) -> EndpointLimits | None:
    if record.max_concurrency is None and record.requests_per_minute is None and record.tokens_per_minute is None:
        return None
    default = endpoint_limits_default()
    return EndpointLimits(
        concurrency=record.max_concurrency or default.concurrency,
        requests_per_minute=record.requests_per_minute
        if record.requests_per_minute is not None
        else default.requests_per_minute,
        tokens_per_minute=record.tokens_per_minute
        if record.tokens_per_minute is not None
        else default.tokens_per_minute,
    )


def record_api_key(record: EndpointRecord) -> str:
    """The record's key: decrypted from the database, or read from its environment variable
    now (so a variable set after start-up is seen by the next run)."""
    if record.api_key_encrypted:
        from llm.endpoint_keys import api_key_decrypt

        return api_key_decrypt(record.api_key_encrypted)
    if record.api_key_env:
        return api_key_from_env(record.api_key_env)
    return ""


def role_record(role: str) -> EndpointRecord | None:
    """The endpoint record assigned to ``role`` (None when none is, or it is retired)."""
    from llm.models import EndpointRoleAssignment

    try:
        assignment = (
            EndpointRoleAssignment.objects.select_related("record").filter(role=role, record__retired=False).first()
        )
    except DatabaseError:  # tables not migrated yet (a command run before `migrate`)
        return None
    return assignment.record if assignment else None


def record_for_url(base_url: str, model: str) -> EndpointRecord | None:
    """The live endpoint record at ``base_url``: the one with ``model`` if there is one,
    else the most recently changed one."""
    from llm.models import EndpointRecord

    url = normalized_url(base_url)
    if not url:
        return None
    try:
        candidates = [
            r
            for r in EndpointRecord.objects.filter(retired=False, base_url__startswith=url).order_by(
                "-updated_at", "-id"
            )
            if normalized_url(r.base_url) == url
        ]
    except DatabaseError:
        return None
    exact = [r for r in candidates if r.model == model]
    found = exact or candidates
    return found[0] if found else None


def endpoint_from_record(
    role: str,
    record: EndpointRecord,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    model: str | None = None,
) -> Endpoint:
    """``record``'s endpoint for ``role`` with a run's overrides applied. A base URL
    overridden to elsewhere never gets this record's key."""
    final_url = base_url if base_url is not None else record.base_url
    final_model = model if model is not None else record.model
    if normalized_url(final_url) != normalized_url(record.base_url):
        return _endpoint(role, final_url, api_key, final_model, role_key="", own_url=False)
    same_model = final_model == record.model
    return Endpoint(
        role=role,
        base_url=final_url,
        model=final_model,
        api_key=api_key if api_key is not None else record_api_key(record),
        record_id=record.pk,
        limits=record_limits(record),
        price_input=record.price_input if same_model else None,
        price_output=record.price_output if same_model else None,
        context_length=record.context_length if same_model else None,
        timeout_seconds=float(record.timeout_seconds) if record.timeout_seconds else None,
        disable_thinking=record.disable_thinking if same_model else False,
    )


def _endpoint(role: str, base_url: str, api_key: str | None, model: str, *, role_key: str, own_url: bool) -> Endpoint:
    """An endpoint not given by the role's record. A live record at the same base URL lends
    its limits and prices, and its key when the URL is not the role's own and no key
    variable was named; otherwise the key is ``role_key``."""
    record = record_for_url(base_url, model) if base_url else None
    if record is not None:
        if api_key is None and own_url:
            api_key = role_key
        return endpoint_from_record(role, record, base_url=base_url, api_key=api_key, model=model)
    configured = settings.LLM_ROLES.get(role) or {}
    return Endpoint(
        role=role,
        base_url=base_url,
        model=model,
        api_key=api_key if api_key is not None else role_key,
        context_length=configured.get("context_length"),
        timeout_seconds=configured.get("timeout_seconds"),
        disable_thinking=bool(configured.get("disable_thinking")),
    )


def endpoint_get(
    role: str, *, base_url: str | None = None, api_key: str | None = None, model: str | None = None
) -> Endpoint:
    """Resolve a role now: explicit arguments (a run's overrides) win over the role's endpoint
    record, which wins over the role's settings (falling back to the LLM_* defaults)."""
    configured = settings.LLM_ROLES.get(role)
    if configured is None:
        known = ", ".join(sorted(settings.LLM_ROLES))
        raise UnknownLLMRole(f"unknown LLM role {role!r}; known roles: {known}")
    record = role_record(role)
    if record is not None:
        return endpoint_from_record(role, record, base_url=base_url, api_key=api_key, model=model)
    final_url = base_url if base_url is not None else configured["base_url"]
    final_model = model if model is not None else configured["model"]
    own_url = normalized_url(final_url) == normalized_url(configured["base_url"])
    return _endpoint(role, final_url, api_key, final_model, role_key=configured["api_key"], own_url=own_url)


def endpoint_require(role: str, **overrides: str | None) -> Endpoint:
    endpoint = endpoint_get(role, **overrides)
    if not endpoint.configured:
        raise EndpointNotConfigured(
            f"no LLM endpoint for role {role!r}: assign an endpoint record to the role on the LLM endpoints page, "
            "or set LLM_BASE_URL and LLM_MODEL (or the role's own *_BASE_URL / *_MODEL variables)"
        )
    return endpoint


#: Each role's endpoint as this process last resolved it, with when (``time.monotonic``): for
#: callers that resolve a role on every call of a hot path (the reward endpoint inside a
#: training loop, where the two queries of a resolution were about a seventh of a call).
_recent: dict[str, tuple[float, Endpoint]] = {}


def endpoint_require_recent(role: str, *, max_age: float) -> Endpoint:
    """``endpoint_require(role)`` as this process resolved it at most ``max_age`` seconds ago
    (0: resolved now). A record or role assignment saved in this process, or a changed
    setting, forgets every resolution at once (``endpoint_recent_forget``, llm/apps.py); a
    change made by another process is seen here within ``max_age``."""
    now = time.monotonic()
    found = _recent.get(role)
    if found is not None and now - found[0] < max_age:
        return found[1]
    endpoint = endpoint_require(role)
    if max_age > 0:
        _recent[role] = (now, endpoint)
    return endpoint


def endpoint_recent_forget(**_signal_arguments: object) -> None:
    """Forget every role's recent resolution (a receiver of Django's model and setting signals)."""
    _recent.clear()


def endpoint_from_overrides(
    role: str, overrides: dict[str, str] | None, *, record: EndpointRecord | None = None
) -> Endpoint:
    """A run's endpoint: its role's (or the pinned ``record``'s), with the run's ``base_url`` /
    ``model`` overrides and the API key read from the environment variable ``api_key_env`` names."""
    overrides = overrides or {}
    api_key = api_key_from_env(overrides["api_key_env"]) if overrides.get("api_key_env") else None
    if record is not None:
        endpoint = endpoint_from_record(
            role, record, base_url=overrides.get("base_url"), model=overrides.get("model"), api_key=api_key
        )
        if not endpoint.configured:
            raise EndpointNotConfigured(f"endpoint record {record.name!r} has no base URL or model")
        return endpoint
    return endpoint_require(role, base_url=overrides.get("base_url"), model=overrides.get("model"), api_key=api_key)
