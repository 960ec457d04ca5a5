"""Reads of registered models: the list the Runs page and the API show, with where each is
served and how many runs used it."""

from __future__ import annotations

from django.db.models import Count, QuerySet

from judging.models import LanguageModel
from llm.endpoints import record_for_url


def language_model_list() -> QuerySet[LanguageModel]:
    return LanguageModel.objects.annotate(n_runs=Count("runs")).order_by("name")


def language_model_served_at(language_model: LanguageModel) -> str:
    """Where the model's requests go, in words: a base URL (and the endpoint record there)
    or the role whose endpoint is resolved when a run starts."""
    if language_model.base_url:
        record = record_for_url(language_model.base_url, language_model.model)
        at = f"endpoint record {record.name}" if record is not None else language_model.base_url
        return at
    return f"role {language_model.role}"
