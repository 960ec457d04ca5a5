"""Kappa statistics. Pure Python and NumPy, no Django.

**Cohen's kappa** between two paired label sequences (a judge against the human majority,
two raters against each other), with a BCa bootstrap interval over the pairs (Efron 1987):
kappa has no closed-form interval that holds at small n, and a zero-width interval (two
raters who agree on every item) is reported as not estimable, never as [1, 1].

**Fleiss' kappa**: agreement of a fixed number of raters per item over nominal categories
(Fleiss 1971; Fleiss, Levin, Paik 1981), the statistic CoScript reports for its crowd
validation (Yuan et al. 2023, §4.4: 0.86 on specific goals, 0.79 on scripts).

Written here rather than taken from statsmodels (``statsmodels.stats.inter_rater.fleiss_kappa``
computes the same formula from the same count table): the formula is a few lines, and
statsmodels with patsy would be a large dependency for one function; the bootstrap interval
needs the per-item terms anyway. The tests check it on Fleiss' (1971) worked example.

With N items, n ratings per item, k categories and n_ij the raters who put item i in
category j:

    p_j = sum_i n_ij / (N n)                        share of all ratings in category j
    P_i = (sum_j n_ij^2 - n) / (n (n - 1))          agreeing rater pairs of item i
    P   = mean_i P_i,   P_e = sum_j p_j^2
    kappa = (P - P_e) / (1 - P_e)

kappa is undefined (``None``) when P_e = 1 (every rating in one category) or when there are
no items."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from annotate.stats.bootstrap import (
    DEFAULT_BOOTSTRAP,
    JACKKNIFE_MAX_ITEMS,
    SeedLike,
    check_bootstrap,
    item_bootstrap_fields,
    item_bootstrap_interval,
)
from core.intervals import PERFECT_AGREEMENT, interval_fields, perfect_agreement_interval


def count_table(ratings: Sequence[Sequence[Hashable]], categories: Sequence[Hashable]) -> npt.NDArray[np.float64]:
    """Items x categories counts from the ratings of each item (one value per rater)."""
    index = {category: j for j, category in enumerate(categories)}
    table = np.zeros((len(ratings), len(categories)))
    for i, item in enumerate(ratings):
        for value in item:
            if value not in index:
                raise ValueError(f"item {i}: {value!r} is not one of the categories {list(categories)!r}")
            table[i, index[value]] += 1
    return table


def _checked(counts: Sequence[Sequence[float]] | npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.float64], int]:
    table = np.asarray(counts, dtype=np.float64)
    if table.ndim != 2:
        raise ValueError("counts must be an items x categories table")
    if table.size and (table < 0).any():
        raise ValueError("counts must not be negative")
    totals = table.sum(axis=1)
    if table.shape[0] and not np.all(totals == totals[0]):
        raise ValueError("Fleiss' kappa needs the same number of ratings for every item")
    n = int(totals[0]) if table.shape[0] else 0
    if table.shape[0] and n < 2:
        raise ValueError("Fleiss' kappa needs at least two ratings per item")
    return table, n


def _kappa(item_agreement: npt.NDArray[np.float64], category_share: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """kappa per column: P (1 x B) and p_j (k x B); NaN where P_e = 1."""
    expected = (category_share**2).sum(axis=0)
    kappa = np.full(expected.shape, np.nan)
    defined = expected < 1.0 - 1e-12
    kappa[defined] = (item_agreement[defined] - expected[defined]) / (1.0 - expected[defined])
    return kappa


def fleiss_kappa(counts: Sequence[Sequence[float]] | npt.NDArray[np.float64]) -> float | None:
    """Fleiss' kappa of an items x categories count table whose rows all sum to the same
    number of ratings n >= 2. ``None`` when undefined (no items, or P_e = 1)."""
    table, n = _checked(counts)
    if table.shape[0] == 0:
        return None
    per_item = ((table**2).sum(axis=1) - n) / (n * (n - 1))
    share = table.sum(axis=0) / (table.shape[0] * n)
    value = _kappa(np.array([per_item.mean()]), share[:, None])[0]
    return None if np.isnan(value) else float(value)


def fleiss_kappa_estimate(
    counts: Sequence[Sequence[float]] | npt.NDArray[np.float64],
    *,
    bootstrap: int = 1000,
    seed: int | np.random.SeedSequence = 0,
) -> tuple[list[float] | None, str | None]:
    """95 % BCa bootstrap interval of Fleiss' kappa (Efron 1987), resampling the items with
    replacement ``bootstrap`` times with ``numpy.random.default_rng(seed)``, the acceleration
    from the jackknife over items (up to ``JACKKNIFE_MAX_ITEMS`` items); resamples where kappa
    is undefined are left out. Returns ``(ci95, None)``; ``(None, None)`` when kappa is
    undefined, there are no items or ``bootstrap`` is 0; ``(None, reason)`` when every
    resample gives the same kappa ("interval not estimable (n = ...)", never a zero-width
    interval)."""
    if bootstrap < 0:
        raise ValueError(f"bootstrap must be a non-negative number of resamples, got {bootstrap}")
    table, n = _checked(counts)
    n_items = table.shape[0]
    point = fleiss_kappa(table)
    if n_items == 0 or bootstrap == 0 or point is None:
        return None, None
    rng = np.random.default_rng(seed)
    per_item = ((table**2).sum(axis=1) - n) / (n * (n - 1))

    def kappas(weights: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """kappa per column of weights (items x resamples: how often each item is drawn)."""
        total = weights.sum(axis=0)
        return _kappa(per_item @ weights / total, table.T @ weights / (total * n))

    values = []
    block = max(1, min(bootstrap, 4_000_000 // max(n_items, 1)))
    for start in range(0, bootstrap, block):
        size = min(block, bootstrap - start)
        # weights[i, b]: how often item i is drawn in resample b
        weights = rng.multinomial(n_items, np.full(n_items, 1.0 / n_items), size=size).T.astype(np.float64)
        values.append(kappas(weights))
    jackknife = kappas(1.0 - np.eye(n_items)) if 2 <= n_items <= JACKKNIFE_MAX_ITEMS else None
    return item_bootstrap_interval(np.concatenate(values), point, jackknife, n_items, low=-1.0, high=1.0)


def fleiss_kappa_interval(
    counts: Sequence[Sequence[float]] | npt.NDArray[np.float64],
    *,
    bootstrap: int = 1000,
    seed: int | np.random.SeedSequence = 0,
) -> list[float] | None:
    """The 95 % BCa bootstrap interval of Fleiss' kappa (``fleiss_kappa_estimate``); None when
    kappa is undefined, there are no items, ``bootstrap`` is 0 or it is not estimable."""
    return fleiss_kappa_estimate(counts, bootstrap=bootstrap, seed=seed)[0]


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> float | None:
    """Cohen's kappa between two paired label sequences: (p_o - p_e) / (1 - p_e) with p_o
    the observed agreement and p_e the agreement expected from each side's marginals.
    ``None`` when there are no pairs or when p_e = 1 (both sides always give the same
    single label), where kappa is undefined."""
    if len(a) != len(b):
        raise ValueError(f"label sequences differ in length ({len(a)} and {len(b)})")
    n = len(a)
    if n == 0:
        return None
    p_o = sum(1 for x, y in zip(a, b) if x == y) / n
    count_a: dict[Hashable, int] = defaultdict(int)
    count_b: dict[Hashable, int] = defaultdict(int)
    for x in a:
        count_a[x] += 1
    for y in b:
        count_b[y] += 1
    p_e = sum(count_a[label] * count_b[label] for label in count_a) / (n * n)
    if p_e >= 1.0:
        return None
    return (p_o - p_e) / (1.0 - p_e)


def _kappa_of_counts(
    both: npt.NDArray[np.float64],
    first_only: npt.NDArray[np.float64],
    second_only: npt.NDArray[np.float64],
    neither: npt.NDArray[np.float64],
) -> npt.NDArray[np.float64]:
    """Cohen's kappa of two boolean sequences from their 2x2 counts (true/true, true/false,
    false/true, false/false), element-wise; NaN where undefined (p_e = 1 or no pair)."""
    n = both + first_only + second_only + neither
    with np.errstate(divide="ignore", invalid="ignore"):
        p_o = (both + neither) / n
        p_x, p_y = (both + first_only) / n, (both + second_only) / n
        p_e = p_x * p_y + (1.0 - p_x) * (1.0 - p_y)
        kappa = (p_o - p_e) / (1.0 - p_e)
    return np.where((n > 0) & (p_e < 1.0 - 1e-12), kappa, np.nan)


def kappa_estimate(
    a: Sequence[bool], b: Sequence[bool], *, bootstrap: int = DEFAULT_BOOTSTRAP, seed: SeedLike = 0
) -> dict[str, Any]:
    """Cohen's kappa between two paired boolean label sequences with its 95 % BCa bootstrap
    interval over the pairs (Efron 1987; the acceleration from the jackknife over pairs), or,
    when the two agree on every pair (every resample gives 1), the Wilson bound of the
    disagreement share (``core.intervals.perfect_agreement_interval``):
    ``cohen_kappa``, ``ci95``, ``not_estimable`` (why ``ci95`` is null for a defined kappa:
    every resample gives the same kappa, e.g. two raters who agree on every item), ``n`` and
    the method's ``interval``, ``interval_name`` and ``approximate`` (``interval_fields``).

    Resampling n pairs with replacement is drawing the 2x2 table's four counts from a
    multinomial with the observed shares, so each resample costs four numbers whatever n.
    Resamples where kappa is undefined (p_e = 1: both sides give one label) are left out.
    ``ci95`` is None when kappa is undefined or ``bootstrap`` is 0."""
    check_bootstrap(bootstrap)
    if len(a) != len(b):
        raise ValueError(f"label sequences differ in length ({len(a)} and {len(b)})")
    n = len(a)
    point = cohen_kappa(list(a), list(b))
    result: dict[str, Any] = {"cohen_kappa": point, "ci95": None, "not_estimable": None, "n": n}
    result.update(item_bootstrap_fields(n))
    if bootstrap == 0 or point is None:
        return result
    counts = np.zeros(4)
    for x, y in zip(a, b):
        counts[(0 if x else 2) + (0 if y else 1)] += 1  # both, first only, second only, neither
    rng = np.random.default_rng(seed)
    drawn = rng.multinomial(n, counts / n, size=bootstrap).T.astype(np.float64)
    values = _kappa_of_counts(*drawn)
    # Jackknife: leaving out one pair of cell c gives the same kappa for every pair of that cell.
    left_out = counts[:, None] - np.eye(4)
    per_cell = _kappa_of_counts(*left_out)
    jackknife = np.repeat(per_cell, counts.astype(np.intp))
    result["ci95"], result["not_estimable"] = item_bootstrap_interval(values, point, jackknife, n, low=-1.0, high=1.0)
    if result["ci95"] is None and counts[1] + counts[2] == 0:
        # Perfect agreement: every resample gives 1; the Wilson bound of the disagreement share.
        p_x, p_y = (counts[0] + counts[1]) / n, (counts[0] + counts[2]) / n
        chance = p_x * p_y + (1.0 - p_x) * (1.0 - p_y)
        interval = perfect_agreement_interval(n, 1.0 - chance)
        if interval is not None:
            result.update(ci95=interval, not_estimable=None, **interval_fields(PERFECT_AGREEMENT, n))
    return result


def kappa_interval(
    a: Sequence[bool], b: Sequence[bool], *, bootstrap: int = DEFAULT_BOOTSTRAP, seed: SeedLike = 0
) -> list[float] | None:
    """The 95 % BCa bootstrap interval of ``cohen_kappa`` (``kappa_estimate``); None when kappa
    is undefined, ``bootstrap`` is 0 or the interval is not estimable."""
    interval: list[float] | None = kappa_estimate(a, b, bootstrap=bootstrap, seed=seed)["ci95"]
    return interval
