"""Reads of the LLM layer: endpoint statistics, the ledger, jobs."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.db.models import Avg, Count, Q, QuerySet, Sum
from django.utils import timezone

from llm.constants import OUTCOME_OK, OUTCOMES
from llm.limits import limits_get
from llm.models import LedgerEntry, LLMJob

if TYPE_CHECKING:
    from llm.request import LLMResult

RATE_WINDOW_MINUTES = 5


def endpoint_stats() -> list[dict[str, Any]]:
    """One row per (base URL, model): requests, outcome counts and error rate, recent rate,
    tokens, cost, mean latency, requests in flight and pause left after a 429."""
    since = timezone.now() - timedelta(minutes=RATE_WINDOW_MINUTES)
    outcome_counts = {f"n_{o}": Count("id", filter=Q(outcome=o)) for o in OUTCOMES}
    rows = (
        LedgerEntry.objects.values("base_url", "model")
        .annotate(
            n=Count("id"),
            n_recent=Count("id", filter=Q(created_at__gte=since)),
            tokens_in=Sum("tokens_in"),
            tokens_out=Sum("tokens_out"),
            cost=Sum("cost_usd"),
            latency=Avg("latency_ms"),
            **outcome_counts,
        )
        .order_by("base_url", "model")
    )
    limits = limits_get()
    result = []
    for counted in rows:
        # The outcome counts are named at run time (n_ok, n_parse_failed, ...): a plain dict.
        row: dict[str, Any] = dict(counted)
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
        "runs": list(
            LedgerEntry.objects.exclude(run="").values_list("run", flat=True).distinct().order_by("run")[:200]
        ),
        "stages": list(LedgerEntry.objects.values_list("stage", flat=True).distinct().order_by("stage")),
        "models": list(LedgerEntry.objects.values_list("model", flat=True).distinct().order_by("model")),
        "outcomes": list(OUTCOMES),
    }


def run_costs(run: str) -> dict:
    """Cost, tokens and outcome counts of one run, per stage and in total."""
    entries = LedgerEntry.objects.filter(run=run)
    per_stage = list(
        entries.values("stage")
        .annotate(n=Count("id"), cost=Sum("cost_usd"), tokens_in=Sum("tokens_in"), tokens_out=Sum("tokens_out"))
        .order_by("stage")
    )
    total = entries.aggregate(
        n=Count("id"), cost=Sum("cost_usd"), tokens_in=Sum("tokens_in"), tokens_out=Sum("tokens_out")
    )
    return {"run": run, "per_stage": per_stage, "total": total}


def job_list() -> QuerySet[LLMJob]:
    """Jobs as the LLM page lists them: a run's job cut into shards is one row (its shards,
    with their workers, are on the run's page)."""
    return LLMJob.objects.filter(parent__isnull=True).defer("requests", "keys").order_by("-id")


def ledger_own(run: str) -> Q:
    """Which ledger entries are outcomes of the run labelled ``run`` (one mechanism for every
    count of a run's requests): an ``ok`` answer whoever paid for it (an answer serves every
    caller that asks the very same request: counted ``ok``, from the cache), and the run's own
    failures. Another caller's failure with the same key (the reward endpoint, another run) is
    not the run's: until the run asks that request itself, it is pending for the run."""
    return Q(outcome=OUTCOME_OK) | Q(run=run)


def ledger_replaced_own(keys: list[str], *, run: str, chunk: int = 2000) -> dict[str, tuple[str, str]]:
    """Among ``keys`` whose entry is another caller's failure: the run's own failure that the
    other caller's later attempt replaced (kept in the entry's ``history`` by ``ledger_write``),
    as key -> (outcome, error). Usually none: one query per chunk that finds nothing."""
    found: dict[str, tuple[str, str]] = {}
    for start in range(0, len(keys), chunk):
        rows = (
            LedgerEntry.objects.filter(key__in=keys[start : start + chunk])
            .exclude(ledger_own(run))
            .values_list("key", "history")
        )
        for key, history in rows:
            own = next((item for item in reversed(history or []) if item.get("run") == run), None)
            if own is not None:
                found[key] = (own.get("outcome") or "", own.get("error") or "")
    return found


def ledger_run_outcomes(keys: list[str], *, run: str, chunk: int = 2000) -> dict[str, tuple[str, str]]:
    """The outcome and error of each of ``keys`` that the run labelled ``run`` has an outcome
    for (``ledger_own``; a key left out is pending for the run)."""
    keys = list(dict.fromkeys(keys))
    outcomes: dict[str, tuple[str, str]] = {}
    for start in range(0, len(keys), chunk):
        rows = LedgerEntry.objects.filter(ledger_own(run), key__in=keys[start : start + chunk])
        outcomes.update((key, (outcome, error)) for key, outcome, error in rows.values_list("key", "outcome", "error"))
    outcomes.update(ledger_replaced_own(keys, run=run, chunk=chunk))
    return outcomes


RESULT_FIELDS = (
    "key",
    "stage",
    "outcome",
    "parsed",
    "response_text",
    "path",
    "attempts",
    "tokens_in",
    "tokens_out",
    "latency_ms",
    "cost_usd",
    "error",
    "finish_reason",
)


def ledger_ok_results(keys: list[str], chunk: int = 2000, *, present: set[str] | None = None) -> dict[str, LLMResult]:
    """The ``ok`` ledger entries among ``keys`` as results (key -> LLMResult, cached), read in
    bounded chunks with only the columns a result holds (a failure is never an answer).
    ``present``, when given, receives every key that has an entry, ``ok`` or not, read in the
    same queries: what ``ledger_write_many(..., present=...)`` needs to know before it writes
    answers to the keys that had none."""
    from llm.request import LLMResult

    found: dict[str, LLMResult] = {}
    for start in range(0, len(keys), chunk):
        entries = LedgerEntry.objects.filter(key__in=keys[start : start + chunk]).order_by()  # into a dict: no sort
        if present is None:
            entries = entries.filter(outcome=OUTCOME_OK)
        for entry in entries.only(*RESULT_FIELDS):
            if present is not None:
                present.add(entry.key)
            if entry.outcome == OUTCOME_OK:
                found[entry.key] = LLMResult.from_entry(entry, cached=True)
    return found


def llm_job_results(job: LLMJob, keys: list[str] | None = None) -> list:
    """The result of each of the job's requests (or of ``keys``, some of them), in order (None
    where nothing is finished yet, or where the entry is another caller's failure: not the
    run's answer, ``ledger_own``)."""
    from llm.request import LLMResult

    keys = job.keys if keys is None else keys
    # Only what a result holds: not the request, the raw response or the history (a judge's
    # request alone is ~14 kB, and a run reads thousands).
    entries = {e.key: e for e in LedgerEntry.objects.filter(ledger_own(job.run), key__in=keys).only(*RESULT_FIELDS)}
    return [LLMResult.from_entry(entries[k], cached=True) if k in entries else None for k in keys]
