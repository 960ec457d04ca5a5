"""Admin pages of the LLM layer: endpoints live, jobs (pause, resume, cancel), the ledger browser."""
from __future__ import annotations

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from core.permissions import admin_required
from llm.models import LedgerEntry, LLMJob
from llm.selectors import endpoint_stats, job_list, ledger_filter_choices, ledger_list
from llm.services import llm_job_cancel, llm_job_pause, llm_job_resume


@admin_required
def overview(request: HttpRequest) -> HttpResponse:
    jobs = Paginator(job_list(), 20).get_page(request.GET.get("page"))
    return render(request, "llm/overview.html", {"endpoints": endpoint_stats(), "jobs": jobs})


@admin_required
@require_POST
def job_action(request: HttpRequest, pk: int, action: str) -> HttpResponse:
    job = get_object_or_404(LLMJob, pk=pk)
    try:
        if action == "pause":
            llm_job_pause(job=job)
        elif action == "resume":
            llm_job_resume(job=job)
        elif action == "cancel":
            llm_job_cancel(job=job)
        else:
            messages.error(request, f"Unknown action {action!r}.")
            return redirect("llm_overview")
    except ValueError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Job {job.pk}: {action} requested.")
    return redirect("llm_overview")


@admin_required
def ledger(request: HttpRequest) -> HttpResponse:
    filters = {name: request.GET.get(name, "") for name in ("run", "stage", "outcome", "model")}
    page = Paginator(ledger_list(**filters), 50).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    return render(request, "llm/ledger.html", {"page": page, "filters": filters, "choices": ledger_filter_choices(),
                                                "query": query.urlencode()})


@admin_required
def ledger_entry(request: HttpRequest, pk: int) -> HttpResponse:
    return render(request, "llm/ledger_entry.html", {"entry": get_object_or_404(LedgerEntry, pk=pk)})
