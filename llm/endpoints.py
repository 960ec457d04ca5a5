"""Which endpoint (base URL, API key, model) a role uses, with per-run overrides."""
from __future__ import annotations

import os
from dataclasses import dataclass

from django.conf import settings


class EndpointNotConfigured(RuntimeError):
    """No LLM endpoint is configured for a role."""


@dataclass(frozen=True)
class Endpoint:
    role: str
    base_url: str
    api_key: str
    model: str

    @property
    def configured(self) -> bool:
        return bool(self.base_url and self.model)


def endpoint_get(role: str, *, base_url: str | None = None, api_key: str | None = None, model: str | None = None) -> Endpoint:
    """Resolve a role: explicit arguments (a run's overrides) win over the role's settings,
    which fall back to the LLM_* defaults."""
    configured = settings.LLM_ROLES.get(role)
    if configured is None:
        known = ", ".join(sorted(settings.LLM_ROLES))
        raise KeyError(f"unknown LLM role {role!r}; known roles: {known}")
    return Endpoint(
        role=role,
        base_url=base_url if base_url is not None else configured["base_url"],
        api_key=api_key if api_key is not None else configured["api_key"],
        model=model if model is not None else configured["model"],
    )


def endpoint_require(role: str, **overrides: str | None) -> Endpoint:
    endpoint = endpoint_get(role, **overrides)
    if not endpoint.configured:
        raise EndpointNotConfigured(
            f"no LLM endpoint for role {role!r}: set LLM_BASE_URL and LLM_MODEL "
            "(or the role's own *_BASE_URL / *_MODEL variables)"
        )
    return endpoint


def endpoint_from_overrides(role: str, overrides: dict[str, str] | None) -> Endpoint:
    """A run's endpoint: its role's, with the run's ``base_url`` / ``model`` overrides and
    the API key read from the environment variable ``api_key_env`` names."""
    overrides = overrides or {}
    api_key = os.environ.get(overrides["api_key_env"], "") if overrides.get("api_key_env") else None
    return endpoint_require(role, base_url=overrides.get("base_url"), model=overrides.get("model"), api_key=api_key)
