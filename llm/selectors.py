"""Reads of the LLM layer: endpoint statistics, the ledger, jobs."""
from __future__ import annotations

from datetime import timedelta

from django.db.models import Avg, Count, Q, QuerySet, Sum
from django.utils import timezone

from llm.constants import OUTCOMES
from llm.limits import limits_get
from llm.models import LedgerEntry, LLMJob

RATE_WINDOW_MINUTES = 5


def endpoint_stats() -> list[dict]:
    """One row per (base URL, model): requests, outcome counts and error rate, recent rate,
    tokens, cost, mean latency, requests in flight and pause left after a 429."""
    since = timezone.now() - timedelta(minutes=RATE_WINDOW_MINUTES)
    outcome_counts = {f"n_{o}": Count("id", filter=Q(outcome=o)) for o in OUTCOMES}
    rows = (
        LedgerEntry.objects.values("base_url", "model")
        .annotate(
            n=Count("id"), n_recent=Count("id", filter=Q(created_at__gte=since)),
            tokens_in=Sum("tokens_in"), tokens_out=Sum("tokens_out"), cost=Sum("cost_usd"),
            latency=Avg("latency_ms"), **outcome_counts,
        )
        .order_by("base_url", "model")
    )
    limits = limits_get()
    result = []
    for row in rows:
        endpoint_id = f"{row['base_url']}|{row['model']}"
        row["per_minute"] = row["n_recent"] / RATE_WINDOW_MINUTES
        row["error_rate"] = (row["n"] - row["n_ok"]) / row["n"] if row["n"] else None
        row["in_flight"] = limits.in_flight(endpoint_id)
        row["paused_for"] = limits.paused_for(endpoint_id)
        result.append(row)
    return result


def ledger_list(*, run: str = "", stage: str = "", outcome: str = "", model: str = "") -> QuerySet[LedgerEntry]:
    queryset = LedgerEntry.objects.defer("request", "response", "response_text", "parsed").order_by("-id")
    if run:
        queryset = queryset.filter(run=run)
    if stage:
        queryset = queryset.filter(stage=stage)
    if outcome:
        queryset = queryset.filter(outcome=outcome)
    if model:
        queryset = queryset.filter(model=model)
    return queryset


def ledger_filter_choices() -> dict[str, list[str]]:
    return {
        "runs": list(LedgerEntry.objects.exclude(run="").values_list("run", flat=True).distinct().order_by("run")[:200]),
        "stages": list(LedgerEntry.objects.values_list("stage", flat=True).distinct().order_by("stage")),
        "models": list(LedgerEntry.objects.values_list("model", flat=True).distinct().order_by("model")),
        "outcomes": list(OUTCOMES),
    }


def run_costs(run: str) -> dict:
    """Cost, tokens and outcome counts of one run, per stage and in total."""
    entries = LedgerEntry.objects.filter(run=run)
    per_stage = list(entries.values("stage").annotate(n=Count("id"), cost=Sum("cost_usd"), tokens_in=Sum("tokens_in"),
                                                      tokens_out=Sum("tokens_out")).order_by("stage"))
    total = entries.aggregate(n=Count("id"), cost=Sum("cost_usd"), tokens_in=Sum("tokens_in"), tokens_out=Sum("tokens_out"))
    return {"run": run, "per_stage": per_stage, "total": total}


def job_list() -> QuerySet[LLMJob]:
    return LLMJob.objects.defer("requests", "keys").order_by("-id")


def ledger_outcomes(keys: list[str], chunk: int = 2000) -> dict[str, str]:
    """The outcome of each of ``keys`` that has a ledger entry (unfinished keys are left out)."""
    outcomes: dict[str, str] = {}
    for start in range(0, len(keys), chunk):
        outcomes.update(LedgerEntry.objects.filter(key__in=keys[start:start + chunk]).values_list("key", "outcome"))
    return outcomes


def llm_job_results(job: LLMJob) -> list:
    """The result of each of the job's requests, in order (None where nothing is finished yet)."""
    from llm.client import LLMResult

    entries = {e.key: e for e in LedgerEntry.objects.filter(key__in=job.keys)}
    return [LLMResult.from_entry(entries[k], cached=True) if k in entries else None for k in job.keys]
