"""Coverage and the ranking rule of How2Score leaderboards. Pure Python, no Django.

A leaderboard's **items** are procedures. For each model we hold, per item, ``(no_failure,
judged, unusable)``: how many of its generations of that procedure the judge labelled
no_failure, how many got a usable verdict at all, and how many got no usable answer (an
unusable answer, or a request that ended api_error; never scored). Beside them, per model,
the items it **should** have been judged on (``expected``): the procedures of its generation
runs (asked for or generated), or the How2Bench split for imported generations without a run
(judging/selectors.py ``expected_items``).

The rule (docs/how2bench.md, "Uncertainty, coverage and the ranking rule"):

* A model's **coverage** is the share of the items it should have been judged on that have
  at least one usable verdict, never the share of the items that happen to have a judgment.
  A model with coverage >= ``min_coverage`` is **complete**.
* Only complete models are ranked. By default (``basis="common"``) they are ranked over the
  **common items**: the items every complete model has a usable verdict for, so every ranked
  score is computed over the same procedures. ``basis="all"`` scores each model over all its
  judged items instead (each row states its coverage); complete models are still ranked first.
* Equal scores share a rank (standard competition ranking: 1, 2=, 2=, 4) and are marked
  ``tied``; every ranked model has a ``rank_interval`` [best, worst]: the ranks its 95 %
  score interval allows against the others' (best = 1 + the models whose lower bound is
  above its upper bound; worst = 1 + the other models whose upper bound is above its lower
  bound).
* Incomplete models are listed after every complete one, unranked, by coverage (highest
  first), each scored over its own judged items, so a model judged on 3 of 17 procedures
  can never top the table silently.
* Two models are compared on the items both have a usable verdict for (``paired_comparison``):
  with one judged generation per item, the difference takes Newcombe's paired score interval
  (method 10) and the exact McNemar p-value; with several, a paired BCa bootstrap interval
  and the exact sign test. "A is better than B" is decided only when the p-value, adjusted
  by Holm over every pair offered (``pairwise_tests``), is below 5 %."""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping
from fractions import Fraction
from itertools import combinations
from typing import Any

import numpy as np

from core.app_errors import InvalidInput
from core.intervals import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    HOLM,
    MCNEMAR_EXACT,
    NEWCOMBE_PAIRED,
    SIGN_TEST,
    holm_adjust,
    interval_fields,
    mcnemar_exact,
    newcombe_paired_interval,
    paired_bootstrap_difference,
    sign_test_exact,
)
from judging.how2score import how2score_estimate, percent_forms

BASIS_COMMON = "common"
BASIS_ALL = "all"
BASES = (BASIS_COMMON, BASIS_ALL)
# "A is better than B" when the Holm-adjusted p-value is below this: a 5 % chance of any
# false decision among all the pairs offered (family-wise error rate; Holm 1979).
DECISION_LEVEL = 0.05

# Keyed by item id (procedure ids, or any hashable key): Any, since a Mapping's key type is invariant.
ItemCounts = Mapping[Any, tuple[int, int, int]]
"""item -> (no_failure, judged, unusable) of one model."""


def estimate_over(counts: ItemCounts, *, n_items: int, items: Collection[Hashable] | None = None) -> dict[str, Any]:
    """``how2score_estimate`` of one model over ``items`` (all its items when None), with
    coverage against ``n_items``."""
    chosen = list(counts.values()) if items is None else [counts[i] for i in items if i in counts]
    return how2score_estimate(
        sum(c[0] for c in chosen),
        sum(c[1] for c in chosen),
        n_unusable=sum(c[2] for c in chosen),
        n_items=n_items,
        n_items_judged=sum(1 for c in chosen if c[1] > 0),
    )


def judged_items(counts: ItemCounts) -> set[Hashable]:
    """The items a model has at least one usable verdict for."""
    return {item for item, c in counts.items() if c[1] > 0}


def check_min_coverage(value: float) -> float:
    if not 0.0 <= value <= 1.0:
        raise InvalidInput(fields={"min_coverage": f"must be between 0 and 1, got {value}"})
    return value


def expected_count(counts: ItemCounts, expected: Collection[Hashable] | None, n_items: int) -> int:
    """How many items a model should have been judged on: its ``expected`` items (and any
    item it holds a judgment for outside them), or ``n_items`` when none are given."""
    if expected is None:
        return n_items
    return len(set(expected) | set(counts))


def _score(estimate: dict[str, Any], counts: ItemCounts, items: Collection[Hashable] | None) -> Fraction | None:
    """The shown score as an exact fraction (ties are decided exactly, not on floats)."""
    if estimate["how2score"] is None:
        return None
    chosen = list(counts.values()) if items is None else [counts[i] for i in items if i in counts]
    return Fraction(sum(c[0] for c in chosen), sum(c[1] for c in chosen))


def competition_ranks(scores: Mapping[str, Any]) -> dict[str, tuple[int, bool]]:
    """Standard competition ranking of ``scores`` (higher is better): a model's rank is 1 +
    the number of models with a strictly higher score, so equal scores share a rank and the
    next rank is skipped (1, 2, 2, 4). Returns ``model -> (rank, tied)``."""
    values = list(scores.values())
    return {
        model: (1 + sum(1 for v in values if v > score), sum(1 for v in values if v == score) > 1)
        for model, score in scores.items()
    }


def rank_intervals(intervals: Mapping[str, list[float] | tuple[float, float]]) -> dict[str, list[int]]:
    """The ranks each model's 95 % score interval allows among the others': ``[best,
    worst]`` with best = 1 + the models whose lower bound is above its upper bound (surely
    ahead), worst = 1 + the other models whose upper bound is above its lower bound (possibly
    ahead)."""
    result = {}
    for model, (low, high) in intervals.items():
        others = [interval for other, interval in intervals.items() if other != model]
        result[model] = [1 + sum(1 for o in others if o[0] > high), 1 + sum(1 for o in others if o[1] > low)]
    return result


def ranking(
    counts_by_model: Mapping[str, ItemCounts],
    *,
    n_items: int,
    basis: str = BASIS_COMMON,
    min_coverage: float,
    expected: Mapping[str, Collection[Hashable]] | None = None,
) -> dict[str, Any]:
    """Apply the ranking rule. ``expected[m]``: the items model m should have been judged
    on, its coverage's denominator (every model against ``n_items`` when None). Returns
    ``{"basis", "min_coverage", "n_items", "n_common_items", "n_complete", "order",
    "models"}``: ``order`` lists the models as they are shown; ``models[m]`` holds
    ``all_items`` (its estimate over all its judged items, coverage against what it should
    have been judged on), ``common_items`` (over the common items; None for an incomplete
    model), ``shown`` (the estimate the row shows under ``basis``), ``scored_on`` ("common"
    or "own"), ``complete``, ``rank`` (None when not ranked; equal scores share one),
    ``tied`` and ``rank_interval`` ([best, worst], None when not ranked)."""
    if basis not in BASES:
        raise InvalidInput(fields={"basis": f"must be one of {', '.join(BASES)}, got {basis!r}"})
    check_min_coverage(min_coverage)
    models: dict[str, dict[str, Any]] = {}
    for model, counts in counts_by_model.items():
        denominator = expected_count(counts, None if expected is None else expected.get(model, ()), n_items)
        all_items = estimate_over(counts, n_items=denominator)
        models[model] = {"all_items": all_items, "complete": (all_items["coverage"] or 0.0) >= min_coverage}
    complete = [m for m, row in models.items() if row["complete"]]
    common = set.intersection(*(judged_items(counts_by_model[m]) for m in complete)) if complete else set()
    scores: dict[str, Fraction] = {}
    for model, row in models.items():
        row["common_items"] = (
            estimate_over(counts_by_model[model], n_items=len(common), items=common) if row["complete"] else None
        )
        on_common = basis == BASIS_COMMON and row["complete"]
        row["shown"] = row["common_items"] if on_common else row["all_items"]
        row["scored_on"] = "common" if on_common else "own"
        score = _score(row["shown"], counts_by_model[model], common if on_common else None)
        if row["complete"] and score is not None:
            scores[model] = score

    def order(model: str) -> tuple[bool, float, bool, float, str]:
        # Complete rows by score; incomplete rows after them by coverage, so an unranked row
        # is never read as the top of a ranking. Equal scores share a rank; the name only
        # orders the tied rows on the page.
        row = models[model]
        score, coverage = row["shown"]["how2score"], row["all_items"]["coverage"] or 0.0
        exact = scores.get(model)
        return (
            not row["complete"],
            0.0 if row["complete"] else -coverage,
            score is None,
            -(float(exact) if exact is not None else score or 0.0),
            model,
        )

    ranks = competition_ranks(scores)
    allowed = rank_intervals({m: models[m]["shown"]["ci95"] for m in scores})
    for model, row in models.items():
        row["rank"], row["tied"] = ranks.get(model, (None, False))
        row["rank_interval"] = allowed.get(model)
    return {
        "basis": basis,
        "min_coverage": min_coverage,
        "n_items": n_items,
        "n_common_items": len(common),
        "n_complete": len(complete),
        "order": sorted(models, key=order),
        "models": models,
    }


# --- Is A better than B? -------------------------------------------------------------------


def _common(a: ItemCounts, b: ItemCounts) -> list[Hashable]:
    return sorted(judged_items(a) & judged_items(b), key=repr)


def paired_test(a: ItemCounts, b: ItemCounts) -> dict[str, Any]:
    """The exact test of "A and B pass equally often" on the items both have a usable
    verdict for. With exactly one judged generation of each model per item (the usual
    case), the 2x2 table (``both``, ``a_only``, ``b_only``, ``neither``) and the exact
    McNemar p-value; otherwise the exact sign test of the per-item differences of the two
    shares (``a_only`` / ``b_only``: the items where A's / B's share is higher, ``both`` and
    ``neither`` None, ``n_equal`` the items with no difference). Returns those with
    ``n_items``, ``difference`` (A's score minus B's on those items, 0-1), ``design`` ("one
    generation per item" or "several generations per item"), ``test`` and ``p_value`` (None
    without a common item)."""
    common = _common(a, b)
    single = all(a[i][1] == 1 and b[i][1] == 1 for i in common)
    sums = [sum(counts[i][k] for i in common) for counts in (a, b) for k in (0, 1)]
    result: dict[str, Any] = {
        "n_items": len(common),
        "difference": sums[0] / sums[1] - sums[2] / sums[3] if common else None,
        "design": "one generation per item" if single else "several generations per item",
        "test": MCNEMAR_EXACT if single else SIGN_TEST,
    }
    if single:
        table = {"both": 0, "a_only": 0, "b_only": 0, "neither": 0}
        for item in common:
            key = {(1, 1): "both", (1, 0): "a_only", (0, 1): "b_only", (0, 0): "neither"}[(a[item][0], b[item][0])]
            table[key] += 1
        result |= table | {"n_equal": table["both"] + table["neither"]}
        result["difference"] = (table["a_only"] - table["b_only"]) / len(common) if common else None
        result["p_value"] = mcnemar_exact(table["a_only"], table["b_only"]) if common else None
    else:
        shares = [Fraction(a[i][0], a[i][1]) - Fraction(b[i][0], b[i][1]) for i in common]
        ahead_a, ahead_b = sum(1 for d in shares if d > 0), sum(1 for d in shares if d < 0)
        result |= {"both": None, "a_only": ahead_a, "b_only": ahead_b, "neither": None}
        result["n_equal"] = len(common) - ahead_a - ahead_b
        result["p_value"] = sign_test_exact(ahead_a, ahead_b)
    result["n_discordant"] = result["a_only"] + result["b_only"]
    return result


def _count_arrays(counts_by_model: Mapping[str, ItemCounts]) -> dict[str, tuple[Any, Any]]:
    """(passes, judged) arrays of every model over the union of their items, one order."""
    items = {item for counts in counts_by_model.values() for item in counts}
    index = {item: position for position, item in enumerate(items)}
    arrays = {}
    for model, counts in counts_by_model.items():
        passes, judged = np.zeros(len(index), dtype=np.int64), np.zeros(len(index), dtype=np.int64)
        for item, (p, j, _unusable) in counts.items():
            passes[index[item]], judged[index[item]] = p, j
        arrays[model] = (passes, judged)
    return arrays


def _paired_test_fast(a: tuple[Any, Any], b: tuple[Any, Any]) -> dict[str, Any] | None:
    """``paired_test`` of the usual design (one judged generation of each model per common
    item) on arrays, for a leaderboard's every pair; None for the other design (done by
    ``paired_test``)."""
    (pa, ja), (pb, jb) = a, b
    common = (ja > 0) & (jb > 0)
    if not ((ja[common] == 1) & (jb[common] == 1)).all():
        return None
    n = int(common.sum())
    xa, xb = pa[common] == 1, pb[common] == 1
    table = {
        "both": int((xa & xb).sum()),
        "a_only": int((xa & ~xb).sum()),
        "b_only": int((~xa & xb).sum()),
        "neither": int((~xa & ~xb).sum()),
    }
    return {
        "n_items": n,
        "difference": (table["a_only"] - table["b_only"]) / n if n else None,
        "design": "one generation per item",
        "test": MCNEMAR_EXACT,
        **table,
        "n_equal": table["both"] + table["neither"],
        "p_value": mcnemar_exact(table["a_only"], table["b_only"]) if n else None,
        "n_discordant": table["a_only"] + table["b_only"],
    }


def pairwise_tests(counts_by_model: Mapping[str, ItemCounts]) -> dict[tuple[str, str], dict[str, Any]]:
    """Every pair of models (names in sorted order) with its exact test (``paired_test``)
    and its p-value adjusted by Holm over all the pairs that have a common item: the family
    a leaderboard offers. Each value adds ``p_adjusted``, ``n_comparisons`` (None and the
    family's size for a pair without a common item) and ``decision`` ("a": the first model
    of the pair is better, "b", or None)."""
    tests = {
        (a, b): _paired_test_fast(arrays[a], arrays[b]) or paired_test(counts_by_model[a], counts_by_model[b])
        for arrays in [_count_arrays(counts_by_model)]
        for a, b in combinations(sorted(counts_by_model), 2)
    }
    family = [pair for pair, test in tests.items() if test["p_value"] is not None]
    adjusted = dict(zip(family, holm_adjust([tests[pair]["p_value"] for pair in family])))
    for pair, test in tests.items():
        test["p_adjusted"] = adjusted.get(pair)
        test["n_comparisons"] = len(family)
        test["decision"] = decision(test, test["difference"])
    return tests


def decision(test: Mapping[str, Any], difference: float | None) -> str | None:
    """Return "a" or "b" (the better model) when the Holm-adjusted p-value is below
    ``DECISION_LEVEL`` and the test's direction agrees with the sign of the difference;
    None otherwise (the items do not show that either is better)."""
    p = test.get("p_adjusted")
    if p is None or p >= DECISION_LEVEL or difference is None:
        return None
    if test["a_only"] > test["b_only"] and difference > 0:
        return "a"
    if test["b_only"] > test["a_only"] and difference < 0:
        return "b"
    return None


def paired_comparison(
    a: ItemCounts,
    b: ItemCounts,
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
    adjusted: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Is A better than B? Both models' How2Scores on the items both have a usable verdict
    for (``a`` and ``b``: ``how2score_estimate`` each, coverage against those common items),
    the exact test (``paired_test``: its counts, ``test``, ``p_value``) and the difference
    A - B with its interval: ``difference`` and ``ci95`` on 0-1, ``difference_percent`` and
    ``ci95_percent`` in points of 0-100, ``interval`` / ``interval_name`` / ``approximate``
    and ``interval_reason`` (why ``ci95`` is None). One generation per item: Newcombe's
    paired score interval; several: the paired BCa bootstrap (``resamples``, ``seed``; None
    otherwise). ``adjusted``: this pair's entry of ``pairwise_tests`` (its ``p_adjusted`` and
    ``n_comparisons``); without it the pair is its own family of one. ``decision``: "a", "b"
    or None (``decision``)."""
    common = _common(a, b)
    test = paired_test(a, b)
    n = len(common)
    if test["design"] == "one generation per item":
        result: dict[str, Any] = {
            "difference": (test["a_only"] - test["b_only"]) / n if n else None,
            "ci95": newcombe_paired_interval(test["both"], test["a_only"], test["b_only"], test["neither"]),
            "interval_reason": None if n else "no common item",
            "n_items": n,
            "resamples": None,
            "seed": None,
            **interval_fields(NEWCOMBE_PAIRED, n),
        }
    else:
        result = paired_bootstrap_difference(
            [(a[i][0], a[i][1]) for i in common],
            [(b[i][0], b[i][1]) for i in common],
            scale=1.0,
            resamples=resamples,
            seed=seed,
        )
    family = (
        adjusted
        if adjusted is not None
        else {
            "p_adjusted": test["p_value"],
            "n_comparisons": 1 if test["p_value"] is not None else 0,
        }
    )
    test |= {"p_adjusted": family["p_adjusted"], "n_comparisons": family["n_comparisons"], "p_adjustment": HOLM}
    return {
        "a": estimate_over(a, n_items=n, items=common),
        "b": estimate_over(b, n_items=n, items=common),
        **percent_forms(result, ["difference", "ci95"]),
        **test,
        "decision_level": DECISION_LEVEL,
        "decision": decision(test, result["difference"]),
    }
