"""Pages of constrained planning (CoScript): the run list with the launch form and the
constrained slice's How2Score, a run's page (phases, report, goals and candidates, filter
again, export, add to the benchmark), and the sensitive-domain review list."""

from __future__ import annotations

import json

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from core.app_errors import AppError
from core.confirm import refuse_unconfirmed
from core.errors import refusal_message
from core.intervals import share_estimate
from core.permissions import admin_required, researcher_required
from coscript.forms import CoScriptRunForm, ExportForm, GoalFilterForm, RefilterForm
from coscript.models import CoScriptRun, Review, SpecificGoal
from coscript.phase_services import coscript_run_filter
from coscript.result_services import coscript_add_to_benchmark, export_records, specific_goal_review
from coscript.run_services import (
    coscript_run_create,
    coscript_run_resume,
)
from coscript.selectors import (
    constrained_how2score,
    coscript_run_detail,
    coscript_run_list,
    coscript_run_state,
    review_list,
    run_kept_rate,
    sibling_goals,
    specific_goal_list,
)
from judging.constants import LEADERBOARD_MIN_COVERAGE
from llm.endpoints import EndpointNotConfigured, UnknownLLMRole
from llm.prompts import PromptError
from llm.run_lifecycle import run_action_check, run_control
from llm.runs import retried_phrase

GOALS_PER_PAGE = 25
REVIEWED_SHOWN = 200


def _index(request: HttpRequest, form: CoScriptRunForm, status: int = 200) -> HttpResponse:
    # Each run with its kept rate and the counts its phases' jobs stored.
    runs = [(run, run_kept_rate(run), coscript_run_state(run, live=False)) for run in coscript_run_list()[:200]]
    return render(
        request,
        "coscript/run_list.html",
        {
            "runs": runs,
            "form": form,
            "slice": constrained_how2score(),
            "min_coverage": LEADERBOARD_MIN_COVERAGE,
            "n_pending_review": SpecificGoal.objects.filter(review=Review.PENDING).count(),
        },
        status=status,
    )


@researcher_required
def coscript_index(request: HttpRequest) -> HttpResponse:
    return _index(request, CoScriptRunForm())


@admin_required  # runs spend money on LLM calls: admins launch them, as mining and generation runs
@require_POST
def coscript_run_launch(request: HttpRequest) -> HttpResponse:
    """Create a run from the form; every refusal is shown beside its field and stores nothing."""
    form = CoScriptRunForm(request.POST)
    if not form.is_valid():
        return _index(request, form, status=400)
    data = form.cleaned_data
    try:
        run = coscript_run_create(
            name=data["name"],
            language_model=data["language_model"],
            split=data["split"],
            limit=data["limit"],
            seed=data["seed"],
            k=data["k"],
            filter_mode=data["filter_mode"],
            keyword_bonus=data["keyword_bonus"],
            screen=data["screen"],
            executor=data["executor"],
            concurrency=data["concurrency"],
            budget_usd=data["budget_usd"],
            created_by=request.user,
        )
    except EndpointNotConfigured as exc:
        form.add_error("language_model", f"{exc}")
        return _index(request, form, status=400)
    except UnknownLLMRole as exc:  # the model names an LLM role the settings do not define
        form.add_error("language_model", exc.message)
        return _index(request, form, status=400)
    except PromptError as exc:
        form.add_error(None, f"A prompt file is not usable: {exc}")
        return _index(request, form, status=400)
    except AppError as exc:
        form.add_service_error(str(exc))
        return _index(request, form, status=400)
    messages.success(request, f"CoScript run {run.name!r} started: {len(run.abstract_ids)} abstract goals.")
    return redirect("coscript_run_detail", pk=run.pk)


@researcher_required
def coscript_run_page(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(
        CoScriptRun.objects.select_related("language_model", "created_by", "goals_job", "screen_job", "scripts_job"),
        pk=pk,
    )
    # The goal filters are checked as the API checks them: a bad value is named and the page
    # answers 400, its table filtered by the other filters only.
    filters = GoalFilterForm(request.GET)
    filters.is_valid()
    chosen = filters.cleaned_data  # the fields that are valid
    filter_errors = [f"{name}: {' '.join(str(p) for p in problems)}" for name, problems in filters.errors.items()]
    goals = specific_goal_list(
        run=run,
        constraint_type=chosen.get("constraint_type", ""),
        kept=chosen.get("kept", ""),
        review=chosen.get("review", ""),
        q=chosen.get("q", ""),
    )
    page = Paginator(goals, GOALS_PER_PAGE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    return render(
        request,
        "coscript/run_detail.html",
        {
            **coscript_run_detail(run),
            "page": page,
            "siblings": sibling_goals(list(page)),
            "filters": filters,
            "filter_errors": filter_errors,
            "query": query.urlencode(),
            "export_form": ExportForm(),
            "refilter_form": RefilterForm(initial={"mode": run.filter_mode, "keyword_bonus": run.keyword_bonus}),
        },
        status=400 if filter_errors else 200,
    )


@admin_required
@require_POST
def coscript_run_action(request: HttpRequest, pk: int, action: str) -> HttpResponse:
    """Cancel, resume or *Retry failed* through the one entry point the API calls
    (``run_control``), refused with the API's words; *Resume without errors* (the page's own,
    a resume that accepts the stopped phase's failures) is refused by the same check."""
    run = get_object_or_404(CoScriptRun, pk=pk)
    if action not in ("cancel", "resume", "resume-without-errors", "retry-failed"):
        return HttpResponseBadRequest("unknown action")
    if action == "cancel":
        refusal = refuse_unconfirmed(
            request, what=f"CoScript run {run.name}", back_url=reverse("coscript_run_detail", args=[run.pk])
        )
        if refusal is not None:
            return refusal
    try:
        if action == "resume-without-errors":
            run_action_check(run, "resume")
            coscript_run_resume(run=run, without_errors=True)
            asked_again = 0
        else:
            asked_again = run_control(run, action)
    except AppError as exc:
        refusal_message(request, exc)
    else:
        messages.success(
            request,
            f"{run.name}: {retried_phrase(asked_again)}."
            if action == "retry-failed"
            else f"{run.name}: {action.replace('-', ' ')} requested.",
        )
    return redirect("coscript_run_detail", pk=run.pk)


@researcher_required
@require_POST
def coscript_run_refilter(request: HttpRequest, pk: int) -> HttpResponse:
    """Filter the run's candidates again with another mode or bonus (no model call; the
    embedding model loads in this process)."""
    run = get_object_or_404(CoScriptRun.objects.select_related("language_model"), pk=pk)
    form = RefilterForm(request.POST)
    if not form.is_valid():
        messages.error(
            request,
            "Not filtered again: "
            + "; ".join(
                f"{field}: {' '.join(str(error) for error in errors)}" for field, errors in form.errors.items()
            ),
        )
        return redirect("coscript_run_detail", pk=run.pk)
    try:
        report = coscript_run_filter(
            run=run, mode=form.cleaned_data["mode"], keyword_bonus=form.cleaned_data["keyword_bonus"]
        )
    except AppError as exc:  # a mode it cannot use, or its embedding model missing
        refusal_message(request, exc, "Not filtered again: ")
    else:
        total = report["total"]
        kept = share_estimate(total["kept"], total["candidates"])
        rate = (
            "—"
            if kept["share"] is None
            else (f"{100 * kept['share']:.1f} %, 95 % Wilson {100 * kept['ci95'][0]:.1f}–{100 * kept['ci95'][1]:.1f} %")
        )
        messages.success(
            request,
            f"Filtered again ({report['mode']}, bonus {report['keyword_bonus']}): "
            f"{total['kept']} of {total['candidates']} candidates kept ({rate}).",
        )
    return redirect(f"{reverse('coscript_run_detail', args=[run.pk])}#report")


@researcher_required
def coscript_run_export(request: HttpRequest, pk: int) -> HttpResponse:
    """The run's scripts as JSONL in the constraint-faithfulness study's input shape, as a download."""
    run = get_object_or_404(CoScriptRun.objects.select_related("language_model"), pk=pk)
    form = ExportForm(request.GET)
    if not form.is_valid():
        return HttpResponseBadRequest("candidates must be one of selected, kept, all")
    candidates = form.cleaned_data["candidates"]
    body = "".join(
        json.dumps(record, ensure_ascii=False) + "\n" for record in export_records(run, candidates=candidates)
    )
    response = HttpResponse(body.encode("utf-8"), content_type="application/x-ndjson; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="coscript-run-{run.pk}-{candidates}.jsonl"'
    return response


@admin_required  # it changes the benchmark
@require_POST
def coscript_run_benchmark(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(CoScriptRun.objects.select_related("language_model"), pk=pk)
    try:
        counts = coscript_add_to_benchmark(run=run)
    except AppError as exc:
        refusal_message(request, exc)
    else:
        labels = {
            "added": "added",
            "already_added": "already in the benchmark",
            "held_by_review": "held by the review",
            "no_topic": "without a topic",
        }
        parts = [f"{counts.get(key, 0)} {label}" for key, label in labels.items() if counts.get(key) or key == "added"]
        messages.success(request, "Constrained split: " + ", ".join(parts) + ".")
    return redirect("coscript_run_detail", pk=run.pk)


@researcher_required
def coscript_review(request: HttpRequest) -> HttpResponse:
    lists = review_list()
    return render(
        request,
        "coscript/review.html",
        {
            "pending": lists["pending"],
            "reviewed": lists["reviewed"][:REVIEWED_SHOWN],
            "n_reviewed": lists["reviewed"].count(),
        },
    )


@researcher_required
@require_POST
def coscript_review_decide(request: HttpRequest, pk: int) -> HttpResponse:
    goal = get_object_or_404(SpecificGoal, pk=pk)
    decision = request.POST.get("decision", "")
    try:
        specific_goal_review(goal=goal, decision=decision, user=request.user)
    except AppError as exc:
        refusal_message(request, exc)
    else:
        verb = "approved" if decision == Review.APPROVED else "removed"
        messages.success(request, f"“{goal.specific_goal}” {verb}.")
    target = request.POST.get("next", "")
    if target.startswith("/coscript/") and "//" not in target:
        return redirect(target)
    return redirect("coscript_review")
