"""Kappa statistics. Pure Python and NumPy, no Django.

**Cohen's kappa** between two paired label sequences (a judge against the human majority,
two raters against each other), with a bootstrap interval over the pairs.

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

import numpy as np
import numpy.typing as npt

from annotate.stats.bootstrap import DEFAULT_BOOTSTRAP, SeedLike, check_bootstrap
from core.intervals import percentile_interval, resample_blocks, uniform_draws


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


def fleiss_kappa_interval(
    counts: Sequence[Sequence[float]] | npt.NDArray[np.float64],
    *,
    bootstrap: int = 1000,
    seed: int | np.random.SeedSequence = 0,
) -> list[float] | None:
    """95 % percentile bootstrap interval of Fleiss' kappa, resampling the items with
    replacement ``bootstrap`` times with ``numpy.random.default_rng(seed)``; resamples where
    kappa is undefined are left out. ``None`` when there are no items, ``bootstrap`` is 0 or
    no resample is defined."""
    if bootstrap < 0:
        raise ValueError(f"bootstrap must be a non-negative number of resamples, got {bootstrap}")
    table, n = _checked(counts)
    n_items = table.shape[0]
    if n_items == 0 or bootstrap == 0:
        return None
    rng = np.random.default_rng(seed)
    per_item = ((table**2).sum(axis=1) - n) / (n * (n - 1))
    values = []
    block = max(1, min(bootstrap, 4_000_000 // max(n_items, 1)))
    for start in range(0, bootstrap, block):
        size = min(block, bootstrap - start)
        # weights[i, b]: how often item i is drawn in resample b
        weights = rng.multinomial(n_items, np.full(n_items, 1.0 / n_items), size=size).T.astype(np.float64)
        agreement = per_item @ weights / n_items
        share = table.T @ weights / (n_items * n)
        values.append(_kappa(agreement, share))
    kappas = np.concatenate(values)
    return percentile_interval(kappas[~np.isnan(kappas)])


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


def kappa_interval(
    a: Sequence[bool], b: Sequence[bool], *, bootstrap: int = DEFAULT_BOOTSTRAP, seed: SeedLike = 0
) -> list[float] | None:
    """95 % percentile bootstrap interval of ``cohen_kappa`` between two paired boolean label
    sequences, resampling the pairs with replacement; resamples where kappa is undefined
    (p_e = 1) are left out. ``None`` when kappa itself is undefined or ``bootstrap`` is 0."""
    check_bootstrap(bootstrap)
    if bootstrap == 0 or cohen_kappa(list(a), list(b)) is None:
        return None
    left = np.asarray(a, dtype=bool)
    right = np.asarray(b, dtype=bool)
    rng = np.random.default_rng(seed)
    values = []
    for size in resample_blocks(bootstrap, 4 * left.size):
        pick = uniform_draws(rng, left.size, size)
        x, y = left[pick], right[pick]
        p_o = (x == y).mean(axis=1)
        p_x, p_y = x.mean(axis=1), y.mean(axis=1)
        p_e = p_x * p_y + (1.0 - p_x) * (1.0 - p_y)
        defined = p_e < 1.0
        values.append((p_o[defined] - p_e[defined]) / (1.0 - p_e[defined]))
    return percentile_interval(np.concatenate(values))
