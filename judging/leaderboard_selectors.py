"""Reads of the leaderboard: one judge's ranking of the models (each How2Score with its
interval and coverage, judging/coverage.py), every pair of models compared, and one pair
compared on its own."""

from __future__ import annotations

from typing import Any

from core.intervals import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED
from judging.calibration import HUMAN_MAJORITY, judge_calibration
from judging.constants import LEADERBOARD_MIN_COVERAGE
from judging.coverage import BASIS_ALL, BASIS_COMMON, paired_comparison, pairwise_tests, ranking
from judging.how2score import SCORE_FIELDS, How2ScoreTally, percent_forms
from judging.metrics import MetricsSummary, record_metrics
from judging.models import Generation, StepParser
from judging.score_selectors import generation_scores, score_summary
from judging.selectors import (
    expected_items,
    judge_request_failures,
    judge_runs_of,
    judgments_of,
    usable_verdict,
    verdict_counts,
)

# Difficulty slices by the reference's step count (How2Bench procedures have 5-15 steps, App. B.3).
STEP_COUNT_SLICES = ((5, 6), (7, 8), (9, 10), (11, 15))


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
    details = _model_details(judge, split)
    scores = generation_scores([g for row in details.values() for g in row["generations"]])
    rows = [
        _leaderboard_row(model, ranked["models"][model], details[model], scores, judge, human_source)
        for model in ranked["order"]
    ]
    return {key: ranked[key] for key in ("basis", "min_coverage", "n_items", "n_common_items", "n_complete")} | {
        "judge": judge,
        "split": split,
        "calibration_human_source": human_source,
        "n_items_not_common": ranked["n_items"] - ranked["n_common_items"],
        "rows": rows,
        **_pairwise_family(counts),
    }


def _model_details(judge: str, split: str | None) -> dict[str, dict[str, Any]]:
    """Per model, what its row adds to the ranking, gathered from every judged generation
    (a judge request that ended ``api_error`` among them, unusable): the per-topic and
    step-count tallies, the formatting proxies, the verdicts the calibration reads, its
    generations and the step parsers of its runs."""
    details: dict[str, dict[str, Any]] = {}
    judgments = (
        judgments_of(judge, split)
        .select_related("generation__procedure__topic", "generation__run")
        .order_by("generation__model", "id")
    )
    verdicts = [(j.generation, usable_verdict(j.outcome, j.has_failure)) for j in judgments]
    verdicts += [(g, None) for g in judge_request_failures(judge_runs_of(judge), split)]  # api_error: unusable
    for generation, verdict in verdicts:
        row = details.setdefault(generation.model, _model_detail(generation))
        _model_detail_add(row, generation, verdict)
    return details


def _model_detail(generation: Generation) -> dict[str, Any]:
    """The empty details of the model of ``generation``."""
    return {
        "label": generation.display_name,
        "tally": How2ScoreTally(),
        "slices": {s: How2ScoreTally() for s in STEP_COUNT_SLICES},
        "metrics": MetricsSummary(),
        "successes": [],
        "calibration_items": [],
        "generations": [],
        "step_parsers": set(),
    }


def _model_detail_add(row: dict[str, Any], generation: Generation, verdict: bool | None) -> None:
    """Count one judged generation (``verdict``: has_failure, None when unusable) in its model's details."""
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
        row["metrics"].add(record_metrics(reference_steps=procedure.steps, predicted_steps=generation.predicted_steps))


def _leaderboard_row(
    model: str,
    rule: dict[str, Any],
    row: dict[str, Any],
    scores: dict[int, Any],
    judge: str,
    human_source: str,
) -> dict[str, Any]:
    """One model's row: its place under the ranking's ``rule``, the score shown and its
    coverage, and what its details add (topics, slices, proxies, calibration, SCORE)."""
    shown, slice_ = rule["shown"], rule["all_items"]
    topics = row["tally"].result()
    structured = score_summary(scores[g.pk] for g in row["generations"] if g.pk in scores)
    return {
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
        "calibrated": judge_calibration(judge, row["successes"], row["calibration_items"], human_source=human_source)
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


def _pairwise_family(counts: dict[str, dict[int, tuple[int, int, int]]]) -> dict[str, Any]:
    """Every pair of models compared (judging/coverage.py ``pairwise_tests``), the pairs with
    the smallest adjusted p-value first: ``pairwise``, ``n_comparisons`` and ``n_decided``."""
    family = pairwise_tests(counts)
    return {
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
    return sorted(set(judgments_of(judge, split).values_list("generation__model", flat=True)))


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
