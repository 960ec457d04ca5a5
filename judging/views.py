"""Pages of the judging app: leaderboard, cross-judge rankings, runs (launch, watch, pause)."""

from __future__ import annotations

from typing import Any, cast

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from core.app_errors import AppError
from core.confirm import refuse_unconfirmed
from core.errors import refusal_message
from core.intervals import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED
from core.permissions import admin_required, researcher_required
from judging.calibration import HUMAN_MAJORITY, HUMAN_SOURCES
from judging.charts import how2score_bars, topic_heatmap
from judging.constants import LEADERBOARD_MIN_COVERAGE
from judging.coverage import BASIS_COMMON
from judging.cross_judge_selectors import cross_judge_rankings
from judging.forms import GenerationRunForm, JudgeRunForm
from judging.leaderboard_apis import CompareQuerySerializer, LeaderboardQuerySerializer
from judging.leaderboard_selectors import STEP_COUNT_SLICES, leaderboard_ranking, model_comparison
from judging.model_forms import LanguageModelRegisterForm
from judging.model_views import language_model_rows
from judging.models import ComponentsRun, GenerationRun, JudgeRun, StepParser
from judging.score_selectors import generation_run_score
from judging.score_services import components_run_create
from judging.selectors import generation_run_list, generation_run_rows, judge_names, judge_run_score, judged_splits
from judging.services import generation_run_create, judge_run_create
from llm.costs import job_cost, job_costs
from llm.run_lifecycle import run_control
from llm.runs import owned_run_state, retried_phrase
from mining.models import Split


def _split_label(split: str) -> str:
    return Split(split).label if split in Split.values else split


def _slice_heading(split: str) -> str:
    """What the leaderboard pages call the slice they show."""
    if not split:
        return "all splits"
    if split == Split.BENCH:
        return "How2Bench"
    if split == Split.CONSTRAINED:
        return "the constrained slice (CoScript)"
    return _split_label(split)


def _chosen_split(request: HttpRequest, offered: list[str]) -> tuple[str, str]:
    """The ``split`` of the query string when it is one of ``offered``; an unknown one is
    returned second (the page names it and shows all splits)."""
    split = request.GET.get("split", "")
    if split and split not in offered:
        return "", split
    return split, ""


def _p_text(p: float | None) -> str:
    """A p-value as a page shows it: three significant digits, or "< 0.0001"."""
    if p is None:
        return "—"
    return "< 0.0001" if p < 1e-4 else f"{p:.3g}"


def _query_errors(serializer) -> list[str]:
    """A query serializer's errors as sentences that name the field."""
    return [f"{field}: {' '.join(str(m) for m in messages_)}" for field, messages_ in serializer.errors.items()]


@researcher_required
def leaderboard_page(request: HttpRequest) -> HttpResponse:
    judges = judge_names()
    judge = request.GET.get("judge") or (judges[0] if judges else "")
    splits = judged_splits(judge) if judge else []
    split, unknown_split = _chosen_split(request, splits)
    # basis and min_coverage are checked as the API checks them; a bad value is named and the page answers 400.
    query = LeaderboardQuerySerializer(
        data={key: request.GET[key] for key in ("basis", "min_coverage", "human") if request.GET.get(key, "") != ""}
    )
    errors = [] if query.is_valid() else _query_errors(query)
    if judge and judge not in judges:
        errors.append(f"judge: no judgments by a judge named {judge!r}")
        judge = ""
    options: dict[str, Any] = (
        dict(query.validated_data)
        if query.is_valid()
        else {"basis": BASIS_COMMON, "min_coverage": LEADERBOARD_MIN_COVERAGE, "human": HUMAN_MAJORITY}
    )
    board = (
        leaderboard_ranking(
            judge,
            split or None,
            basis=options["basis"],
            min_coverage=options["min_coverage"],
            human_source=options["human"],
        )
        if judge
        else None
    )
    rows = board["rows"] if board else []
    comparison = None
    if judge and (request.GET.get("a") or request.GET.get("b")):
        compare = CompareQuerySerializer(
            data={"judge": judge, "split": split, "a": request.GET.get("a", ""), "b": request.GET.get("b", "")}
        )
        if compare.is_valid():
            data = compare.validated_data
            comparison = model_comparison(judge, data["a"], data["b"], split or None)
        else:
            errors += _query_errors(compare)
    return render(
        request,
        "judging/leaderboard.html",
        {
            "judges": judges,
            "judge": judge,
            "rows": rows,
            "board": board,
            "splits": [(s, _split_label(s)) for s in splits],
            "split": split,
            "split_label": _split_label(split),
            "slice_heading": _slice_heading(split),
            "unknown_split": unknown_split,
            "query_errors": errors,
            "comparison": comparison,
            "p_text": _p_text(comparison["p_value"]) if comparison else "",
            "p_adjusted_text": _p_text(comparison["p_adjusted"]) if comparison else "",
            "compare_a": request.GET.get("a", ""),
            "compare_b": request.GET.get("b", ""),
            "bootstrap_resamples": BOOTSTRAP_RESAMPLES,
            "human_sources": HUMAN_SOURCES,
            "human_source_text": HUMAN_SOURCES[options["human"]],
            "bootstrap_seed": BOOTSTRAP_SEED,
            "slices": [f"{lo}-{hi}" for lo, hi in STEP_COUNT_SLICES],
            "bars": how2score_bars(rows) if rows else "",
            "heatmap": topic_heatmap(rows) if rows else "",
        },
        status=400 if errors else 200,
    )


@researcher_required
def cross_judge_page(request: HttpRequest) -> HttpResponse:
    available = judge_names()
    chosen = [j for j in request.GET.getlist("judge") if j in available] or available
    splits = judged_splits()
    split, unknown_split = _chosen_split(request, splits)
    return render(
        request,
        "judging/cross_judge.html",
        {
            "available": available,
            "chosen": chosen,
            "rankings": cross_judge_rankings(chosen, split or None),
            "bootstrap_resamples": BOOTSTRAP_RESAMPLES,
            "bootstrap_seed": BOOTSTRAP_SEED,
            "splits": [(s, _split_label(s)) for s in splits],
            "split": split,
            "slice_heading": _slice_heading(split),
            "unknown_split": unknown_split,
        },
    )


@researcher_required
def run_list(request: HttpRequest) -> HttpResponse:
    runs = list(generation_run_list()[:200])
    costs = job_costs((run.llm_job for run in runs), exact=False)
    for run in runs:
        run.state = owned_run_state(run, live=False) if run.llm_job else None  # type: ignore[attr-defined]  # the state shown beside the run, for the template
        run.cost = costs[run.llm_job_id] if run.llm_job_id else None  # type: ignore[attr-defined]  # what it spent (None: no job), for the template
    return render(
        request,
        "judging/run_list.html",
        {
            "runs": runs,
            "generation_form": GenerationRunForm(),
            "judge_form": JudgeRunForm(),
            "model_form": LanguageModelRegisterForm(),
            "language_models": language_model_rows(),
        },
    )


@researcher_required
def generation_run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(GenerationRun.objects.select_related("language_model", "llm_job"), pk=pk)
    run.state = owned_run_state(run, id=f"generation-{run.pk}")  # type: ignore[attr-defined]  # the state shown beside the run, for the template
    run.cost = job_cost(run.llm_job)  # type: ignore[attr-defined]  # what it spent, for the template
    judge_runs: list[dict[str, Any]] = [
        {"run": jr, "score": judge_run_score(jr)} for jr in run.judge_runs.select_related("llm_job")
    ]
    for row in judge_runs:
        row["run"].state = owned_run_state(row["run"], id=f"judge-{row['run'].pk}")
        row["run"].cost = job_cost(row["run"].llm_job)
    components_runs = list(run.components_runs.select_related("llm_job"))
    for cr in components_runs:
        cr.state = owned_run_state(cr, id=f"components-{cr.pk}")  # type: ignore[attr-defined]  # the state shown beside the run, for the template
        cr.cost = job_cost(cr.llm_job)  # type: ignore[attr-defined]  # what it spent, for the template
    return render(
        request,
        "judging/generation_run.html",
        {
            "run": run,
            "judge_runs": judge_runs,
            "rows": generation_run_rows(run)[:500],
            "score": generation_run_score(run),
            "components_runs": components_runs,
        },
    )


def _launch(request: HttpRequest, form, kind: str, create):
    """Validate a launch form and start the run; every refusal says why and stores nothing."""
    if not form.is_valid():
        messages.error(
            request,
            f"The {kind} run was not started: "
            + "; ".join(f"{field}: {' '.join(errors)}" for field, errors in form.errors.items()),
        )
        return None
    try:
        run = create(form.cleaned_data)
    except AppError as exc:
        refusal_message(request, exc, f"The {kind} run was not started: ")
        return None
    messages.success(request, f"{kind.capitalize()} run {run.name!r} started.")
    return run


@admin_required
@require_POST
def generation_run_launch(request: HttpRequest) -> HttpResponse:
    run = _launch(
        request,
        GenerationRunForm(request.POST),
        "generation",
        lambda data: generation_run_create(
            name=data["name"],
            language_model=data["language_model"],
            split=data["split"],
            sample_per_topic=data["sample_per_topic"],
            seed=data["seed"],
            prompt_file=data["prompt_file"] or None,
            executor=data["executor"],
            concurrency=data["concurrency"],
            budget_usd=data["budget_usd"],
            step_parser=data["step_parser"] or StepParser.PRODUCT,
        ),
    )
    return redirect("generation_run_detail", pk=run.pk) if run else redirect("judging_runs")


@admin_required
@require_POST
def judge_run_launch(request: HttpRequest) -> HttpResponse:
    run = _launch(
        request,
        JudgeRunForm(request.POST),
        "judge",
        lambda data: judge_run_create(
            name=data["name"],
            generation_run=data["generation_run"],
            judge=data["judge"],
            model=data["model"],
            base_url=data["base_url"],
            api_key_env=data["api_key_env"],
            prompt_file=data["prompt_file"] or None,
            executor=data["executor"],
            concurrency=data["concurrency"],
            budget_usd=data["budget_usd"],
        ),
    )
    return redirect("generation_run_detail", pk=run.generation_run_id) if run else redirect("judging_runs")


@admin_required
@require_POST
def components_run_launch(request: HttpRequest, pk: int) -> HttpResponse:
    """Start an extract_components run for a generation run (SCORE from LLM components)."""
    generation_run = get_object_or_404(GenerationRun, pk=pk)
    try:
        run = components_run_create(generation_run=generation_run)
    except AppError as exc:
        refusal_message(request, exc, "The components run was not started: ")
    else:
        messages.success(request, f"Components run {run.name!r} started.")
    return redirect("generation_run_detail", pk=pk)


@admin_required
@require_POST
def run_action(request: HttpRequest, kind: str, pk: int, action: str) -> HttpResponse:
    models: dict[str, type[GenerationRun] | type[JudgeRun] | type[ComponentsRun]] = {
        "generation": GenerationRun,
        "judge": JudgeRun,
        "components": ComponentsRun,
    }
    model = models.get(kind)
    if model is None or action not in ("pause", "resume", "cancel", "retry"):
        return HttpResponseBadRequest("unknown run kind or action")
    # The one model that `kind` names (get_object_or_404 is typed with their common base).
    run = cast("GenerationRun | JudgeRun | ComponentsRun", get_object_or_404(model, pk=pk))
    target = run.pk if isinstance(run, GenerationRun) else run.generation_run_id
    if action == "cancel":
        refusal = refuse_unconfirmed(
            request, what=f"{kind} run {run.name}", back_url=reverse("generation_run_detail", args=[target])
        )
        if refusal is not None:
            return refusal
    try:
        n = run_control(run, action)  # the API's one entry point, and its refusals
    except AppError as exc:
        refusal_message(request, exc)
    else:
        messages.success(
            request, f"{run.name}: {retried_phrase(n)}." if action == "retry" else f"{run.name}: {action} requested."
        )
    return redirect("generation_run_detail", pk=target)
