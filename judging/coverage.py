"""Coverage and the ranking rule of How2Score leaderboards. Pure Python, no Django.

A leaderboard's **items** are the procedures of its slice that the judge was asked about
for at least one model (its judge runs' generation runs, and imported judgments), whether
or not an answer came back. For each model we hold, per item, ``(no_failure, judged,
unusable)``: how many of its generations of that procedure the judge labelled no_failure,
how many got a usable verdict at all, and how many got no usable answer (an unusable
answer, or a request that ended api_error; never scored).

The rule (docs/how2bench.md, "Uncertainty, coverage and the ranking rule"):

* A model's **coverage** is the share of the slice's items it has at least one usable
  verdict for. A model with coverage >= ``min_coverage`` is **complete**.
* Only complete models are ranked. By default (``basis="common"``) they are ranked over the
  **common items**: the items every complete model has a usable verdict for, so every ranked
  score is computed over the same procedures. ``basis="all"`` scores each model over all its
  judged items instead (each row states its coverage); complete models are still ranked first.
* Incomplete models are listed after every complete one, unranked, by coverage (highest
  first), each scored over its own judged items, so a model judged on 3 of 17 procedures
  can never top the table silently.
* Two models are compared on the items both have a usable verdict for, with a paired
  bootstrap interval (``core.intervals.paired_bootstrap_difference``)."""

from __future__ import annotations

from collections.abc import Collection, Hashable, Mapping
from typing import Any

from core.intervals import BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, paired_bootstrap_difference
from judging.how2score import how2score_estimate, percent_forms

BASIS_COMMON = "common"
BASIS_ALL = "all"
BASES = (BASIS_COMMON, BASIS_ALL)

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
        raise ValueError(f"min_coverage must be between 0 and 1, got {value}")
    return value


def ranking(
    counts_by_model: Mapping[str, ItemCounts], *, n_items: int, basis: str = BASIS_COMMON, min_coverage: float
) -> dict[str, Any]:
    """Apply the ranking rule. Returns ``{"basis", "min_coverage", "n_items",
    "n_common_items", "n_complete", "order", "models"}``: ``order`` lists the models as
    they are shown; ``models[m]`` holds ``all_items`` (its estimate over all its judged
    items), ``common_items`` (over the common items; None for an incomplete model),
    ``shown`` (the estimate the row shows under ``basis``), ``scored_on`` ("common" or
    "own"), ``complete`` and ``rank`` (None when not ranked)."""
    if basis not in BASES:
        raise ValueError(f"basis must be one of {', '.join(BASES)}, got {basis!r}")
    check_min_coverage(min_coverage)
    models: dict[str, dict[str, Any]] = {}
    for model, counts in counts_by_model.items():
        all_items = estimate_over(counts, n_items=n_items)
        models[model] = {"all_items": all_items, "complete": (all_items["coverage"] or 0.0) >= min_coverage}
    complete = [m for m, row in models.items() if row["complete"]]
    common = set.intersection(*(judged_items(counts_by_model[m]) for m in complete)) if complete else set()
    for model, row in models.items():
        row["common_items"] = (
            estimate_over(counts_by_model[model], n_items=len(common), items=common) if row["complete"] else None
        )
        on_common = basis == BASIS_COMMON and row["complete"]
        row["shown"] = row["common_items"] if on_common else row["all_items"]
        row["scored_on"] = "common" if on_common else "own"

    def order(model: str) -> tuple[bool, float, bool, float, str]:
        # Complete rows by score; incomplete rows after them by coverage, so an unranked row
        # is never read as the top of a ranking.
        row = models[model]
        score, coverage = row["shown"]["how2score"], row["all_items"]["coverage"] or 0.0
        return not row["complete"], 0.0 if row["complete"] else -coverage, score is None, -(score or 0.0), model

    ordered = sorted(models, key=order)
    rank = 0
    for model in ordered:
        row = models[model]
        if row["complete"] and row["shown"]["how2score"] is not None:
            rank += 1
            row["rank"] = rank
        else:
            row["rank"] = None
    return {
        "basis": basis,
        "min_coverage": min_coverage,
        "n_items": n_items,
        "n_common_items": len(common),
        "n_complete": len(complete),
        "order": ordered,
        "models": models,
    }


def paired_comparison(
    a: ItemCounts, b: ItemCounts, *, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> dict[str, Any]:
    """Is A better than B? Both models' How2Scores on the items both have a usable verdict
    for (``a`` and ``b``: ``how2score_estimate`` each, coverage against those common items),
    and the difference A - B with its paired bootstrap interval (``difference`` and ``ci95``
    on 0-1, ``difference_percent`` and ``ci95_percent`` in points of 0-100, ``n_items``,
    ``resamples``, ``seed``, ``interval``, ``share_a_better``, ``share_b_better``)."""
    common = sorted(judged_items(a) & judged_items(b), key=repr)
    difference = paired_bootstrap_difference(
        [(a[i][0], a[i][1]) for i in common],
        [(b[i][0], b[i][1]) for i in common],
        scale=1.0,
        resamples=resamples,
        seed=seed,
    )
    return {
        "a": estimate_over(a, n_items=len(common), items=common),
        "b": estimate_over(b, n_items=len(common), items=common),
        **percent_forms(difference, ["difference", "ci95"]),
    }
