"""Seeds, resamples and shares for the agreement statistics. Pure Python and NumPy, no Django.

The intervals themselves (percentile interval, resample blocks, uniform draws, the mean's
bootstrap) are ``core/intervals.py``'s, shared with every app; this module adds what the
agreement statistics need on top: one seed per statistic (so a judge's interval does not
change when another judge is added), resample counts as weights, the exact bootstrap of a
0/1 share, and the note shown beside a number that rests on a small sample."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from annotate import constants as C
from core.intervals import percentile_interval, uniform_draws

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


def bootstrap_share_interval(
    successes: int, n: int, *, bootstrap: int = DEFAULT_BOOTSTRAP, seed: SeedLike = 0
) -> list[float] | None:
    """95 % percentile bootstrap interval of a share of 0/1 outcomes (``successes`` of
    ``n`` items), resampling the n items with replacement ``bootstrap`` times. For 0/1 values
    the resampled share is exactly Binomial(n, successes / n) / n, so it is drawn directly:
    the same interval as ``bootstrap_mean_interval`` in distribution, at a cost that does not
    grow with n. ``None`` when n is 0 or ``bootstrap`` is 0."""
    check_bootstrap(bootstrap)
    if n == 0 or bootstrap == 0:
        return None
    rng = np.random.default_rng(seed)
    return percentile_interval(rng.binomial(n, successes / n, size=bootstrap) / n)


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
