"""Pages of the goal-step app: task sets with their build reports, a leaderboard per task
(each evaluation with its run state), and (admins) starting an evaluation, resuming it and
retrying its failed requests."""

from __future__ import annotations

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from core.app_errors import AppError
from core.errors import refusal_message
from core.permissions import admin_required, researcher_required
from goalstep.constants import TASKS
from goalstep.forms import TaskEvaluationForm
from goalstep.items import report_lines
from goalstep.models import TaskEvaluation, TaskSet
from goalstep.selectors import leaderboard, task_set_list
from goalstep.services import task_evaluation_create
from llm.run_lifecycle import run_control
from llm.runs import retried_phrase


@researcher_required
def task_set_index(request: HttpRequest) -> HttpResponse:
    return render(request, "goalstep/task_sets.html", {"task_sets": task_set_list()[:200], "tasks": TASKS})


@researcher_required
def task_set_detail(request: HttpRequest, pk: int) -> HttpResponse:
    task_set = get_object_or_404(TaskSet, pk=pk)
    return render(
        request,
        "goalstep/task_set.html",
        {
            "task_set": task_set,
            "report_lines": report_lines(task_set.report) if task_set.report else [],
            "items": task_set.items.order_by("position")[:50],
        },
    )


@researcher_required
def leaderboard_page(request: HttpRequest, task: str) -> HttpResponse:
    if task not in TASKS:
        raise Http404("unknown task")
    chosen = request.GET.get("set")
    board = leaderboard(task, task_set_id=int(chosen) if chosen and chosen.isdigit() else None)
    form = TaskEvaluationForm(initial={"task_set": board["task_set"]})
    return render(request, "goalstep/leaderboard.html", {**board, "tasks": TASKS, "form": form})


@admin_required
@require_POST
def evaluation_launch(request: HttpRequest) -> HttpResponse:
    form = TaskEvaluationForm(request.POST)
    if not form.is_valid():
        messages.error(
            request,
            "The evaluation was not started: "
            + "; ".join(
                f"{field}: {' '.join(str(error) for error in errors)}" for field, errors in form.errors.items()
            ),
        )
        return redirect("goalstep_task_sets")
    data = form.cleaned_data
    try:
        task_evaluation_create(
            task_set=data["task_set"],
            language_model=data["language_model"],
            prompt_file=data["prompt_file"] or None,
            executor=data["executor"],
            concurrency=data["concurrency"],
        )
    except AppError as exc:
        refusal_message(request, exc, "The evaluation was not started: ")
    else:
        messages.success(request, f"Evaluation of {data['language_model'].name} started.")
    task_set = data["task_set"]
    return redirect(f"{reverse('goalstep_leaderboard', args=[task_set.task])}?set={task_set.pk}")


@admin_required
@require_POST
def evaluation_action(request: HttpRequest, pk: int, action: str) -> HttpResponse:
    """*Retry failed* (exactly the requests without an ok answer) or *Resume* (a paused or
    failed evaluation) of one evaluation; back to its leaderboard."""
    if action not in ("retry", "resume"):
        return HttpResponseBadRequest("unknown action: retry or resume")
    evaluation = get_object_or_404(
        TaskEvaluation.objects.select_related("llm_job", "task_set", "language_model"), pk=pk
    )
    task_set = evaluation.task_set
    back = f"{reverse('goalstep_leaderboard', args=[task_set.task])}?set={task_set.pk}"
    try:
        n = run_control(evaluation, action)  # the API's one entry point, and its refusals
    except AppError as exc:
        refusal_message(request, exc)
    else:
        messages.success(
            request,
            f"{evaluation}: {retried_phrase(n)}." if action == "retry" else f"{evaluation}: resume requested.",
        )
    return redirect(back)
