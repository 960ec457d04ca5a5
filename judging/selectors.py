"""Reads of the judging app: How2Score per run, leaderboards, model comparisons, cross-judge
rankings. Every How2Score comes with its interval and its coverage (judging/coverage.py)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from django.db.models import QuerySet

from core.intervals import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED
from judging.calibration import judge_calibration
from judging.constants import LEADERBOARD_MIN_COVERAGE
from judging.coverage import BASIS_ALL, BASIS_COMMON, estimate_over, paired_comparison, ranking
from judging.how2score import SCORE_FIELDS, How2ScoreTally
from judging.metrics import MetricsSummary, record_metrics
from judging.models import Generation, GenerationRun, JudgeRun, Judgment
from judging.rankings import kendall_tau, rank_correlation_intervals, spearman_rho
from judging.score_selectors import generation_scores, score_summary
from llm.constants import OUTCOME_API_ERROR
from llm.selectors import ledger_run_outcomes
from mining.models import Procedure

# Difficulty slices by the reference's step count (How2Bench procedures have 5-15 steps, App. B.3).
STEP_COUNT_SLICES = ((5, 6), (7, 8), (9, 10), (11, 15))


def judge_names() -> list[str]:
    return list(Judgment.objects.values_list("judge", flat=True).distinct().order_by("judge"))


def usable_verdict(outcome: str, has_failure: bool | None) -> bool | None:
    """The verdict a judgment counts with: its has_failure when the judge's answer was
    usable (outcome ok), else None (counted as unusable, never scored)."""
    return has_failure if outcome == "ok" else None


def judge_request_failures(runs: Iterable[JudgeRun], split: str | None = None) -> list[Generation]:
    """The generations whose judge request (in one of ``runs``) ended ``api_error``: no
    answer, so no Judgment is stored, yet each is a judged item without a usable verdict,
    counted as unusable beside the stored ones. Procedure, topic and run loaded; only
    procedures of ``split`` when given."""
    failed: list[int] = []
    for run in runs:
        job = run.llm_job
        if job is None:
            continue
        # What the run asked (a reward endpoint's failure with the same key is not the run's).
        outcomes = {key: outcome for key, (outcome, _error) in ledger_run_outcomes(job.keys, run=job.run).items()}
        if OUTCOME_API_ERROR not in outcomes.values():
            continue
        stored = set(run.judgments.values_list("generation_id", flat=True))
        # The job's requests follow the run's usable generations in id order (judge_run_create).
        generation_ids = run.generation_run.generations.filter(outcome="ok").order_by("id").values_list("id", flat=True)
        failed += [
            pk
            for pk, key in zip(generation_ids, job.keys)
            if outcomes.get(key) == OUTCOME_API_ERROR and pk not in stored
        ]
    generations = (
        Generation.objects.filter(pk__in=failed).select_related("procedure__topic", "run").order_by("model", "id")
    )
    return list(generations.filter(procedure__split=split) if split else generations)


def judge_run_items(runs: Iterable[JudgeRun], split: str | None = None) -> set[int]:
    """The items of judge runs: the procedures of their generation runs (those asked for and
    those generated), only of ``split`` when given. A procedure stays an item when no judge
    request for it got a usable answer."""
    ids: set[int] = set()
    for generation_run in {run.generation_run for run in runs}:
        ids |= set(generation_run.procedure_ids) | set(
            generation_run.generations.values_list("procedure_id", flat=True)
        )
    found, chunk, ordered = set(), 2000, sorted(ids)
    for start in range(0, len(ordered), chunk):
        procedures = Procedure.objects.filter(pk__in=ordered[start : start + chunk])
        found |= set((procedures.filter(split=split) if split else procedures).values_list("pk", flat=True))
    return found


def _judge_runs(judge: str) -> list[JudgeRun]:
    return list(JudgeRun.objects.filter(judge=judge).select_related("llm_job", "generation_run"))


def judge_run_score(run: JudgeRun) -> dict[str, Any]:
    """How2Score of a judge run, overall and per topic, with its 95 % Wilson interval, every
    exclusion counted (judge requests that ended ``api_error`` among the unusable), and its
    coverage: the share of the generation run's procedures with a usable verdict."""
    tally = How2ScoreTally()
    outcomes: dict[str, int] = defaultdict(int)
    for judgment in run.judgments.select_related("generation__procedure__topic"):
        outcomes[judgment.outcome] += 1
        procedure = judgment.generation.procedure
        tally.add(procedure.topic.name, usable_verdict(judgment.outcome, judgment.has_failure), item=procedure.pk)
    for generation in judge_request_failures([run]):
        outcomes[OUTCOME_API_ERROR] += 1
        tally.add(generation.procedure.topic.name, None, item=generation.procedure_id)
    generation_run = run.generation_run
    result = tally.result(n_items=len(judge_run_items([run])))
    result["outcomes"] = dict(outcomes)
    result["n_generation_failed"] = generation_run.generations.exclude(outcome="ok").count()
    return result


def judged_splits(judge: str | None = None) -> list[str]:
    """The procedure splits this judge (any judge when None) has judged generations of."""
    judgments = Judgment.objects.all() if judge is None else Judgment.objects.filter(judge=judge)
    return sorted(judgments.values_list("generation__procedure__split", flat=True).distinct().order_by())


def _judgments(judge: str, split: str | None) -> QuerySet[Judgment]:
    judgments = Judgment.objects.filter(judge=judge)
    return judgments.filter(generation__procedure__split=split) if split else judgments


def verdict_counts(judge: str, split: str | None = None) -> tuple[dict[str, dict[int, tuple[int, int, int]]], set[int]]:
    """Per model, per procedure judged: ``(no_failure, judged, unusable)`` under this judge
    (on procedures of ``split`` when given; judge requests that ended ``api_error`` are
    unusable), and the slice's items: the procedures of this judge's judge runs' generation
    runs, and every procedure it has a judgment for (imported ones included), so a
    procedure whose every judge request failed stays in the slice. Every How2Score of the
    leaderboard, the comparison and the cross-judge page is computed from these counts
    (judging/coverage.py)."""
    counts: dict[str, dict[int, list[int]]] = defaultdict(dict)
    runs = _judge_runs(judge)
    items = judge_run_items(runs, split)
    rows = list(
        _judgments(judge, split).values_list("generation__model", "generation__procedure_id", "outcome", "has_failure")
    )
    rows += [(g.model, g.procedure_id, OUTCOME_API_ERROR, None) for g in judge_request_failures(runs, split)]
    for model, procedure_id, outcome, has_failure in rows:
        items.add(procedure_id)
        cell = counts[model].setdefault(procedure_id, [0, 0, 0])
        verdict = usable_verdict(outcome, has_failure)
        if verdict is None:
            cell[2] += 1
        else:
            cell[1] += 1
            cell[0] += 0 if verdict else 1
    return {m: {i: (c[0], c[1], c[2]) for i, c in cells.items()} for m, cells in counts.items()}, items


def leaderboard_ranking(
    judge: str, split: str | None = None, *, basis: str = BASIS_COMMON, min_coverage: float = LEADERBOARD_MIN_COVERAGE
) -> dict[str, Any]:
    """The leaderboard of one judge (over the procedures of ``split`` when given: How2Bench,
    or the constrained slice), ranked by the rule of judging/coverage.py.

    Returns the ranking's summary (``basis``, ``min_coverage``, ``n_items``,
    ``n_common_items``, ``n_complete``) and ``rows``, one per model in the order shown. Each
    row has the score it shows under ``basis`` (``how2score`` and ``ci95`` on 0-1,
    ``how2score_percent`` and ``ci95_percent`` on 0-100, ``interval``, ``n_judged``,
    ``scored_on``), the model's coverage of the slice (``n_unusable``,
    ``n_items``, ``n_items_judged``, ``coverage``), ``complete`` and ``rank`` (None:
    unranked), both estimates (``all_items``, ``common_items``), and over all its judged
    generations: per-topic scores, step-count slices, the formatting proxies, the
    calibrated score and SCORE (docs/score.md)."""
    counts, items = verdict_counts(judge, split)
    ranked = ranking(counts, n_items=len(items), basis=basis, min_coverage=min_coverage)
    details: dict[str, dict[str, Any]] = {}
    judgments = (
        _judgments(judge, split)
        .select_related("generation__procedure__topic", "generation__run")
        .order_by("generation__model", "id")
    )
    verdicts = [(j.generation, usable_verdict(j.outcome, j.has_failure)) for j in judgments]
    verdicts += [(g, None) for g in judge_request_failures(_judge_runs(judge), split)]  # api_error: unusable
    for generation, verdict in verdicts:
        row = details.setdefault(
            generation.model,
            {
                "label": generation.display_name,
                "tally": How2ScoreTally(),
                "slices": {s: How2ScoreTally() for s in STEP_COUNT_SLICES},
                "metrics": MetricsSummary(),
                "successes": [],
                "generations": [],
            },
        )
        row["generations"].append(generation)
        if verdict is not None:
            row["successes"].append(not verdict)
        procedure = generation.procedure
        row["tally"].add(procedure.topic.name, verdict, item=procedure.pk)
        for low, high in STEP_COUNT_SLICES:
            if low <= len(procedure.steps) <= high:
                row["slices"][(low, high)].add(procedure.topic.name, verdict, item=procedure.pk)
        if generation.predicted_steps:
            row["metrics"].add(
                record_metrics(reference_steps=procedure.steps, predicted_steps=generation.predicted_steps)
            )
    scores = generation_scores([g for row in details.values() for g in row["generations"]])
    rows = []
    for model in ranked["order"]:
        rule, row = ranked["models"][model], details[model]
        shown, slice_ = rule["shown"], rule["all_items"]
        topics = row["tally"].result()
        structured = score_summary(scores[g.pk] for g in row["generations"] if g.pk in scores)
        rows.append(
            {
                "model": model,
                "label": row["label"],
                "rank": rule["rank"],
                "complete": rule["complete"],
                "scored_on": rule["scored_on"],
                **{key: shown[key] for key in SCORE_FIELDS},
                "interval": shown["interval"],
                "n_judged": shown["n_judged"],
                "n_unusable": slice_["n_unusable"],
                "n_items": slice_["n_items"],
                "n_items_judged": slice_["n_items_judged"],
                "coverage": slice_["coverage"],
                "all_items": slice_,
                "common_items": rule["common_items"],
                "n": topics["n"],
                "n_scored": slice_["n_judged"],
                "by_topic": topics["by_topic"],
                "slices": {f"{lo}-{hi}": row["slices"][(lo, hi)].result() for lo, hi in STEP_COUNT_SLICES},
                "metrics": row["metrics"].result(),
                "calibrated": judge_calibration(judge, row["successes"]) if row["successes"] else None,
                "score": structured["score"],
                "score_n": structured["n_scored"],
                "score_ci95": structured["ci95"]["score"],
            }
        )
    return {key: ranked[key] for key in ("basis", "min_coverage", "n_items", "n_common_items", "n_complete")} | {
        "judge": judge,
        "split": split,
        "n_items_not_common": ranked["n_items"] - ranked["n_common_items"],
        "rows": rows,
    }


def leaderboard(judge: str, split: str | None = None, *, basis: str = BASIS_ALL) -> list[dict[str, Any]]:
    """The rows of ``leaderboard_ranking`` (by default each scored over all its judged items)."""
    return leaderboard_ranking(judge, split, basis=basis)["rows"]


def leaderboard_models(judge: str, split: str | None = None) -> list[str]:
    """The models this judge judged (on procedures of ``split`` when given)."""
    return sorted(set(_judgments(judge, split).values_list("generation__model", flat=True)))


def model_comparison(
    judge: str,
    a: str,
    b: str,
    split: str | None = None,
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> dict[str, Any]:
    """Is model ``a`` better than model ``b`` under this judge? Both scores on the
    procedures both have a usable verdict for and the difference with a paired bootstrap
    interval (judging/coverage.py ``paired_comparison``). Raises ``KeyError`` naming ``a``
    or ``b`` when this judge has judged nothing of that model in the slice."""
    counts, _ = verdict_counts(judge, split)
    for field, model in (("a", a), ("b", b)):
        if model not in counts:
            raise KeyError(field)
    return {
        "judge": judge,
        "split": split,
        "model_a": a,
        "model_b": b,
        **paired_comparison(counts[a], counts[b], resamples=resamples, seed=seed),
    }


def _count_matrices(
    counts: dict[str, dict[int, tuple[int, int, int]]], models: list[str], items: list[int]
) -> tuple[list[list[int]], list[list[int]]]:
    """(no_failure, judged) matrices, models x items."""
    passes = [[counts[m].get(i, (0, 0, 0))[0] for i in items] for m in models]
    judged = [[counts[m].get(i, (0, 0, 0))[1] for i in items] for m in models]
    return passes, judged


def cross_judge_rankings(judges: list[str], split: str | None = None) -> dict[str, Any]:
    """How2Score of every model under each judge over all its judged items (on the
    procedures of ``split`` when given), each with its interval and its coverage of that
    judge's slice, and the rank correlations between judges over the models both judged
    (paper Figure 5), with bootstrap intervals resampling the procedures (judging/rankings.py)."""
    counted = {judge: verdict_counts(judge, split) for judge in judges}
    estimates = {
        judge: {model: estimate_over(c, n_items=len(items)) for model, c in counts.items()}
        for judge, (counts, items) in counted.items()
    }
    scores = {
        judge: {m: e["how2score"] for m, e in by_model.items() if e["how2score"] is not None}
        for judge, by_model in estimates.items()
    }
    pairs = []
    for i, a in enumerate(judges):
        for b in judges[i + 1 :]:
            common = sorted(set(scores[a]) & set(scores[b]))
            x = [scores[a][m] for m in common]
            y = [scores[b][m] for m in common]
            items = sorted(counted[a][1] | counted[b][1])
            intervals = rank_correlation_intervals(
                _count_matrices(counted[a][0], common, items), _count_matrices(counted[b][0], common, items)
            )
            pairs.append(
                {
                    "judges": (a, b),
                    "n_models": len(common),
                    "kendall_tau": kendall_tau(x, y),
                    "spearman": spearman_rho(x, y),
                    **intervals,
                }
            )
    models = sorted({m for s in estimates.values() for m in s})
    table = [{"model": m, "cells": [estimates[j].get(m) for j in judges]} for m in models]
    return {
        "judges": judges,
        "split": split,
        "models": models,
        "scores": scores,
        "estimates": estimates,
        "table": table,
        "pairs": pairs,
    }


def generation_run_list() -> QuerySet[GenerationRun]:
    return GenerationRun.objects.select_related("language_model", "llm_job").order_by("-id")


def generation_run_rows(run: GenerationRun) -> list[dict[str, Any]]:
    """Each generation with its judgments, for the run page."""
    rows = []
    for generation in run.generations.select_related("procedure__topic").prefetch_related("judgments").order_by("id"):
        rows.append({"generation": generation, "judgments": list(generation.judgments.all())})
    return rows


def generations_for_procedure(procedure_id: int) -> QuerySet[Generation]:
    return Generation.objects.filter(procedure_id=procedure_id).prefetch_related("judgments")
