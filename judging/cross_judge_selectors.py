"""Reads of the cross-judge page: the models ranked under several judges on the same
procedures, and the rank correlations between judges (paper Figure 5; judging/rankings.py)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any, cast

from judging.constants import LEADERBOARD_MIN_COVERAGE
from judging.coverage import competition_ranks, estimate_over, expected_count, judged_items
from judging.rankings import kendall_tau, rank_correlation_intervals, spearman_rho
from judging.selectors import expected_items, verdict_counts

# Per model, per procedure judged: (no_failure, judged, unusable) (judging/selectors.py ``verdict_counts``).
Counts = dict[str, dict[int, tuple[int, int, int]]]


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
    counts = {judge: by_model for judge, (by_model, _) in counted.items()}
    left_out = _short_of_coverage(all_models, judges, estimates, min_coverage)
    complete = [m for m in all_models if m not in left_out] if judges else []
    common = _common_items(judges, counts, complete)
    if not common:
        # Complete under every judge, yet no procedure is judged usably for all of them:
        # nothing to rank on the same items.
        left_out |= {m: [] for m in complete}
        complete = []
    items = sorted(common)
    n_slice = len(set().union(*(i for _, i in counted.values()), *expected.values())) if judges else 0
    common_estimates = {
        judge: {m: estimate_over(counts[judge][m], n_items=len(items), items=common) for m in complete}
        for judge in judges
    }
    common_scores = _how2scores(common_estimates)
    ranks = {judge: _common_ranks(counts[judge], by_model, items) for judge, by_model in common_scores.items()}
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
        "scores": _how2scores(estimates),
        "estimates": estimates,
        "common_estimates": common_estimates,
        "ranks": ranks,
        "table": _model_table(judges, all_models, complete, left_out, estimates, common_estimates, ranks),
        "pairs": _judge_pairs(judges, counts, common_scores, complete, items),
    }


def _how2scores(estimates: dict[str, dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """Per judge, per model: the How2Score of its estimate, models without one left out."""
    return {
        judge: {m: e["how2score"] for m, e in by_model.items() if e["how2score"] is not None}
        for judge, by_model in estimates.items()
    }


def _short_of_coverage(
    models: list[str], judges: list[str], estimates: dict[str, dict[str, dict[str, Any]]], min_coverage: float
) -> dict[str, list[str]]:
    """Per model short of ``min_coverage`` under some judge (or not judged by it): those judges."""
    left_out: dict[str, list[str]] = {}
    for model in models:
        short = [
            judge
            for judge in judges
            if model not in estimates[judge] or (estimates[judge][model]["coverage"] or 0.0) < min_coverage
        ]
        if short:
            left_out[model] = short
    return left_out


def _common_items(judges: list[str], counts: dict[str, Counts], complete: list[str]) -> set[int]:
    """The procedures every judge has a usable verdict for, for every complete model (none without one)."""
    if not complete:
        return set()
    usable = [judged_items(counts[judge][model]) for judge in judges for model in complete]
    return cast(set[int], set.intersection(*usable))  # procedure ids


def _common_ranks(counts: Counts, by_model: dict[str, Any], items: list[int]) -> dict[str, dict[str, Any]]:
    """Competition ranks (ties shared) of the models of ``by_model`` by their exact share of
    no-failure verdicts on the common ``items`` under one judge."""
    return {
        m: {"rank": rank, "tied": tied}
        for m, (rank, tied) in competition_ranks(
            {m: Fraction(*_pass_judged(counts[m], items)) for m in by_model}
        ).items()
    }


def _judge_pairs(
    judges: list[str],
    counts: dict[str, Counts],
    common_scores: dict[str, dict[str, Any]],
    complete: list[str],
    items: list[int],
) -> list[dict[str, Any]]:
    """Every pair of judges: Kendall's tau-b and Spearman's rho over the complete models'
    scores on the common items, with their bootstrap intervals."""
    pairs = []
    for i, a in enumerate(judges):
        for b in judges[i + 1 :]:
            x = [common_scores[a][m] for m in complete]
            y = [common_scores[b][m] for m in complete]
            intervals = rank_correlation_intervals(
                _count_matrices(counts[a], complete, items), _count_matrices(counts[b], complete, items)
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
    return pairs


def _model_table(
    judges: list[str],
    models: list[str],
    complete: list[str],
    left_out: dict[str, list[str]],
    estimates: dict[str, dict[str, dict[str, Any]]],
    common_estimates: dict[str, dict[str, dict[str, Any]]],
    ranks: dict[str, dict[str, dict[str, Any]]],
) -> list[dict[str, Any]]:
    """One row per model, the complete ones first: under each judge, its own estimate, its
    estimate on the common items and its rank there."""
    return [
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
        for m in complete + [m for m in models if m in left_out]
    ]


def _count_matrices(counts: Counts, models: list[str], items: list[int]) -> tuple[list[list[int]], list[list[int]]]:
    """(no_failure, judged) matrices, models x items."""
    passes = [[counts[m].get(i, (0, 0, 0))[0] for i in items] for m in models]
    judged = [[counts[m].get(i, (0, 0, 0))[1] for i in items] for m in models]
    return passes, judged


def _pass_judged(counts: dict[int, tuple[int, int, int]], items: list[int]) -> tuple[int, int]:
    return sum(counts[i][0] for i in items), sum(counts[i][1] for i in items)
