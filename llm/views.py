"""Admin pages of the LLM layer: endpoints live, jobs (pause, resume, cancel), the ledger browser."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from core.app_errors import AppError
from core.confirm import refuse_unconfirmed
from core.errors import refusal_message
from core.permissions import admin_required
from llm.costs import job_costs
from llm.endpoints import normalized_url
from llm.models import EndpointRecord, LedgerEntry, LLMJob
from llm.run_lifecycle import job_owner_for, run_control
from llm.runs import retried_phrase, run_state
from llm.selectors import endpoint_stats, job_list, ledger_filter_choices, ledger_list


@dataclass(frozen=True)
class JobRow:
    """One row of the overview's job table: the job, the run that drives it ("" when none),
    its state as every run page shows it, and what it spent (llm/costs.py)."""

    job: LLMJob
    owner: str
    state: dict[str, Any]
    cost: dict[str, Any]


def _job_row(job: LLMJob, cost: dict[str, Any]) -> JobRow:
    owner = job_owner_for(job)
    return JobRow(
        job=job,
        owner=owner.describe(job) if owner else "",
        state=run_state(
            status=job.status, jobs=[job], reason=job.pause_reason or job.error, extra={"id": f"job-{job.pk}"}
        ),
        cost=cost,
    )


@admin_required
def overview(request: HttpRequest) -> HttpResponse:
    page = list(Paginator(job_list(), 20).get_page(request.GET.get("page")))
    costs = job_costs(page)
    jobs = [_job_row(job, costs[job.pk]) for job in page]
    endpoints = endpoint_stats()
    records = {(normalized_url(r.base_url), r.model): r for r in EndpointRecord.objects.filter(retired=False)}
    for row in endpoints:
        row["record"] = records.get((normalized_url(row["base_url"]), row["model"]))
    return render(request, "llm/overview.html", {"endpoints": endpoints, "jobs": jobs})


@admin_required
@require_POST
def job_action(request: HttpRequest, pk: int, action: str) -> HttpResponse:
    job = get_object_or_404(LLMJob, pk=pk)
    # The API's one entry point: a run's job is driven through its run (llm_job_control), so
    # the run stores the answers and its state follows the job's.
    owner = job_owner_for(job)
    if action not in ("pause", "resume", "retry", "cancel"):
        messages.error(request, f"Unknown action {action!r}.")
        return redirect("llm_overview")
    if action == "cancel":
        refusal = refuse_unconfirmed(request, what=f"LLM job {job.pk}", back_url=reverse("llm_overview"))
        if refusal is not None:
            return refusal
    try:
        n = run_control(job, action)
    except AppError as exc:
        refusal_message(request, exc)
    else:
        if action == "retry":
            messages.success(
                request,
                f"Job {job.pk}: {retried_phrase(n)}" + (f" through its {owner.describe(job)}." if owner else "."),
            )
        else:
            through = f" (through its {owner.describe(job)})" if owner else ""
            messages.success(request, f"Job {job.pk}: {action} requested{through}.")
    return redirect("llm_overview")


@admin_required
def ledger(request: HttpRequest) -> HttpResponse:
    filters = {name: request.GET.get(name, "") for name in ("run", "stage", "outcome", "model")}
    page = Paginator(ledger_list(**filters), 50).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    return render(
        request,
        "llm/ledger.html",
        {"page": page, "filters": filters, "choices": ledger_filter_choices(), "query": query.urlencode()},
    )


@admin_required
def ledger_entry(request: HttpRequest, pk: int) -> HttpResponse:
    return render(request, "llm/ledger_entry.html", {"entry": get_object_or_404(LedgerEntry, pk=pk)})
