"""Reads of constrained planning (CoScript, Yuan et al. 2023): the run list, a run's phases
and report, its specific goals with their candidate scripts, the sensitive-domain review
list (App. C.2), and How2Score of the constrained slice per constraint type. Every kept rate,
goal rate and How2Score carries its n and a 95 % Wilson interval (core/intervals.py,
judging/how2score.py)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from django.db.models import Count, Exists, IntegerField, OuterRef, Prefetch, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce

from core.app_errors import InvalidInput
from core.intervals import WILSON, share_estimate
from coscript.constants import CONSTRAINT_TYPES
from coscript.filtering import REASONS
from coscript.models import CandidateScript, CoScriptRun, Phase, Review, SpecificGoal
from judging.constants import LEADERBOARD_MIN_COVERAGE
from judging.coverage import BASIS_ALL, estimate_over, ranking
from judging.models import Judgment, RunStatus
from judging.selectors import expected_items, verdict_counts
from llm.costs import costs_sum, job_costs
from llm.run_models import FINISHED
from llm.runs import run_state
from mining.models import Procedure, Split

ACTIVE = (RunStatus.PENDING, RunStatus.RUNNING)
# The goal-table filters of the run page and the API (value -> label): "kept" = the goal has a
# chosen script. A value outside them is refused naming the parameter (GoalFilterForm on the
# page, SpecificGoalFilter in the API), never ignored.
KEPT_FILTERS = {"yes": "with a chosen script", "no": "without a chosen script"}
REVIEW_FILTERS = {
    "not_flagged": Review.NOT_NEEDED,
    "pending": Review.PENDING,
    "approved": Review.APPROVED,
    "removed": Review.REMOVED,
}
# Words of the goal table's search: each word is one more condition of the query, and a
# query of thousands of words is deeper than SQLite parses (a 500); longer is refused.
GOAL_QUERY_MAX_CHARS = 200


def coscript_run_list() -> QuerySet[CoScriptRun]:
    """Runs, newest first, with their specific-goal and candidate counts."""
    candidates = (
        CandidateScript.objects.filter(goal__run=OuterRef("pk"))
        .order_by()
        .values("goal__run")
        .annotate(n=Count("pk"))
        .values("n")
    )
    return (
        CoScriptRun.objects.select_related("language_model", "created_by", "goals_job", "screen_job", "scripts_job")
        .annotate(
            n_goals=Count("goals", distinct=True),
            n_candidates=Coalesce(Subquery(candidates, output_field=IntegerField()), 0),
        )
        .order_by("-id")
    )


def coscript_run_state(run: CoScriptRun, *, live: bool = True) -> dict[str, Any]:
    """The run's state as every run shows it (llm/runs.py): status, the requests of all its
    phases per outcome, top errors, the breaker, why it stopped. *Retry failed* asks a
    stopped phase's failed requests again, so a finished run does not offer it (a new run
    asks what it left failed). ``live=False`` (lists): the counts the jobs stored."""
    state = run_state(
        status=run.status,
        jobs=[job for _, job in run.jobs],
        reason=run.reason,
        live=live,
        extra={"id": f"coscript-run-{run.pk}"},
    )
    state["can_retry_failed"] = state["can_retry_failed"] and run.status not in FINISHED
    return state


def _with_intervals(row: dict[str, Any]) -> dict[str, Any]:
    """A filter report row with the 95 % Wilson intervals of its kept rate (n: candidates)
    and goal rate (n: specific goals), and ``kept_share`` / ``goal_share``
    (``core.intervals.share_estimate``) for the pages."""
    kept = share_estimate(row["kept"], row["candidates"])
    goal = share_estimate(row["goals_with_script"], row["goals"])
    return {
        **row,
        "kept_rate_ci95": kept["ci95"],
        "goal_rate_ci95": goal["ci95"],
        "interval": WILSON,
        "kept_share": kept,
        "goal_share": goal,
    }


def coscript_filter_report(run: CoScriptRun) -> dict[str, Any] | None:
    """The last filter report (None before filtering), each row of ``by_type`` and ``total``
    with its intervals: the one reading of kept rates the run page, the run list, the API and
    ``coscript_run`` share."""
    report = (run.report or {}).get("filter")
    if not report:
        return None
    return {
        **report,
        "by_type": {t: _with_intervals(row) for t, row in report.get("by_type", {}).items()},
        "total": _with_intervals(report["total"]),
    }


def coscript_report(run: CoScriptRun) -> dict[str, Any]:
    """The run's report with the filter's rows carrying their intervals (the API's and the
    command's ``report``)."""
    report = dict(run.report or {})
    if report.get("filter"):
        report["filter"] = coscript_filter_report(run)
    return report


def run_kept_rate(run: CoScriptRun) -> dict[str, Any]:
    """Candidates kept / candidates from the last filter report, as ``share_estimate``
    (share, ci95, successes, n); share None before filtering."""
    report = coscript_filter_report(run)
    return report["total"]["kept_share"] if report else share_estimate(0, 0)


def _job_row(label: str, phase: str, job, run: CoScriptRun, costs: dict[int, dict[str, Any]]) -> dict[str, Any]:
    order = [p for p in Phase.values]
    reached = order.index(run.phase) >= order.index(phase)
    skipped = phase == Phase.SCREEN and not run.screen
    return {
        "phase": phase,
        "label": label,
        "job": job,
        "current": run.phase == phase,
        "state": ("skipped" if skipped else job.status if job else ("not needed" if reached else "waiting")),
        "n_done": job.n_done if job else 0,
        "n_total": job.n_total if job else 0,
        # What the phase spent (llm/costs.py): cost_usd None when no job or unknown.
        "cost": costs[job.pk] if job else None,
        "cost_usd": costs[job.pk]["cost_usd"] if job else None,
        "requests_without_price": costs[job.pk]["n_unpriced"] if job else 0,
        "outcomes": dict(job.outcome_counts) if job else {},
        "projected_cost_usd": costs[job.pk]["projected_cost_usd"] if job else None,
    }


def _filter_rows(report: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    by_type = report.get("by_type", {})
    for constraint_type in [*CONSTRAINT_TYPES, *sorted(set(by_type) - set(CONSTRAINT_TYPES))]:
        row = by_type.get(constraint_type)
        if row is not None:
            rows.append(
                {
                    "constraint_type": constraint_type,
                    **row,
                    "reason_list": [(r, row.get("reasons", {}).get(r, 0)) for r in REASONS],
                }
            )
    return rows


def coscript_run_collected(run: CoScriptRun) -> dict[str, Any]:
    """What a run holds, counted from its stored rows: the numbers its goal table, its filter
    table, the run list and the API (``n_goals``, ``n_candidates``) give. ``abstract_goals``:
    the procedures the run drew, or, for a run whose specific goals were loaded rather than
    generated from drawn procedures (the demo run), the distinct abstract goals of its goals.
    ``goals_with_candidates``: specific goals with at least one candidate script."""
    by_type = dict(run.goals.order_by().values_list("constraint_type").annotate(n=Count("pk")))
    candidates = CandidateScript.objects.filter(goal__run=run).order_by()
    return {
        "abstract_goals": len(run.abstract_ids)
        if run.abstract_ids
        else run.goals.order_by().values("abstract_goal").distinct().count(),
        "specific_goals": sum(by_type.values()),
        "by_type": by_type,
        "candidates": candidates.count(),
        "goals_with_candidates": candidates.values("goal").distinct().count(),
    }


def _candidate_outcomes(run: CoScriptRun) -> dict[str, int]:
    """The stored candidates per outcome, as the scripts phase reports them (an ``ok`` answer
    without steps counts as ``no_steps``): for a run whose candidates no scripts phase collected."""
    outcomes: Counter[str] = Counter()
    for outcome, steps in CandidateScript.objects.filter(goal__run=run).values_list("outcome", "steps"):
        outcomes[outcome if steps or outcome != "ok" else "no_steps"] += 1
    return dict(outcomes)


def coscript_run_detail(run: CoScriptRun) -> dict[str, Any]:
    """Everything the run page and the API show besides the goals: parameters, prompts,
    each phase's LLM job, and the report (goals by type and dropped reasons, the screen,
    script outcomes, the filter's kept rates per constraint type with reasons). The goal and
    candidate counts are the stored rows' (``coscript_run_collected``), so the page's report
    and parameters agree with its goal table and the API, also for a run whose goals and
    scripts were loaded without their phases (the demo run); a section is None only when
    nothing of it was collected."""
    phase_jobs = (run.goals_job, run.screen_job, run.scripts_job)
    costs = job_costs(phase_jobs)
    report = run.report or {}
    collected = coscript_run_collected(run)
    return {
        "run": run,
        "state": coscript_run_state(run),
        "active": run.status in ACTIVE,
        "parameters": _run_parameters(run, collected),
        "prompts": [
            {"stage": stage, "path": spec.get("path", ""), "sha256": spec.get("sha256", "")}
            for stage, spec in sorted(run.prompts.items())
        ],
        "jobs": [
            _job_row(Phase.GOALS.label, Phase.GOALS, run.goals_job, run, costs),
            _job_row(Phase.SCREEN.label, Phase.SCREEN, run.screen_job, run, costs),
            _job_row(Phase.SCRIPTS.label, Phase.SCRIPTS, run.scripts_job, run, costs),
        ],
        # What the run spent, its phases together (None: no phase started; its cost_usd None:
        # unknown, some request without a price).
        "cost": costs_sum(costs.values()),
        "goals_report": _goals_report(report.get("goals") or {}, collected),
        "screen_report": _screen_report(run, report),
        "scripts_report": _scripts_report(run, report.get("scripts") or {}, collected),
        "filter": _filter_section(coscript_filter_report(run) or {}),
        "accepted_errors": report.get("accepted_errors", []),
        "n_in_benchmark": run.goals.filter(benchmark_procedure__isnull=False).count(),
    }


def _run_parameters(run: CoScriptRun, collected: dict[str, Any]) -> list[tuple[str, Any]]:
    """The run's parameters as the page lists them, with the abstract goals it holds."""
    if not run.abstract_ids:
        drawn = " (given with the specific goals, not drawn)"
    elif run.limit:
        drawn = f" (limit {run.limit}, seed {run.seed})"
    else:
        drawn = f" (seed {run.seed})"
    return [
        ("Model", run.language_model.name),
        (
            "Source split",
            Split(run.split).label
            if run.split in Split.values
            else run.split or "all procedures (but the constrained slice)",
        ),
        ("Abstract goals", f"{collected['abstract_goals']}{drawn}"),
        ("Candidates per goal (K)", run.k),
        ("Filter mode", run.filter_mode),
        ("Keyword bonus", run.keyword_bonus),
        ("Embedding model", run.embedding_model or "—"),
        ("Sensitive-domain screen", "on" if run.screen else "off"),
        ("Executor", run.executor),
        ("Concurrency", run.concurrency),
        ("Budget cap (USD)", run.budget_usd if run.budget_usd is not None else "none"),
    ]


def _goals_report(goals: dict[str, Any], collected: dict[str, Any]) -> dict[str, Any] | None:
    """The goals phase: the counts are the stored rows' (as the goal table and the API count
    them); what only the phase knows (requests, pairs dropped) is its report's, and None when
    the rows were loaded without the phase (the demo run): no model was asked."""
    if not goals and not collected["specific_goals"]:
        return None
    return {
        "abstract_goals": collected["abstract_goals"],
        "specific_goals": collected["specific_goals"],
        "requests": goals.get("requests", {}) if goals else None,
        "dropped": goals.get("dropped", {}) if goals else None,
        # ok answers that gave no specific goal, by reason; None for a run collected before
        # they were counted (its report lacks them).
        "answers_dropped": goals.get("answers_dropped") if goals else None,
        "by_type": [(t, collected["by_type"].get(t, 0)) for t in CONSTRAINT_TYPES],
    }


def _screen_report(run: CoScriptRun, report: dict[str, Any]) -> dict[str, Any] | None:
    """The sensitive-domain screen's report with the goals' review counts."""
    if not report.get("screen"):
        return None
    reviews = dict(
        run.goals.exclude(review=Review.NOT_NEEDED)
        .order_by()
        .values_list("review")
        .annotate(n=Count("pk"))
        .values_list("review", "n")
    )
    return {**report["screen"], "reviews": reviews}


def _scripts_report(run: CoScriptRun, scripts: dict[str, Any], collected: dict[str, Any]) -> dict[str, Any] | None:
    """The scripts phase: candidates per goal from the rows, outcomes from the phase's report
    (or the candidates themselves when the rows came without it)."""
    if not scripts and not collected["candidates"]:
        return None
    return {
        "candidates": collected["candidates"],
        "specific_goals": collected["specific_goals"],
        "goals_with_candidates": collected["goals_with_candidates"],
        "k_per_goal": collected["candidates"] == run.k * collected["specific_goals"]
        and collected["goals_with_candidates"] == collected["specific_goals"],
        "outcomes": scripts.get("outcomes", {}) if scripts else _candidate_outcomes(run),
        "generated": bool(scripts),
    }


def _filter_section(filter_report: dict[str, Any]) -> dict[str, Any] | None:
    """The filter's kept rates per constraint type, with the reasons candidates were dropped."""
    if not filter_report:
        return None
    total = filter_report.get("total")
    return {
        "mode": filter_report.get("mode"),
        "keyword_bonus": filter_report.get("keyword_bonus"),
        "embedding_model": filter_report.get("embedding_model"),
        "kept_without_siblings": filter_report.get("kept_without_siblings", 0),
        "rows": _filter_rows(filter_report),
        "total": total,
        "total_reasons": [(r, (total or {}).get("reasons", {}).get(r, 0)) for r in REASONS],
    }


def filter_specific_goals(
    goals: QuerySet[SpecificGoal], *, constraint_type: str = "", kept: str = "", review: str = "", q: str = ""
) -> QuerySet[SpecificGoal]:
    """Specific goals of one constraint type, with or without a chosen script (``kept``: yes /
    no), in a review state (not_flagged / pending / approved / removed), holding every word of
    ``q`` in the goal, the constraint or the abstract goal; an empty value does not filter.
    A value outside those is refused naming its parameter (``InvalidInput``): the run page's
    form and the API's filter set check them first, this keeps any other caller honest."""
    unknown = {
        name: f"{value!r} is not one of {', '.join(known)}"
        for name, value, known in (
            ("constraint_type", constraint_type, CONSTRAINT_TYPES),
            ("kept", kept, KEPT_FILTERS),
            ("review", review, REVIEW_FILTERS),
        )
        if value and value not in known
    }
    if len(q) > GOAL_QUERY_MAX_CHARS:
        unknown["q"] = f"at most {GOAL_QUERY_MAX_CHARS} characters (it has {len(q)})"
    if unknown:
        raise InvalidInput(fields=unknown)
    if constraint_type:
        goals = goals.filter(constraint_type=constraint_type)
    if kept:
        chosen = Exists(CandidateScript.objects.filter(goal=OuterRef("pk"), selected=True))
        goals = goals.filter(chosen if kept == "yes" else ~chosen)
    if review:
        goals = goals.filter(review=REVIEW_FILTERS[review])
    for word in q.split():
        goals = goals.filter(
            Q(specific_goal__icontains=word) | Q(constraint__icontains=word) | Q(abstract_goal__icontains=word)
        )
    return goals


def specific_goal_list(
    *, run: CoScriptRun, constraint_type: str = "", kept: str = "", review: str = "", q: str = ""
) -> QuerySet[SpecificGoal]:
    """A run's specific goals with their candidates (in index order), filtered as
    :func:`filter_specific_goals` filters them."""
    goals = filter_specific_goals(run.goals.all(), constraint_type=constraint_type, kept=kept, review=review, q=q)
    return (
        goals.select_related("reviewed_by", "benchmark_procedure")
        .prefetch_related(Prefetch("candidates", queryset=CandidateScript.objects.order_by("index")))
        .order_by("id")
    )


def sibling_goals(goals: list[SpecificGoal]) -> dict[int, str]:
    """Goal id -> specific goal, for the goals named as best siblings in the candidates' scores."""
    ids = {c.scores.get("best_sibling_goal") for g in goals for c in g.candidates.all()} - {None}
    return dict(SpecificGoal.objects.filter(pk__in=ids).values_list("pk", "specific_goal"))


def review_list() -> dict[str, QuerySet[SpecificGoal]]:
    """The sensitive-domain review list across runs: flagged goals waiting for a decision
    (oldest first), and the ones decided (latest first)."""
    base = SpecificGoal.objects.select_related("run", "reviewed_by")
    return {
        "pending": base.filter(review=Review.PENDING).order_by("run_id", "id"),
        "reviewed": base.filter(review__in=[Review.APPROVED, Review.REMOVED]).order_by("-reviewed_at", "-id"),
    }


def constrained_how2score(*, min_coverage: float = LEADERBOARD_MIN_COVERAGE) -> list[dict[str, Any]]:
    """How2Score of the constrained slice per judge and model, overall and per constraint
    type, as the leaderboard computes it (judging's ``verdict_counts`` on split
    "constrained": unusable verdicts counted apart, never scored). Each row and each type's
    cell is a ``how2score_estimate`` (how2score, ci95 (Wilson), n_judged, n_unusable,
    n_items, n_items_judged, coverage) with ``complete`` (coverage >= ``min_coverage``);
    a cell's items are the slice's procedures of that constraint type. Per judge, rows
    follow the leaderboard's ranking rule over each model's judged items: complete rows
    ranked by score (``rank``), incomplete ones after them, unranked, by coverage, so a
    barely covered model never tops the table (How2Everything §4; docs/coscript.md)."""
    types = dict(
        Procedure.objects.filter(split=Split.CONSTRAINED, provenance__constraint_type__in=CONSTRAINT_TYPES).values_list(
            "pk", "provenance__constraint_type"
        )
    )
    judges = (
        Judgment.objects.filter(generation__procedure__split=Split.CONSTRAINED)
        .order_by("judge")
        .values_list("judge", flat=True)
        .distinct()
    )
    rows = []
    for judge in judges:
        counts, items = verdict_counts(judge, Split.CONSTRAINED)
        # Coverage against what each model should have been judged on, as the leaderboard counts it.
        expected = expected_items(counts, Split.CONSTRAINED)
        ranked = ranking(counts, n_items=len(items), basis=BASIS_ALL, min_coverage=min_coverage, expected=expected)
        items_of = {t: {i for i in items if types.get(i) == t} for t in CONSTRAINT_TYPES}
        for model in ranked["order"]:
            entry = ranked["models"][model]
            cells = []
            for constraint_type in CONSTRAINT_TYPES:
                cell = estimate_over(
                    counts[model], n_items=len(items_of[constraint_type]), items=items_of[constraint_type]
                )
                cells.append(
                    {"constraint_type": constraint_type, **cell, "complete": (cell["coverage"] or 0.0) >= min_coverage}
                )
            rows.append(
                {
                    "judge": judge,
                    "model": model,
                    **entry["all_items"],
                    "complete": entry["complete"],
                    "rank": entry["rank"],
                    "by_type": cells,
                }
            )
    return rows
