"""Reads of endpoint records: the list with role assignments, and per role where its
endpoint comes from (a record, or which environment variables)."""

from __future__ import annotations

from django.conf import settings
from django.db.models import Prefetch, QuerySet
from django.urls import reverse

from llm.endpoint_services import role_env_sources
from llm.endpoints import normalized_url
from llm.models import EndpointRecord, EndpointRoleAssignment


def endpoint_record_list(*, include_retired: bool = True) -> QuerySet[EndpointRecord]:
    records = EndpointRecord.objects.prefetch_related(
        Prefetch("assignments", queryset=EndpointRoleAssignment.objects.order_by("role"))
    )
    return records if include_retired else records.filter(retired=False)


def role_endpoint_rows() -> list[dict]:
    """One row per role: the assigned record, or the environment variables that feed it;
    and, for a record seeded from (or shadowing) the environment, whether the environment
    now says something else (the record wins)."""
    assignments = {a.role: a.record for a in EndpointRoleAssignment.objects.select_related("record")}
    rows = []
    for role, configured in settings.LLM_ROLES.items():
        sources = role_env_sources(role)
        record = assignments.get(role)
        env_text = ", ".join(dict.fromkeys(sources[f] for f in ("base_url", "model")))
        row = {
            "role": role,
            "prefix": settings.LLM_ROLE_PREFIXES.get(role, ""),
            "record": record if record and not record.retired else None,
            "env_sources": sources,
            "env_configured": bool(configured["base_url"] and configured["model"]),
            "env_base_url": configured["base_url"],
            "env_model": configured["model"],
        }
        if row["record"] is not None:
            record = row["record"]
            row.update(
                base_url=record.base_url,
                model=record.model,
                api_key=record.api_key_label,
                source=f"endpoint record {record.name!r}",
                url=reverse("llm_endpoint_edit", args=[record.pk]),
            )
            differs = row["env_configured"] and (
                normalized_url(configured["base_url"]) != normalized_url(record.base_url)
                or configured["model"] != record.model
            )
            row["env_differs"] = (
                (
                    f"the environment ({env_text}) says {configured['base_url']} ({configured['model']}); "
                    "the record is used"
                )
                if differs
                else ""
            )
        else:
            row.update(
                base_url=configured["base_url"] or "(not configured)",
                model=configured["model"] or "(not configured)",
                api_key=f"from ${sources['api_key']}" if configured["api_key"] else "not set",
                source=f"environment: {env_text}"
                if row["env_configured"]
                else f"not configured: set {sources['base_url']} and {sources['model']}, or assign an endpoint record",
                url="",
                env_differs="",
            )
        rows.append(row)
    return rows


def capabilities_view(record: EndpointRecord) -> dict:
    """What has been learned of a record's endpoint, for its page and the API (llm/capabilities.py)."""
    from datetime import UTC, datetime

    from llm.capabilities import capabilities_get

    known = capabilities_get(record.base_url, record.model)
    context = record.context_length or known.context_length
    return {
        # None until something was learned (a Test, llm_check or a request): never a guess
        "structured_output": known.structured_output if known.learned_at else None,
        "rejected": dict(known.unsupported),
        "context_length": context,
        "context_source": "endpoint record" if record.context_length else known.context_source,
        "token_ratio": known.token_ratio,
        "seconds_per_token": known.seconds_per_token,
        "learned_at": datetime.fromtimestamp(known.learned_at, UTC).isoformat(timespec="seconds")
        if known.learned_at
        else None,
    }
