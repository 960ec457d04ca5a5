"""The sampling parameters of a request (``temperature``, ``max_tokens``): one rule for every
place a request is built.

For each parameter the first value that is set wins:

1. the run's **explicit** option: what a person wrote for this run (a run configuration's
   ``temperature`` / ``max_tokens``, a mining stage's, a judge run's ``temperature``, a
   registered model's ``max_tokens`` that differs from the field's default);
2. the **role's setting**: ``<PREFIX>_TEMPERATURE`` / ``<PREFIX>_MAX_TOKENS`` of the role the
   request runs under (``JUDGE_MAX_TOKENS`` for ``how2score_judge``), else ``LLM_TEMPERATURE``
   / ``LLM_MAX_TOKENS`` (config/settings/llm.py; ``settings.LLM_ROLES[role]``);
3. the **built-in** default of the place: the papers' constants (greedy 0.0, 0.6 for
   reasoning models, the judge's 4096 tokens, the mining stages' budgets, CoScript's Table 11).

The values are resolved when the requests are built, so they are part of each request and of
its ledger key: a run whose settings change is asked again, never answered from another
run's cache. docs/llm.md ("Sampling parameters") lists what is explicit at each place."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.conf import settings

SAMPLING_KEYS = ("temperature", "max_tokens")


def role_sampling(role: str) -> dict[str, Any]:
    """The role's ``temperature`` and ``max_tokens`` from the environment (None: unset). An
    unknown role has the LLM_* defaults (its endpoint is refused where it is resolved)."""
    configured = settings.LLM_ROLES.get(role) or getattr(settings, "LLM_DEFAULT_ENDPOINT", {}) or {}
    return {key: configured.get(key) for key in SAMPLING_KEYS}


def sampling_params(
    role: str, *, explicit: Mapping[str, Any] | None = None, built_in: Mapping[str, Any]
) -> dict[str, Any]:
    """``temperature`` and ``max_tokens`` for a request of ``role``: ``explicit`` (the run's
    own options; a None value is not set) over the role's setting over ``built_in``. A key
    none of the three sets is left out (the client then sends LLM_DEFAULT_MAX_TOKENS)."""
    explicit = explicit or {}
    configured = role_sampling(role)
    params: dict[str, Any] = {}
    for key in SAMPLING_KEYS:
        for source in (explicit, configured, built_in):
            value = source.get(key)
            if value is not None:
                params[key] = value
                break
    return params
