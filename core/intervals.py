"""How uncertain a share or a score is: the intervals every app shows (How2Score, mining
yield, kept rates, goal-step accuracy, agreement). Pure Python and NumPy, no Django; the
lowest layer, so every app may import it.

The intervals, each at 95 %:

* ``wilson_interval``: the Wilson score interval of one proportion (the share of judged
  generations without a critical failure, the share of mined documents that became
  procedures, ...). It stays inside [0, 1] and is not degenerate at 0 or n successes, which
  the normal ("Wald") interval is: 3 passes of 3 gives [0.44, 1], not [1, 1].
  ``share_estimate`` gives a share with its n and this interval, as every page shows a rate.
* ``percentile_interval``: the 95 % percentile interval of bootstrap values.
* ``bootstrap_mean_estimate`` / ``bootstrap_mean_interval``: the BCa bootstrap interval of a
  mean over items (the mean SCORE of a run's generations, ...), with the jackknife of the
  mean for the acceleration; "not estimable" (None and a reason), never zero width, when
  every value is the same; ``uniform_draws``
  and ``resample_blocks`` are the draws and the memory-bounded blocks every item bootstrap
  here uses.
* ``paired_bootstrap_difference``: the difference between two models' How2Scores on the
  items both were judged on when an item holds several generations, with a BCa bootstrap
  interval that resamples those items with replacement and takes the *same* resample for
  both models (a paired bootstrap), so the item-to-item variation the two share cancels out.
  With one generation per item the difference takes Newcombe's paired interval instead
  (``newcombe_paired_interval``), with the exact McNemar p-value (``mcnemar_exact``).

(``judging/rankings.py`` builds the rank-correlation intervals between judges on these.)

Scores are ratios of sums over the resampled items (passes / judged), which is How2Score of
the resample when an item holds one generation per model, and the share of generations when
it holds several. Every bootstrap is seeded (``numpy.random.default_rng(seed)``), so the same
inputs give the same interval on every page and in every export."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np
import numpy.typing as npt

CONFIDENCE = 0.95
# The standard normal quantile for a two-sided 95 % interval: NormalDist().inv_cdf(0.975).
Z_95 = 1.959963984540054
CI_QUANTILES = (0.025, 0.975)  # the percentile bootstrap's 95 % interval
# Resamples of every bootstrap shown on the pages, and its seed. The API accepts others
# (at most MAX_RESAMPLES).
BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_SEED = 0
MAX_RESAMPLES = 10_000
# Resamples are drawn in blocks so that one block holds about this many item draws.
_BLOCK_CELLS = 2_000_000

WILSON = "wilson"
PAIRED_BOOTSTRAP = "paired bootstrap over items"
ITEM_BOOTSTRAP = "bootstrap over items"
NEWCOMBE_PAIRED = "newcombe paired score"
PERFECT_AGREEMENT = "wilson bound at perfect agreement"
MCNEMAR_EXACT = "exact McNemar"
SIGN_TEST = "exact sign test"
HOLM = "Holm"


def wilson_interval(successes: int, n: int, z: float = Z_95) -> tuple[float, float] | None:
    """The Wilson score interval of ``successes`` / ``n`` as proportions in [0, 1]; None when
    ``n`` is 0."""
    if n < 0 or successes < 0 or successes > n:
        raise ValueError(f"expected 0 <= successes <= n, got {successes} of {n}")
    if n == 0:
        return None
    p = successes / n
    z2 = z * z
    denominator = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denominator
    # At 0 of n (n of n) the bound is exactly 0 (1); the arithmetic leaves float noise such
    # as 2.8e-17, which would print as a number that is not there.
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return low, high


def share_estimate(successes: int, n: int) -> dict[str, Any]:
    """A share with its n and its 95 % Wilson interval, the one shape every rate is shown in
    (mining yield, kept rates, accuracy): ``{"share", "ci95", "successes", "n", "interval"}``;
    ``share`` and ``ci95`` are None when ``n`` is 0 (nothing to divide)."""
    interval = wilson_interval(successes, n)
    return {
        "share": successes / n if n else None,
        "ci95": list(interval) if interval else None,
        "successes": successes,
        "n": n,
        "interval": WILSON,
    }


def check_resamples(resamples: int) -> None:
    if not 1 <= resamples <= MAX_RESAMPLES:
        raise ValueError(f"resamples must be between 1 and {MAX_RESAMPLES}, got {resamples}")


def _resample_blocks(rng: np.random.Generator, n_items: int, resamples: int) -> Iterator[npt.NDArray[np.intp]]:
    """Index arrays (block x n_items) of items drawn with replacement, ``resamples`` rows in all."""
    block = max(1, min(resamples, _BLOCK_CELLS // max(n_items, 1)))
    for start in range(0, resamples, block):
        yield rng.integers(0, n_items, size=(min(block, resamples - start), n_items))


def bootstrap_weights(rng: np.random.Generator, n_items: int, resamples: int) -> Iterator[npt.NDArray[np.float64]]:
    """The same resamples as (n_items x block) weights: how often each item was drawn."""
    for draws in _resample_blocks(rng, n_items, resamples):
        size = draws.shape[0]
        flat = (draws * size + np.arange(size)[:, None]).ravel()
        yield np.bincount(flat, minlength=size * n_items).reshape(n_items, size).astype(np.float64)


# Item bootstraps draw their resamples in blocks so memory stays near this many cells per block.
RESAMPLE_BLOCK_CELLS = 4_000_000


def uniform_draws(rng: np.random.Generator, n: int, size: int) -> npt.NDArray[np.integer]:
    """``size`` x ``n`` uniform draws from range(n) (32-bit when they fit: about 4x faster)."""
    dtype = np.int32 if size * n < 2**31 else np.int64
    return rng.integers(0, n, size=(size, n), dtype=dtype)


def resample_blocks(total: int, cells_per_resample: int) -> list[int]:
    """Split ``total`` resamples into blocks of about ``RESAMPLE_BLOCK_CELLS`` cells."""
    block = max(1, min(total, RESAMPLE_BLOCK_CELLS // max(cells_per_resample, 1)))
    return [min(block, total - start) for start in range(0, total, block)]


def bootstrap_mean_estimate(
    values: Sequence[float] | npt.NDArray[np.float64],
    *,
    bootstrap: int = BOOTSTRAP_RESAMPLES,
    seed: int | np.random.SeedSequence = BOOTSTRAP_SEED,
) -> tuple[list[float] | None, str | None]:
    """The 95 % BCa bootstrap interval of a mean over items (Efron 1987): the values are
    resampled with replacement ``bootstrap`` times with ``numpy.random.default_rng(seed)``,
    and the bias correction and acceleration come from those means and the jackknife of the
    mean (the n leave-one-out means, (sum - x_i) / (n - 1): O(n)). Bounds within 1e-12 of
    the point or of the values' range are set to them (float noise). Returns
    ``(interval, None)``; ``(None, None)`` when there are no values or ``bootstrap`` is 0;
    ``(None, "interval not estimable (n = ...) ...")`` when the interval would have zero
    width (every value the same), never a zero-width interval. Published with
    ``interval_fields(ITEM_BOOTSTRAP, n)``: approximate at small n."""
    if bootstrap < 0:
        raise ValueError(f"bootstrap must be a non-negative number of resamples, got {bootstrap}")
    data = np.asarray(values, dtype=np.float64)
    if data.size == 0 or bootstrap == 0:
        return None, None
    n = int(data.size)
    point = float(data.mean())
    rng = np.random.default_rng(seed)
    means = np.concatenate(
        [data[uniform_draws(rng, n, size)].mean(axis=1) for size in resample_blocks(bootstrap, 2 * n)]
    )
    jackknife = (data.sum() - data) / (n - 1) if n >= 2 else None
    interval = bca_interval(means, point, jackknife)
    if interval is not None:
        interval = snap_interval(interval, point, low=float(data.min()), high=float(data.max()))
    if interval is None or interval[1] - interval[0] <= 1e-12:
        return None, not_estimable_reason(n)
    return interval, None


def bootstrap_mean_interval(
    values: Sequence[float] | npt.NDArray[np.float64],
    *,
    bootstrap: int = BOOTSTRAP_RESAMPLES,
    seed: int | np.random.SeedSequence = BOOTSTRAP_SEED,
) -> list[float] | None:
    """The 95 % BCa bootstrap interval of a mean over items of ``bootstrap_mean_estimate``,
    without its reason: None when there are no values, ``bootstrap`` is 0 or the interval is
    not estimable (every value the same)."""
    return bootstrap_mean_estimate(values, bootstrap=bootstrap, seed=seed)[0]


def percentile_interval(values: npt.NDArray[np.float64]) -> list[float] | None:
    """The 95 % percentile interval of bootstrap values; None when there are none."""
    if values.size == 0:
        return None
    low, high = np.quantile(values, CI_QUANTILES)
    return [float(low), float(high)]


def paired_bootstrap_difference(
    a: Sequence[tuple[int, int]],
    b: Sequence[tuple[int, int]],
    *,
    scale: float = 100.0,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> dict[str, Any]:
    """Score of A minus score of B on the same items, with a paired BCa bootstrap interval:
    for items that hold several generations of a model, where the paired 2x2 table (and
    Newcombe's interval) does not apply.

    ``a[i]`` and ``b[i]`` are ``(passes, judged)`` of the two models on item i (judged >= 1
    for both: the items both have a usable judgment for). The items are resampled with
    replacement and both models scored on the *same* resample (ratios of sums), so what the
    two share cancels out; the interval is BCa (``bca_interval``) with the acceleration from
    the jackknife over items. Returns ``difference`` (scale x (passes_a / judged_a - passes_b
    / judged_b)), ``ci95`` (None with ``interval_reason`` when every resample gives the same
    difference: never a zero-width interval), ``n_items``, ``resamples``, ``seed`` and the
    method's ``interval_fields``. ``difference`` and ``ci95`` are None without items."""
    check_resamples(resamples)
    if len(a) != len(b):
        raise ValueError("a and b must hold the same items")
    n = len(a)
    result: dict[str, Any] = {
        "difference": None,
        "ci95": None,
        "interval_reason": None,
        "n_items": n,
        "resamples": resamples,
        "seed": seed,
        **interval_fields(PAIRED_BOOTSTRAP, n),
    }
    if not a:
        result["interval_reason"] = "no common item"
        return result
    counts = np.asarray([[pa, ja, pb, jb] for (pa, ja), (pb, jb) in zip(a, b)], dtype=np.float64)
    if (counts[:, 1] < 1).any() or (counts[:, 3] < 1).any():
        raise ValueError("every common item needs at least one judged generation of each model")

    def difference(sums: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        return np.asarray(scale * (sums[..., 0] / sums[..., 1] - sums[..., 2] / sums[..., 3]), dtype=np.float64)

    totals = counts.sum(axis=0)
    point = float(difference(totals))
    result["difference"] = point
    rng = np.random.default_rng(seed)
    values = np.concatenate([difference(counts[draws].sum(axis=1)) for draws in _resample_blocks(rng, n, resamples)])
    jackknife = difference(totals[None, :] - counts) if n >= 2 else None
    interval = bca_interval(values, point, jackknife)
    if interval is None:
        result["interval_reason"] = not_estimable_reason(n)
    else:
        result["ci95"] = snap_interval(interval, point, low=-scale, high=scale)
    return result


def sign_test_exact(n_positive: int, n_negative: int) -> float:
    """Two-sided exact sign test of paired differences (ties dropped): under "neither is
    ahead", each non-zero difference is positive with probability 1/2. The same binomial
    arithmetic as ``mcnemar_exact``, which is the sign test on 0/1 outcomes."""
    return mcnemar_exact(n_positive, n_negative)


# --- Paired proportions and decisions ------------------------------------------------------


def _binomial_tail_half(k: int, n: int) -> float:
    """P(X <= k) for X ~ Binomial(n, 1/2), exactly (integer arithmetic, then one division).
    Each C(n, i + 1) is made from C(n, i), not afresh: a leaderboard tests every pair of
    models, each with up to thousands of discordant procedures (370 ms a pair the other way
    at n = 3,500, 2 ms this way)."""
    term = total = 1
    for i in range(k):
        term = term * (n - i) // (i + 1)
        total += term
    # 2**n with n >= 0 is an int (typeshed types int ** int as Any: a negative power is a float).
    outcomes: int = 2**n
    return total / outcomes


def mcnemar_exact(a_only: int, b_only: int) -> float:
    """Two-sided exact McNemar p-value: under "A and B pass equally often", each of the
    ``a_only + b_only`` discordant items (A passes and B fails, or B passes and A fails) is
    A's with probability 1/2. p = min(1, 2 P(X <= min(a_only, b_only))), X ~ Binomial(a_only +
    b_only, 1/2); 1.0 with no discordant item. Three discordant items all one way give
    p = 2 / 2^3 = 0.25: three of five items never make a decision at 5 %."""
    if a_only < 0 or b_only < 0:
        raise ValueError(f"discordant counts must be non-negative, got {a_only} and {b_only}")
    n = a_only + b_only
    if n == 0:
        return 1.0
    return min(1.0, 2.0 * _binomial_tail_half(min(a_only, b_only), n))


def newcombe_paired_interval(both: int, a_only: int, b_only: int, neither: int, z: float = Z_95) -> list[float] | None:
    """95 % interval of p_A - p_B on paired 0/1 outcomes (each item passed by both, by A only,
    by B only, by neither): Newcombe's hybrid score interval for paired data, his method 10
    (Newcombe 1998, Statistics in Medicine 17:2635-2650). It combines the two Wilson
    intervals of p_A and p_B with the correlation phi of the 2x2 table (phi's numerator
    ad - bc shrunk by n/2 towards 0 when positive, phi = 0 when a margin is empty). It never
    has zero width and stays inside [-1, 1]. None when there is no item."""
    counts = (both, a_only, b_only, neither)
    if min(counts) < 0:
        raise ValueError(f"paired counts must be non-negative, got {counts}")
    n = sum(counts)
    if n == 0:
        return None
    p_a, p_b = (both + a_only) / n, (both + b_only) / n
    low_a, high_a = wilson_interval(both + a_only, n, z) or (0.0, 1.0)
    low_b, high_b = wilson_interval(both + b_only, n, z) or (0.0, 1.0)
    margins = (both + a_only) * (b_only + neither) * (both + b_only) * (a_only + neither)
    if margins == 0:
        phi = 0.0
    else:
        cross: float = both * neither - a_only * b_only
        if cross > 0:
            cross = max(cross - n / 2, 0.0)
        phi = cross / math.sqrt(margins)
    difference = p_a - p_b
    below = math.sqrt(max(0.0, (p_a - low_a) ** 2 - 2 * phi * (p_a - low_a) * (high_b - p_b) + (high_b - p_b) ** 2))
    above = math.sqrt(max(0.0, (high_a - p_a) ** 2 - 2 * phi * (high_a - p_a) * (p_b - low_b) + (p_b - low_b) ** 2))
    return [max(-1.0, difference - below), min(1.0, difference + above)]


def holm_adjust(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of ``p_values`` (same order back): the i-th smallest p is
    multiplied by (m - i + 1), made non-decreasing in that order and capped at 1. Rejecting
    where the adjusted p < 0.05 keeps the chance of any false "A beats B" among the m
    comparisons below 5 % (Holm 1979)."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    adjusted = [0.0] * m
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p_values[index]))
        adjusted[index] = running
    return adjusted


# --- Bootstrap intervals of statistics without a closed form -------------------------------


def perfect_agreement_interval(n_items: int, expected_disagreement: float, *, low: float = -1.0) -> list[float] | None:
    """The 95 % interval of a chance-corrected agreement 1 - D_o / D_e (Cohen's kappa, Scott's
    pi, Krippendorff's alpha with distances in [0, 1]) when every one of ``n_items`` items
    agrees (D_o = 0), where every bootstrap resample gives 1 and the bootstrap has no interval:
    [1 - u / D_e, 1], with u the upper 95 % Wilson bound of the share of items holding a
    disagreement (0 of ``n_items``). An item adds at most its own share to D_o (a distance is
    at most 1), so u bounds D_o from above; D_e is held at its observed value. Coverage
    (bench/interval_coverage.py, docs/intervals.md): it lifts Cohen's kappa at a true 0.95
    from 0.39 to 0.99 at n = 20, where 60 % of the data sets agree perfectly. None when
    ``n_items`` is 0 or ``expected_disagreement`` is not positive (the statistic is undefined)."""
    if n_items <= 0 or not expected_disagreement > 0:
        return None
    bounds = wilson_interval(0, n_items)
    assert bounds is not None
    return [float(max(low, 1.0 - bounds[1] / float(expected_disagreement))), 1.0]


def not_estimable_reason(n: int, what: str = "bootstrap resample") -> str:
    items = "item" if n == 1 else "items"
    return (
        f"interval not estimable (n = {n}): every {what} of the {n} {items} gives the same value, "
        f"so there is no interval to show"
    )


def snap_interval(interval: Sequence[float], point: float | None = None, *, low: float, high: float) -> list[float]:
    """An interval with float noise removed: bounds within 1e-12 of the statistic's range
    (``low``, ``high``) or of ``point`` are set to them, so -2.78e-16 prints as 0."""
    snapped = []
    for value in interval:
        for anchor in (low, high, point):
            if anchor is not None and abs(value - anchor) < 1e-12:
                value = anchor
        snapped.append(float(min(high, max(low, value))))
    return snapped


def bca_interval(
    boot: npt.NDArray[np.float64], point: float, jackknife: npt.NDArray[np.float64] | None
) -> list[float] | None:
    """The 95 % bias-corrected and accelerated (BCa) interval of bootstrap values ``boot``
    around the statistic ``point``, with the acceleration from its jackknife values (Efron
    1987; the percentile interval when ``jackknife`` is None or has no spread). None when
    there are no values, or every value is the same (zero width: not estimable)."""
    values = np.asarray(boot, dtype=np.float64)
    values = values[~np.isnan(values)]
    if values.size == 0 or float(values.max() - values.min()) <= 1e-12:
        return None
    normal = NormalDist()
    share_below = float(np.count_nonzero(values < point) + 0.5 * np.count_nonzero(values == point)) / values.size
    share_below = min(max(share_below, 1.0 / (2 * values.size)), 1.0 - 1.0 / (2 * values.size))
    bias = normal.inv_cdf(share_below)
    acceleration = 0.0
    if jackknife is not None:
        jack = np.asarray(jackknife, dtype=np.float64)
        jack = jack[~np.isnan(jack)]
        if jack.size >= 2:
            deviations = jack.mean() - jack
            denominator = 6.0 * float((deviations**2).sum()) ** 1.5
            if denominator > 0:
                acceleration = float((deviations**3).sum()) / denominator
    quantiles = []
    for q in CI_QUANTILES:
        z = normal.inv_cdf(q)
        shifted = bias + (bias + z) / (1 - acceleration * (bias + z))
        quantiles.append(normal.cdf(shifted))
    low, high = np.quantile(values, quantiles)
    return [float(low), float(high)]


# --- Every interval method the product publishes, in one place ------------------------------


@dataclass(frozen=True)
class IntervalMethod:
    """One interval method as pages and the API name it. ``approximate_below``: the n below
    which bench/interval_coverage.py measured a coverage under the target (0.93 at n >= 20,
    0.90 below) in some cell, so an interval on fewer items is labelled approximate
    (``interval_fields``); 0 when every measured cell met the target."""

    key: str
    name: str
    used_for: str
    reference: str
    approximate_below: int


METHODS: dict[str, IntervalMethod] = {
    method.key: method
    for method in (
        IntervalMethod(
            WILSON,
            "Wilson score interval",
            "shares and rates: How2Score, agreement shares, per-class rates, yields, pass rates",
            "Wilson 1927",
            0,
        ),
        IntervalMethod(
            NEWCOMBE_PAIRED,
            "Newcombe hybrid score interval for paired proportions (method 10)",
            "the difference between two models' How2Scores on the same items",
            "Newcombe 1998, Statistics in Medicine 17:2635",
            0,
        ),
        IntervalMethod(
            ITEM_BOOTSTRAP,
            "BCa bootstrap over items",
            "statistics without a closed form: Krippendorff's alpha, Cohen's kappa, Kendall's tau, "
            "Spearman's rho, AUC, mean SCORE",
            "Efron 1987",
            # n = 20 was short near the boundary (AUC 0.82, mean SCORE 0.89 at a true 0.95); every
            # cell at n = 100 met the target once kappa and alpha at perfect agreement took the
            # Wilson bound (docs/intervals.md).
            100,
        ),
        IntervalMethod(
            PERFECT_AGREEMENT,
            "Wilson bound of the disagreement share at perfect agreement, mapped through 1 - D_o / D_e",
            "Cohen's kappa and Krippendorff's alpha when every item agrees (the bootstrap collapses to one value)",
            "Wilson 1927",
            0,
        ),
        IntervalMethod(
            PAIRED_BOOTSTRAP,
            "paired BCa bootstrap over items",
            "the difference between two models when an item holds several generations of a model",
            "Efron 1987",
            100,  # as the item bootstrap it is built on (not simulated on its own)
        ),
        IntervalMethod(
            "rogan-gladen",
            "Rogan-Gladen, central interval of the Jeffreys posteriors restricted to TPR + TNR > 1 and a "
            "corrected score in [0, 1] (100,000 weighted Monte Carlo draws)",
            "the calibrated How2Score corrected with the judge's error rates on human-labelled items",
            "Rogan & Gladen 1978, Am J Epidemiol 107:71; Jeffreys 1946",
            100,
        ),
        IntervalMethod(
            "ppi++ stratified",
            "stratified PPI++ Student-t interval (tuned lambda, Agresti-Coull variance floor)",
            "the human How2Score from human-labelled items and the judge's labels on the whole judged set",
            "Angelopoulos, Duchi & Zrnic 2023, arXiv 2311.01453; Fisch et al. 2024, arXiv 2406.04291",
            20,
        ),
    )
}


def interval_fields(key: str, n: int) -> dict[str, Any]:
    """What every published interval carries beside its bounds: ``interval`` (the method's
    key), ``interval_name`` and ``approximate`` (true when ``n`` is below the size at which
    the coverage harness found the method's coverage under target)."""
    method = METHODS[key]
    return {"interval": key, "interval_name": method.name, "approximate": n < method.approximate_below}
