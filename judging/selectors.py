"""Reads of the judging app: How2Score per run, leaderboards, model comparisons, cross-judge
rankings. Every How2Score comes with its interval and its coverage (judging/coverage.py)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from fractions import Fraction
from typing import Any, cast

from django.db.models import QuerySet

from core.intervals import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED
from judging.calibration import HUMAN_MAJORITY, judge_calibration
from judging.constants import LEADERBOARD_MIN_COVERAGE
from judging.coverage import (
    BASIS_ALL,
    BASIS_COMMON,
    competition_ranks,
    estimate_over,
    expected_count,
    judged_items,
    paired_comparison,
    pairwise_tests,
    ranking,
)
from judging.how2score import SCORE_FIELDS, How2ScoreTally, percent_forms
from judging.metrics import MetricsSummary, record_metrics
from judging.models import Generation, GenerationRun, JudgeRun, Judgment, StepParser
from judging.rankings import kendall_tau, rank_correlation_intervals, spearman_rho
from judging.score_selectors import generation_scores, score_summary
from llm.constants import OUTCOME_API_ERROR
from llm.selectors import ledger_run_outcomes
from mining.models import Procedure, Split

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


def _in_split(ids: Iterable[int], split: str | None) -> set[int]:
    """The procedures of ``ids`` that exist (and are of ``split`` when given)."""
    found: set[int] = set()
    chunk, ordered = 2000, sorted(set(ids))
    for start in range(0, len(ordered), chunk):
        procedures = Procedure.objects.filter(pk__in=ordered[start : start + chunk])
        found |= set((procedures.filter(split=split) if split else procedures).values_list("pk", flat=True))
    return found


# The benchmark splits: a model with imported generations (no generation run) of one of them
# should have been judged on the whole split, as the reference's How2Bench evaluation is.
BENCHMARK_SPLITS = (Split.BENCH, Split.CONSTRAINED)


def expected_items(models: Iterable[str], split: str | None = None) -> dict[str, set[int]]:
    """Per model, the procedures it should have been judged on (of ``split`` when given):
    the procedures of its generation runs (asked for, and generated), every procedure it has
    a generation of, and, when it has imported generations of a benchmark split (How2Bench,
    or the constrained slice) without a run, that whole split. A model's coverage is counted against these, never against the
    procedures that happen to have a judgment (docs/how2bench.md)."""
    wanted = set(models)
    generations = Generation.objects.filter(model__in=wanted)
    if split:
        generations = generations.filter(procedure__split=split)
    ids: dict[str, set[int]] = {model: set() for model in wanted}
    for model, procedure_id in generations.values_list("model", "procedure_id").iterator():
        ids[model].add(procedure_id)
    run_ids = set(generations.filter(run__isnull=False).values_list("model", "run_id").distinct())
    runs = GenerationRun.objects.in_bulk({run_id for _, run_id in run_ids})
    asked: dict[str, set[int]] = defaultdict(set)
    for model, run_id in run_ids:
        asked[model] |= {int(pk) for pk in runs[run_id].procedure_ids}
    for model, procedure_ids in asked.items():
        ids[model] |= _in_split(procedure_ids, split)
    for benchmark in BENCHMARK_SPLITS:
        if split and split != benchmark:
            continue
        imported = set(generations.filter(run__isnull=True, procedure__split=benchmark).values_list("model", flat=True))
        if imported:
            whole = set(Procedure.objects.filter(split=benchmark).values_list("pk", flat=True))
            for model in imported:
                ids[model] |= whole
    return ids


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
    judge: str,
    split: str | None = None,
    *,
    basis: str = BASIS_COMMON,
    min_coverage: float = LEADERBOARD_MIN_COVERAGE,
    human_source: str = HUMAN_MAJORITY,
) -> dict[str, Any]:
    """The leaderboard of one judge (over the procedures of ``split`` when given: How2Bench,
    or the constrained slice), ranked by the rule of judging/coverage.py.

    Returns the ranking's summary (``basis``, ``min_coverage``, ``n_items``: the procedures
    any model should have been judged on, ``n_common_items``, ``n_complete``) and ``rows``,
    one per model in the order shown. Each row has the score it shows under ``basis``
    (``how2score`` and ``ci95`` on 0-1, ``how2score_percent`` and ``ci95_percent`` on 0-100,
    ``interval``, ``n_judged``, ``scored_on``), the model's coverage of what it should have
    been judged on (``expected_items``: ``n_unusable``, ``n_items``, ``n_items_judged``,
    ``coverage``), ``complete``, ``rank`` (None: unranked; equal scores share one),
    ``tied``, ``rank_interval`` ([best, worst]), both estimates (``all_items``,
    ``common_items``), and over all its judged
    generations: per-topic scores, step-count slices, the formatting proxies, the
    calibrated score (against ``human_source``'s labels: the human majority, or the adjudicated
    gold; judging/calibration.py) and SCORE (docs/score.md). ``pairwise``: every pair of models with its
    exact test on the procedures both have a usable verdict for, its p-value adjusted by Holm
    over all ``n_comparisons`` pairs, and the decision (judging/coverage.py
    ``pairwise_tests``)."""
    counts, items = verdict_counts(judge, split)
    expected = expected_items(counts, split)
    slice_items = items.union(*expected.values())
    ranked = ranking(counts, n_items=len(slice_items), basis=basis, min_coverage=min_coverage, expected=expected)
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
                "calibration_items": [],
                "generations": [],
                "step_parsers": set(),
            },
        )
        row["generations"].append(generation)
        row["step_parsers"].add(generation.run.step_parser if generation.run is not None else StepParser.FILE)
        procedure = generation.procedure
        if verdict is not None:
            row["successes"].append(not verdict)
            row["calibration_items"].append((generation.pk, procedure.topic.name, not verdict))
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
                # how the steps the judge saw were read: the step parsers of the model's runs
                "step_parsers": sorted(row["step_parsers"]),
                "rank": rule["rank"],
                "tied": rule["tied"],
                "rank_interval": rule["rank_interval"],
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
                "calibrated": judge_calibration(
                    judge, row["successes"], row["calibration_items"], human_source=human_source
                )
                if row["successes"]
                else None,
                "score": structured["score"],
                "score_n": structured["n_scored"],
                "score_ci95": structured["ci95"]["score"],
                # why score_ci95 is null for a scored model (never a zero-width interval), and
                # its method: the run page's score_summary, one selector for both
                "score_not_estimable": structured["not_estimable"]["score"],
                "score_interval_name": structured["interval_name"],
                "score_approximate": structured["approximate"],
            }
        )
    family = pairwise_tests(counts)
    return {key: ranked[key] for key in ("basis", "min_coverage", "n_items", "n_common_items", "n_complete")} | {
        "judge": judge,
        "split": split,
        "calibration_human_source": human_source,
        "n_items_not_common": ranked["n_items"] - ranked["n_common_items"],
        "rows": rows,
        "n_comparisons": next(iter(family.values()))["n_comparisons"] if family else 0,
        "n_decided": sum(1 for test in family.values() if test["decision"]),
        "pairwise": [
            percent_forms({"model_a": a, "model_b": b, **{key: test[key] for key in PAIRWISE_FIELDS}}, ["difference"])
            for (a, b), test in sorted(
                family.items(), key=lambda pair: (pair[1]["p_adjusted"] is None, pair[1]["p_adjusted"] or 0.0, pair[0])
            )
        ],
    }


# What the leaderboard gives of each pair of models (the compare form's family; the compare
# page and API give the same pair with its interval).
PAIRWISE_FIELDS = (
    "n_items",
    "difference",
    "test",
    "a_only",
    "b_only",
    "p_value",
    "p_adjusted",
    "n_comparisons",
    "decision",
)


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
    procedures both have a usable verdict for, the difference with its paired interval, the
    exact test's p-value and that p-value adjusted by Holm over every pair of the models
    this judge judged in the slice (the pairs the leaderboard's compare form offers), and
    the decision (judging/coverage.py ``paired_comparison``). Raises ``KeyError`` naming
    ``a`` or ``b`` when this judge has judged nothing of that model in the slice."""
    counts, _ = verdict_counts(judge, split)
    for field, model in (("a", a), ("b", b)):
        if model not in counts:
            raise KeyError(field)
    family = pairwise_tests(counts)[(a, b) if a < b else (b, a)]
    return {
        "judge": judge,
        "split": split,
        "model_a": a,
        "model_b": b,
        "n_models": len(counts),
        **paired_comparison(counts[a], counts[b], resamples=resamples, seed=seed, adjusted=family),
    }


def _count_matrices(
    counts: dict[str, dict[int, tuple[int, int, int]]], models: list[str], items: list[int]
) -> tuple[list[list[int]], list[list[int]]]:
    """(no_failure, judged) matrices, models x items."""
    passes = [[counts[m].get(i, (0, 0, 0))[0] for i in items] for m in models]
    judged = [[counts[m].get(i, (0, 0, 0))[1] for i in items] for m in models]
    return passes, judged


def cross_judge_rankings(
    judges: list[str], split: str | None = None, *, min_coverage: float = LEADERBOARD_MIN_COVERAGE
) -> dict[str, Any]:
    """Rankings of the models under several judges on the same procedures (on those of
    ``split`` when given), and the rank correlations between judges (paper Figure 5).

    A model is **complete** when its coverage (usable verdicts over the procedures it
    should have been judged on, ``expected_items``) is at least ``min_coverage`` under every
    chosen judge. The **common items** are the procedures every chosen judge has a usable
    verdict for, for every complete model: each complete model is scored under each judge
    on exactly those (``common_estimates``, ``ranks``: competition ranks, ties shared), and
    Kendall's tau-b and Spearman's rho between two judges are computed over the complete
    models' scores on them, with BCa bootstrap intervals resampling those procedures
    (judging/rankings.py). Incomplete models are listed (``incomplete_models``, with the
    judges they fall short under in ``left_out``) but left out of the ranks and of tau.
    ``estimates[judge][model]``: every model's score over all its judged procedures under
    that judge, with its coverage."""
    counted = {judge: verdict_counts(judge, split) for judge in judges}
    all_models = sorted({m for counts, _ in counted.values() for m in counts})
    expected = expected_items(all_models, split)
    estimates = {
        judge: {
            model: estimate_over(c, n_items=expected_count(c, expected.get(model, ()), len(items)))
            for model, c in counts.items()
        }
        for judge, (counts, items) in counted.items()
    }
    scores = {
        judge: {m: e["how2score"] for m, e in by_model.items() if e["how2score"] is not None}
        for judge, by_model in estimates.items()
    }
    left_out: dict[str, list[str]] = {}
    for model in all_models:
        short = [
            judge
            for judge in judges
            if model not in estimates[judge] or (estimates[judge][model]["coverage"] or 0.0) < min_coverage
        ]
        if short:
            left_out[model] = short
    complete = [m for m in all_models if m not in left_out] if judges else []
    common: set[int] = set()
    if complete:
        usable = [judged_items(counted[judge][0][model]) for judge in judges for model in complete]
        common = cast(set[int], set.intersection(*usable))  # procedure ids
    if not common:
        # Complete under every judge, yet no procedure is judged usably for all of them:
        # nothing to rank on the same items.
        left_out |= {m: [] for m in complete}
        complete = []
    items = sorted(common)
    n_slice = len(set().union(*(i for _, i in counted.values()), *expected.values())) if judges else 0
    common_estimates = {
        judge: {m: estimate_over(counted[judge][0][m], n_items=len(items), items=common) for m in complete}
        for judge in judges
    }
    common_scores = {
        judge: {m: e["how2score"] for m, e in by_model.items() if e["how2score"] is not None}
        for judge, by_model in common_estimates.items()
    }
    ranks = {
        judge: {
            m: {"rank": rank, "tied": tied}
            for m, (rank, tied) in competition_ranks(
                {m: Fraction(*_pass_judged(counted[judge][0][m], items)) for m in by_model}
            ).items()
        }
        for judge, by_model in common_scores.items()
    }
    pairs = []
    for i, a in enumerate(judges):
        for b in judges[i + 1 :]:
            x = [common_scores[a][m] for m in complete]
            y = [common_scores[b][m] for m in complete]
            intervals = rank_correlation_intervals(
                _count_matrices(counted[a][0], complete, items), _count_matrices(counted[b][0], complete, items)
            )
            pairs.append(
                {
                    "judges": (a, b),
                    "n_models": len(complete),
                    "kendall_tau": kendall_tau(x, y) if len(complete) >= 2 else None,
                    "spearman": spearman_rho(x, y),
                    **intervals,
                }
            )
    table = [
        {
            "model": m,
            "complete": m not in left_out,
            "left_out_under": left_out.get(m, []),
            "cells": [
                {
                    "own": estimates[j].get(m),
                    "common": common_estimates[j].get(m),
                    "rank": ranks[j].get(m, {}).get("rank"),
                    "tied": ranks[j].get(m, {}).get("tied", False),
                }
                for j in judges
            ],
        }
        for m in complete + [m for m in all_models if m in left_out]
    ]
    return {
        "judges": judges,
        "split": split,
        "min_coverage": min_coverage,
        "models": all_models,
        "complete_models": complete,
        "incomplete_models": [m for m in all_models if m in left_out],
        "left_out": left_out,
        "n_items": n_slice,
        "n_common_items": len(items),
        "n_items_not_common": n_slice - len(items),
        "scores": scores,
        "estimates": estimates,
        "common_estimates": common_estimates,
        "ranks": ranks,
        "table": table,
        "pairs": pairs,
    }


def _pass_judged(counts: dict[int, tuple[int, int, int]], items: list[int]) -> tuple[int, int]:
    return sum(counts[i][0] for i in items), sum(counts[i][1] for i in items)


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
