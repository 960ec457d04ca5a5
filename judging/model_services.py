"""Registering models for generation runs from the Runs page and the API: a name, where the
model is served (an LLM role, whose endpoint record or environment variables are resolved
when a run starts, or one endpoint record), the model id, prompt style, reasoning and
max tokens (How2Everything App. D.1). Refused input raises ModelFieldError naming the field."""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings
from django.db import transaction

from core.field_errors import FieldErrors, text_field_clean
from core.stored_values import max_length_of
from judging.models import LanguageModel, PromptStyle
from llm.models import EndpointRecord

MAX_TOKENS_LIMIT = 1_000_000
ROLE_PREFIX = "role:"
RECORD_PREFIX = "record:"


class ModelFieldError(FieldErrors):
    """Refused model registration: ``errors`` maps each field to what is wrong with it."""


def endpoint_choices() -> list[tuple[str, str]]:
    """Where a model can be served: each LLM role (its endpoint is resolved when a run
    starts) and each live endpoint record."""
    choices = [
        (f"{ROLE_PREFIX}{role}", f"role {role} (its endpoint when the run starts)") for role in settings.LLM_ROLES
    ]
    choices += [
        (f"{RECORD_PREFIX}{r.pk}", f"endpoint record {r.name} ({r.base_url})")
        for r in EndpointRecord.objects.filter(retired=False).order_by("name")
    ]
    return choices


@transaction.atomic
def language_model_create(
    *,
    name: Any,
    endpoint: Any = f"{ROLE_PREFIX}generate",
    model: Any = "",
    prompt_style: Any = PromptStyle.INST,
    reasoning: Any = False,
    max_tokens: Any = 1024,
) -> LanguageModel:
    """Register a new model. ``endpoint`` is ``role:<role>`` or ``record:<id>``; with a record
    the model is sent to the record's base URL (with its key, limits and prices), with a role
    to whatever the role resolves to when a run starts. An empty ``model`` means the
    endpoint's own model."""
    errors: dict[str, str] = {}
    name = text_field_clean(errors, "name", name, max_length=max_length_of(LanguageModel, "name"), required=True)
    model = text_field_clean(errors, "model", model, max_length=max_length_of(LanguageModel, "model"))
    endpoint = text_field_clean(errors, "endpoint", endpoint, max_length=120, required=True)
    if prompt_style not in PromptStyle.values:
        errors["prompt_style"] = f"must be one of {', '.join(PromptStyle.values)}"
    if not isinstance(reasoning, bool):
        errors["reasoning"] = "must be true or false"
    tokens = None
    if isinstance(max_tokens, int) and not isinstance(max_tokens, bool):
        tokens = max_tokens
    elif isinstance(max_tokens, str) and re.fullmatch(r"[0-9]{1,9}", max_tokens.strip()):
        tokens = int(max_tokens.strip())
    if tokens is None or not 1 <= tokens <= MAX_TOKENS_LIMIT:
        errors["max_tokens"] = f"must be a whole number from 1 to {MAX_TOKENS_LIMIT}"
    fields: dict[str, Any] = {"role": "generate", "base_url": "", "api_key_env": ""}
    if "endpoint" not in errors:
        if endpoint.startswith(ROLE_PREFIX) and endpoint[len(ROLE_PREFIX) :] in settings.LLM_ROLES:
            fields["role"] = endpoint[len(ROLE_PREFIX) :]
        elif endpoint.startswith(RECORD_PREFIX) and endpoint[len(RECORD_PREFIX) :].isdigit() and len(endpoint) < 30:
            record = EndpointRecord.objects.filter(pk=int(endpoint[len(RECORD_PREFIX) :]), retired=False).first()
            if record is None:
                errors["endpoint"] = "no such live endpoint record"
            else:
                fields["base_url"] = record.base_url
                model = model or record.model
        else:
            errors["endpoint"] = "must be role:<an LLM role> or record:<an endpoint record's id>"
    if "name" not in errors and LanguageModel.objects.filter(name=name).exists():
        errors["name"] = "a model with this name is registered already"
    if errors or tokens is None:  # a missing max_tokens is one of the errors
        raise ModelFieldError(errors)
    return LanguageModel.objects.create(
        name=name, model=model, prompt_style=prompt_style, reasoning=reasoning, max_tokens=tokens, **fields
    )
