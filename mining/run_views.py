"""Pages of mining runs: the list, the launch form (admins), the live run page with the
funnel, costs and errors, the rejected-documents browser, and one document's stages."""

from __future__ import annotations

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from core.app_errors import AppError
from core.confirm import refuse_unconfirmed
from core.errors import refusal_message
from core.permissions import admin_required, researcher_required
from core.roles import is_admin
from core.run_configs import RunConfigError
from llm.run_lifecycle import run_control
from mining.charts import mining_funnel_chart
from mining.forms import DEFAULT_RUN_CONFIG, MiningRunForm
from mining.models import CandidateStatus, MiningRun
from mining.run_selectors import (
    mining_candidate_get,
    mining_candidate_list,
    mining_run_list_states,
    mining_run_progress,
    mining_run_state,
    stage_result_list,
)
from mining.run_services import mining_run_create, mining_run_update_stages
from mining.stages import PIPELINE

PAGE_SIZE = 25
ACTIVE = ("pending", "running")


@researcher_required
def mining_run_index(request: HttpRequest) -> HttpResponse:
    form = MiningRunForm(initial={"config": DEFAULT_RUN_CONFIG}) if is_admin(request.user) else None
    return render(request, "mining/run_list.html", {"runs": mining_run_list_states(), "form": form})


@admin_required
@require_POST
def mining_run_launch(request: HttpRequest) -> HttpResponse:
    form = MiningRunForm(request.POST)
    if not form.is_valid():
        return render(request, "mining/run_list.html", {"runs": mining_run_list_states(), "form": form}, status=400)
    try:
        run = mining_run_create(
            config_text=form.cleaned_data["config"],
            source="the configuration",
            corpus_name=form.cleaned_data["corpus"].name,
            created_by=request.user.get_username(),
        )
    except RunConfigError as exc:
        form.add_error("config", str(exc))
        return render(request, "mining/run_list.html", {"runs": mining_run_list_states(), "form": form}, status=400)
    messages.success(request, f"Mining run {run.name!r} started.")
    return redirect("mining_run_detail", pk=run.pk)


@researcher_required
def mining_run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(MiningRun.objects.select_related("corpus"), pk=pk)
    progress = mining_run_progress(run)
    return render(
        request,
        "mining/run_detail.html",
        {
            "run": run,
            "progress": progress,
            "state": mining_run_state(run),
            "active": run.status in ACTIVE,
            "chart": mining_funnel_chart(progress["funnel"], progress["totals"]["sampled"]),
            "stage_form": MiningRunForm(initial={"corpus": run.corpus, "config": run.config.get("source_text", "")}),
        },
    )


@admin_required
@require_POST
def mining_run_action(request: HttpRequest, pk: int, action: str) -> HttpResponse:
    """Pause, resume, cancel or *Retry failed* (``retry-failures``) through the one entry
    point the API calls (``run_control``), refused with the API's words."""
    run = get_object_or_404(MiningRun, pk=pk)
    if action not in ("pause", "resume", "cancel", "retry-failures"):
        return HttpResponseBadRequest("unknown action")
    if action == "cancel":
        refusal = refuse_unconfirmed(
            request, what=f"mining run {run.name}", back_url=reverse("mining_run_detail", args=[run.pk])
        )
        if refusal is not None:
            return refusal
    try:
        result = run_control(run, action)
    except AppError as exc:
        refusal_message(request, exc)
    else:
        done = f"{result} failed documents queued again" if action == "retry-failures" else f"{action} requested"
        messages.success(request, f"{run.name}: {done}.")
    return redirect("mining_run_detail", pk=run.pk)


@admin_required
@require_POST
def mining_run_change_stages(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(MiningRun, pk=pk)
    try:
        report = mining_run_update_stages(
            run=run, config_text=request.POST.get("config", ""), source="the configuration"
        )
    except RunConfigError as exc:
        messages.error(request, f"Nothing changed: {exc}")
    else:
        changed = ", ".join(report["changed_stages"]) or "no stage"
        messages.success(
            request,
            f"{run.name}: {changed} changed; {report['documents_rewalked']} documents are "
            "walked again (unchanged stages keep their results).",
        )
    return redirect("mining_run_detail", pk=run.pk)


@researcher_required
def mining_run_documents(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(MiningRun, pk=pk)
    filters = {key: request.GET.get(key, "") for key in ("status", "stage", "topic", "q")}
    if "status" not in request.GET:
        filters["status"] = CandidateStatus.REJECTED
    page = Paginator(mining_candidate_list(run=run, **filters), PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    query["status"] = filters["status"]
    return render(
        request,
        "mining/run_documents.html",
        {
            "run": run,
            "page": page,
            "filters": filters,
            "query": query.urlencode(),
            "stages": PIPELINE,
            "statuses": CandidateStatus.choices,
            "topics": run.topics.order_by("position", "name"),
        },
    )


@researcher_required
def mining_run_document(request: HttpRequest, pk: int, candidate_pk: int) -> HttpResponse:
    run = get_object_or_404(MiningRun, pk=pk)
    candidate = mining_candidate_get(run=run, pk=candidate_pk)
    if candidate is None:
        return render(request, "404.html", status=404)
    return render(
        request,
        "mining/run_document.html",
        {"run": run, "candidate": candidate, "results": stage_result_list(candidate=candidate)},
    )
