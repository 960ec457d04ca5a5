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
* ``bootstrap_mean_interval``: the percentile bootstrap interval of a mean over items (the
  mean SCORE of a run's generations, the share of matching labels, ...); ``uniform_draws``
  and ``resample_blocks`` are the draws and the memory-bounded blocks every item bootstrap
  here uses.
* ``paired_bootstrap_difference``: the difference between two models' How2Scores on the
  items both were judged on, with a percentile bootstrap interval that resamples those items
  with replacement and takes the *same* resample for both models (a paired bootstrap), so
  the item-to-item variation the two share cancels out.

(``judging/rankings.py`` builds the rank-correlation intervals between judges on these.)

Scores are ratios of sums over the resampled items (passes / judged), which is How2Score of
the resample when an item holds one generation per model, and the share of generations when
it holds several. Every bootstrap is seeded (``numpy.random.default_rng(seed)``), so the same
inputs give the same interval on every page and in every export."""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
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


def bootstrap_mean_interval(
    values: Sequence[float] | npt.NDArray[np.float64],
    *,
    bootstrap: int = BOOTSTRAP_RESAMPLES,
    seed: int | np.random.SeedSequence = BOOTSTRAP_SEED,
) -> list[float] | None:
    """95 % percentile bootstrap interval of a mean, resampling the values (items) with
    replacement ``bootstrap`` times with ``numpy.random.default_rng(seed)``. ``None`` when
    there are no values or ``bootstrap`` is 0."""
    if bootstrap < 0:
        raise ValueError(f"bootstrap must be a non-negative number of resamples, got {bootstrap}")
    data = np.asarray(values, dtype=np.float64)
    if data.size == 0 or bootstrap == 0:
        return None
    rng = np.random.default_rng(seed)
    means = [
        data[uniform_draws(rng, data.size, size)].mean(axis=1) for size in resample_blocks(bootstrap, 2 * data.size)
    ]
    return percentile_interval(np.concatenate(means))


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
    """Score of A minus score of B on the same items, with a paired bootstrap interval.

    ``a[i]`` and ``b[i]`` are ``(passes, judged)`` of the two models on item i (judged >= 1
    for both: the items both have a usable judgment for). Returns ``difference`` (scale x
    (passes_a / judged_a - passes_b / judged_b)), ``ci95``, ``n_items``, ``resamples``,
    ``seed``, ``interval`` and ``share_a_better`` / ``share_b_better`` (the share of resamples
    where the difference is above / below 0). Everything is None without common items."""
    check_resamples(resamples)
    if len(a) != len(b):
        raise ValueError("a and b must hold the same items")
    result: dict[str, Any] = {
        "difference": None,
        "ci95": None,
        "n_items": len(a),
        "resamples": resamples,
        "seed": seed,
        "interval": PAIRED_BOOTSTRAP,
        "share_a_better": None,
        "share_b_better": None,
    }
    if not a:
        return result
    counts = np.asarray([[pa, ja, pb, jb] for (pa, ja), (pb, jb) in zip(a, b)], dtype=np.float64)
    if (counts[:, 1] < 1).any() or (counts[:, 3] < 1).any():
        raise ValueError("every common item needs at least one judged generation of each model")
    sums = counts.sum(axis=0)
    result["difference"] = scale * (sums[0] / sums[1] - sums[2] / sums[3])
    rng = np.random.default_rng(seed)
    differences = []
    for draws in _resample_blocks(rng, len(a), resamples):
        drawn = counts[draws].sum(axis=1)  # block x 4
        differences.append(scale * (drawn[:, 0] / drawn[:, 1] - drawn[:, 2] / drawn[:, 3]))
    values = np.concatenate(differences)
    result["ci95"] = percentile_interval(values)
    result["share_a_better"] = float((values > 0).mean())
    result["share_b_better"] = float((values < 0).mean())
    return result
