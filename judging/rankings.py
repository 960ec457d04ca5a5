"""Rank correlations between judges' model scores. Pure Python and NumPy, no Django.

Kendall's tau-b (ties in either list handled) and Spearman's rho (Pearson correlation of
average ranks). Both are None with fewer than two models or when a list is constant.
``rank_correlation_intervals``: BCa bootstrap intervals of both between two judges' model
scores, resampling the items (core/intervals.py draws the resamples and makes the BCa
interval; the acceleration comes from the jackknife over items). An interval every resample
of which gives the same value is not shown (null, with the reason): never a zero-width
interval."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from core.intervals import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    ITEM_BOOTSTRAP,
    bca_interval,
    bootstrap_weights,
    check_resamples,
    interval_fields,
    not_estimable_reason,
    snap_interval,
)

# Above this many items the jackknife (one correlation per left-out item) is skipped: the
# interval is then bias-corrected without acceleration (BC), which the harness bounds too.
JACKKNIFE_MAX_ITEMS = 2000


def kendall_tau(x: Sequence[float], y: Sequence[float]) -> float | None:
    n = len(x)
    if n != len(y):
        raise ValueError("the two lists must have the same length")
    concordant = discordant = ties_x = ties_y = 0
    for i in range(n):
        for j in range(i + 1, n):
            dx = (x[i] > x[j]) - (x[i] < x[j])
            dy = (y[i] > y[j]) - (y[i] < y[j])
            if dx == 0 and dy == 0:
                continue
            if dx == 0:
                ties_x += 1
            elif dy == 0:
                ties_y += 1
            elif dx == dy:
                concordant += 1
            else:
                discordant += 1
    denominator = math.sqrt((concordant + discordant + ties_x) * (concordant + discordant + ties_y))
    return None if denominator == 0 else (concordant - discordant) / denominator


def average_ranks(values: Sequence[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def spearman_rho(x: Sequence[float], y: Sequence[float]) -> float | None:
    if len(x) != len(y):
        raise ValueError("the two lists must have the same length")
    if len(x) < 2:
        return None
    rx, ry = average_ranks(x), average_ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sxx = sum((a - mx) ** 2 for a in rx)
    syy = sum((b - my) ** 2 for b in ry)
    return None if sxx == 0 or syy == 0 else sxy / math.sqrt(sxx * syy)


def _scores(
    passes: npt.NDArray[np.float64], judged: npt.NDArray[np.float64], weights: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """(models x block) ratio scores of each resample; NaN where a model has nothing judged."""
    numerator, denominator = passes @ weights, judged @ weights
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denominator > 0, numerator / np.where(denominator > 0, denominator, 1), np.nan)


def _correlations(
    sx: npt.NDArray[np.float64], sy: npt.NDArray[np.float64]
) -> tuple[list[float | None], list[float | None]]:
    """Kendall's tau-b and Spearman's rho per column of two (models x k) score matrices,
    over the models both scored in that column (None where undefined)."""
    taus: list[float | None] = []
    rhos: list[float | None] = []
    for column in range(sx.shape[1]):
        both = ~np.isnan(sx[:, column]) & ~np.isnan(sy[:, column])
        xs, ys = sx[both, column].tolist(), sy[both, column].tolist()
        taus.append(kendall_tau(xs, ys) if len(xs) >= 2 else None)
        rhos.append(spearman_rho(xs, ys))
    return taus, rhos


def _defined(values: list[float | None]) -> npt.NDArray[np.float64]:
    return np.asarray([v for v in values if v is not None], dtype=np.float64)


def rank_correlation_intervals(
    x: tuple[npt.ArrayLike, npt.ArrayLike],
    y: tuple[npt.ArrayLike, npt.ArrayLike],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> dict[str, Any]:
    """BCa bootstrap intervals of Kendall's tau-b and Spearman's rho between two judges.

    ``x`` and ``y`` are ``(passes, judged)`` matrices (models x items) of the two judges over
    the same models and items. Each resample draws the items with replacement, scores every
    model under both judges on the drawn items, and correlates the models both judges scored
    in that resample. Resamples where a correlation is undefined (fewer than two models, or
    one judge gives every model the same score) are left out and counted. The interval is
    BCa around the correlation of all the items, its acceleration from the jackknife over
    items (up to ``JACKKNIFE_MAX_ITEMS``). Returns ``kendall_tau_ci95``, ``spearman_ci95``
    (None when not estimable, with ``kendall_tau_reason`` / ``spearman_reason``: every
    resample gave the same value, or none was defined), ``n_undefined`` ({"kendall_tau":
    int, "spearman": int}), ``n_items``, ``resamples``, ``seed`` and the method's
    ``interval_fields`` (``interval``, ``interval_name``, ``approximate``)."""
    check_resamples(resamples)
    px, jx = (np.atleast_2d(np.asarray(m, dtype=np.float64)) for m in x)
    py, jy = (np.atleast_2d(np.asarray(m, dtype=np.float64)) for m in y)
    if not (px.shape == jx.shape == py.shape == jy.shape) or px.ndim != 2:
        raise ValueError("the four matrices must be models x items of the same shape")
    n_models, n_items = px.shape
    result: dict[str, Any] = {
        "kendall_tau_ci95": None,
        "spearman_ci95": None,
        "kendall_tau_reason": None,
        "spearman_reason": None,
        "n_undefined": {"kendall_tau": 0, "spearman": 0},
        "n_items": n_items,
        "resamples": resamples,
        "seed": seed,
        **interval_fields(ITEM_BOOTSTRAP, n_items),
    }
    if n_models < 2 or n_items == 0:
        result["n_undefined"] = {"kendall_tau": resamples, "spearman": resamples}
        reason = "fewer than two models to correlate" if n_models < 2 else "no common item"
        result["kendall_tau_reason"] = result["spearman_reason"] = reason
        return result
    everything = np.ones((n_items, 1))
    (tau,), (rho,) = _correlations(_scores(px, jx, everything), _scores(py, jy, everything))
    rng = np.random.default_rng(seed)
    taus: list[float | None] = []
    rhos: list[float | None] = []
    for weights in bootstrap_weights(rng, n_items, resamples):
        block_taus, block_rhos = _correlations(_scores(px, jx, weights), _scores(py, jy, weights))
        taus += block_taus
        rhos += block_rhos
    result["n_undefined"] = {"kendall_tau": taus.count(None), "spearman": rhos.count(None)}
    jack_taus: list[float | None] | None = None
    jack_rhos: list[float | None] | None = None
    if 2 <= n_items <= JACKKNIFE_MAX_ITEMS:
        leave_one_out = np.ones((n_items, n_items)) - np.eye(n_items)
        jack_taus, jack_rhos = _correlations(_scores(px, jx, leave_one_out), _scores(py, jy, leave_one_out))
    for name, point, boot, jack in (("kendall_tau", tau, taus, jack_taus), ("spearman", rho, rhos, jack_rhos)):
        values = _defined(boot)
        interval = None if point is None else bca_interval(values, point, None if jack is None else _defined(jack))
        if interval is None:
            result[f"{name}_reason"] = (
                f"interval not estimable (n = {n_items}): the correlation is undefined on these items"
                if point is None or values.size == 0
                else not_estimable_reason(n_items)
            )
        else:
            result[f"{name}_ci95"] = snap_interval(interval, point, low=-1.0, high=1.0)
    return result
