"""Seeds, resamples and intervals for the agreement statistics. Pure Python and NumPy, no Django.

The intervals themselves (Wilson, BCa, resample blocks, uniform draws) are
``core/intervals.py``'s, shared with every app; this module adds what the agreement
statistics need on top: one seed per statistic (so a judge's interval does not change when
another judge is added), resample counts as weights, the two shapes every agreement
interval is published in (``share_interval``: a rate with its Wilson interval;
``item_bootstrap_interval``: a statistic without a closed form with its BCa bootstrap
interval over items, or null and the reason it is not estimable), and the note shown beside
a number that rests on a small sample.

A share (agreement rate, per-class rate, leave-one-out agreement) is never bootstrapped: the
percentile bootstrap of a proportion collapses to [1, 1] at 20 of 20 and covered the truth
in 23 % of data sets at n = 5, p = 0.95 (issue 27); the Wilson interval does not."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from annotate import constants as C
from core.intervals import (
    ITEM_BOOTSTRAP,
    WILSON,
    bca_interval,
    interval_fields,
    not_estimable_reason,
    snap_interval,
    uniform_draws,
    wilson_interval,
)

DEFAULT_BOOTSTRAP = 1000


def seed_sequence(seed: int, *labels: str) -> np.random.SeedSequence:
    """A seed for one statistic: the run's seed plus stable hashes of the labels, so a
    judge's interval does not change when another judge is added to the input."""
    if seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed}")
    words = [int.from_bytes(hashlib.sha256(label.encode("utf-8")).digest()[:8], "big") for label in labels]
    return np.random.SeedSequence([seed, *words])


SeedLike = int | np.random.SeedSequence


def check_bootstrap(bootstrap: int) -> None:
    """``ValueError`` for a negative number of resamples (0 turns the intervals off)."""
    if bootstrap < 0:
        raise ValueError(f"bootstrap must be a non-negative number of resamples, got {bootstrap}")


def sub_seed(seed: SeedLike, label: str) -> np.random.SeedSequence:
    """An independent stream for one more statistic under the same seed."""
    word = int.from_bytes(hashlib.sha256(label.encode("utf-8")).digest()[:8], "big")
    if isinstance(seed, np.random.SeedSequence):
        return np.random.SeedSequence(seed.entropy, spawn_key=(*seed.spawn_key, word))
    return seed_sequence(seed, label)


def bootstrap_counts(rng: np.random.Generator, n_units: int, size: int) -> npt.NDArray[np.float64]:
    """``size`` resamples of ``n_units`` units with replacement, as a (n_units x size)
    array: how often each unit is drawn in each resample (one column per resample)."""
    draws = uniform_draws(rng, n_units, size)
    flat = (draws * size + np.arange(size, dtype=draws.dtype)[:, None]).ravel()
    return np.bincount(flat, minlength=size * n_units).reshape(n_units, size).astype(np.float64)


def rate(numerator: int, denominator: int) -> float | None:
    """``numerator / denominator``; ``None`` (undefined, never 0) for a zero denominator."""
    return numerator / denominator if denominator else None


def sample_size_note(n: int, ci95: Sequence[float] | None) -> str | None:
    """The note shown beside a number resting on a small sample: ``n`` items below
    ``SMALL_SAMPLE_ITEMS`` (30), or a 95 % interval wider than ``WIDE_INTERVAL`` (0.3, on the
    number's own scale). ``None`` when neither holds (annotate/constants.py says why)."""
    width = None if not ci95 else ci95[1] - ci95[0]
    reasons = []
    if n < C.SMALL_SAMPLE_ITEMS:
        reasons.append(f"n = {n} items, fewer than {C.SMALL_SAMPLE_ITEMS}")
    if width is not None and width > C.WIDE_INTERVAL:
        reasons.append(f"the 95% interval is {width:.2f} wide (more than {C.WIDE_INTERVAL})")
    if not reasons:
        return None
    return "Small sample: " + " and ".join(reasons) + "; the interval is wide, read the number with it."


# A bootstrap interval narrower than this is zero-width: every resample gave the same value.
ZERO_WIDTH = 1e-12


def interval_not_estimable(n: int, ci95: Sequence[float] | None) -> str | None:
    """Why a bootstrap interval is not shown, or None when it is (or there is none): every
    resample of the ``n`` items gave the same value, so the percentile interval has zero
    width. Too few items to resample do that (two items that disagree the same way give
    alpha -0.5 in every resample), and a zero-width interval would look like a precise
    number. Pages then show "interval not estimable (n = …)" and the reports give a null
    interval with this sentence."""
    if ci95 is None or ci95[1] - ci95[0] > ZERO_WIDTH:
        return None
    items = "item" if n == 1 else "items"
    return (
        f"interval not estimable (n = {n}): every bootstrap resample of the {n} {items} gives the same "
        f"value, so there is no interval to show"
    )


def estimable_interval(n: int, ci95: Sequence[float] | None) -> tuple[list[float] | None, str | None]:
    """A bootstrap interval as the reports give it: ``(ci95, None)``, or ``(None, reason)``
    when it is not estimable (``interval_not_estimable``)."""
    reason = interval_not_estimable(n, ci95)
    return (None, reason) if reason else (list(ci95) if ci95 is not None else None, None)


def share_interval(successes: int, n: int) -> dict[str, Any]:
    """A share's 95 % Wilson interval (Wilson 1927) with its method and n, in the keys every
    agreement rate carries: ``ci95`` ([low, high], None when n is 0), ``interval``,
    ``interval_name`` and ``approximate`` (``core.intervals.interval_fields``). Closed form,
    so it does not depend on the number of bootstrap resamples."""
    interval = wilson_interval(successes, n)
    return {"ci95": list(interval) if interval else None, **interval_fields(WILSON, n)}


# Below this many items the jackknife (one leave-one-out value per item) is cheap enough to
# run for every bootstrap interval; above it, the BCa acceleration is 0 (bias-corrected
# percentile), whose error in the acceleration is O(1/sqrt(n)) and negligible at such n.
JACKKNIFE_MAX_ITEMS = 2000


def item_bootstrap_interval(
    values: npt.NDArray[np.float64],
    point: float | None,
    jackknife: npt.NDArray[np.float64] | None,
    n: int,
    *,
    low: float,
    high: float,
    reason: str | None = None,
) -> tuple[list[float] | None, str | None]:
    """The published interval of a statistic without a closed form (kappa, alpha, AUC, tau)
    from its bootstrap ``values`` over ``n`` items (NaN: a resample where it was undefined,
    left out): the 95 % BCa interval (Efron 1987; ``core.intervals.bca_interval``, with the
    ``jackknife`` values for the acceleration when given), its bounds cleaned of float noise
    (within 1e-12 of 0, of the range [``low``, ``high``] or of ``point``: a lower bound of
    -2.78e-16 is 0) and clipped to the range. Returns ``(ci95, None)``, ``(None, None)`` when
    there is nothing to resample (no point, no values), or ``(None, reason)`` when the interval
    would have zero width (every resample gives the same value): "interval not estimable
    (n = ...)", with ``reason`` when the caller knows why."""
    if point is None:
        return None, None
    boot = np.asarray(values, dtype=np.float64)
    boot = boot[~np.isnan(boot)]
    if boot.size == 0:
        return None, None
    # Exact values (0: chance agreement) arrive from the arithmetic with noise such as 1e-16.
    boot = np.where(np.abs(boot) < 1e-12, 0.0, boot)
    interval = bca_interval(boot, point, jackknife)
    if interval is not None:
        interval = snap_interval(interval, point, low=low, high=high)
        interval = [0.0 if abs(v) < 1e-12 else v for v in interval]
    if interval is None or interval[1] - interval[0] <= ZERO_WIDTH:
        return None, reason or not_estimable_reason(n)
    return interval, None


def item_bootstrap_fields(n: int) -> dict[str, Any]:
    """``interval``, ``interval_name`` and ``approximate`` of a bootstrap over ``n`` items."""
    return interval_fields(ITEM_BOOTSTRAP, n)
