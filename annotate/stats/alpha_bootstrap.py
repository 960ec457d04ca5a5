"""The BCa bootstrap interval of Krippendorff's alpha over items (Efron 1987), for several
kinds over the same matrix at once. Pure Python and NumPy, no Django.

A resample is a column of counts (how often each pairable unit is drawn); alpha of every
resample is computed at once from those counts with a matrix product per term of the
coincidence definition (``coincidence.py``), instead of rebuilding each resampled matrix."""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from annotate.stats.bootstrap import JACKKNIFE_MAX_ITEMS, bootstrap_counts, item_bootstrap_interval
from annotate.stats.coincidence import Pairable, V, within_unit_disagreement
from core.intervals import (
    ITEM_BOOTSTRAP,
    PERFECT_AGREEMENT,
    RESAMPLE_BLOCK_CELLS,
    perfect_agreement_interval,
    resample_blocks,
)

# Per kind: the interval, the resamples where alpha was undefined, why the interval is null
# and the interval's method (registry key).
KindInterval = tuple[list[float] | None, int, str | None, str]


@dataclass(frozen=True)
class _ResampleIndex:
    """What the vectorised alpha of weighted units needs, computed once per matrix."""

    per_unit: npt.NDArray[np.float64]  # sum of within-unit distances / (m_u - 1)
    sorted_units: npt.NDArray[np.intp]  # unit of every pairable value, values grouped by value
    starts: npt.NDArray[np.intp]  # where each value's group starts in sorted_units
    counts_t: npt.NDArray[np.float64] | None  # values x units counts, when small enough to keep dense


def _resample_index(p: Pairable[V], delta: npt.NDArray[np.float64]) -> _ResampleIndex:
    order = np.argsort(p.value_of, kind="stable")
    dense = p.n_units * len(p.domain) <= RESAMPLE_BLOCK_CELLS and len(p.domain) <= 64
    return _ResampleIndex(
        per_unit=within_unit_disagreement(p, delta) / (p.m - 1.0),
        sorted_units=p.unit_of[order],
        starts=np.flatnonzero(np.r_[True, np.diff(p.value_of[order]) != 0]),
        counts_t=np.ascontiguousarray(p.counts().T) if dense else None,
    )


def _weighted_alphas(
    p: Pairable[V],
    delta: npt.NDArray[np.float64],
    nominal: bool,
    index: _ResampleIndex,
    weights: npt.NDArray[np.float64],
) -> npt.NDArray[np.float64]:
    """alpha for each column of ``weights`` (units x resamples: how often each pairable
    unit is drawn), as if the drawn units had been listed that many times; NaN where
    undefined (D_e = 0). Same definition as ``alpha_from_pairable``, with a matrix product
    per term."""
    observed = index.per_unit @ weights
    n = p.m @ weights
    if index.counts_t is not None:
        n_c = index.counts_t @ weights  # values x resamples
    else:  # many distinct values: sum the drawn units' rows value by value
        n_c = np.add.reduceat(weights[index.sorted_units], index.starts, axis=0)
    if nominal:
        expected = n * n - (n_c * n_c).sum(axis=0)
    else:
        expected = ((delta @ n_c) * n_c).sum(axis=0)
    alphas = np.full(weights.shape[1], np.nan)
    defined = expected > 0
    alphas[defined] = 1.0 - (n[defined] - 1.0) * observed[defined] / expected[defined]
    return alphas


@dataclass(frozen=True)
class AlphaInput:
    """One kind's pairable units, the distance between its values and whether it is nominal."""

    pairable: Pairable[Hashable]
    delta: npt.NDArray[np.float64]
    nominal: bool


def _kind_interval(
    x: AlphaInput, values: npt.NDArray[np.float64], point: float | None, jackknife: npt.NDArray[np.float64] | None
) -> KindInterval:
    """One kind's interval from its resampled alphas (``values``) and, at perfect agreement
    (D_o = 0, every resample 1), the Wilson bound of the disagreement share instead."""
    units = x.pairable.n_units
    interval, reason = item_bootstrap_interval(values, point, jackknife, units, low=-math.inf, high=1.0)
    method = ITEM_BOOTSTRAP
    if interval is None and not within_unit_disagreement(x.pairable, x.delta).any():
        n = x.pairable.m.sum()
        n_c = np.bincount(x.pairable.value_of, minlength=len(x.pairable.domain)).astype(np.float64)
        fallback = perfect_agreement_interval(units, float(n_c @ x.delta @ n_c) / (n * (n - 1.0)), low=-math.inf)
        if fallback is not None:
            interval, reason, method = fallback, None, PERFECT_AGREEMENT
    return interval, int(np.isnan(values).sum()), reason, method


def alpha_bootstraps(
    inputs: Mapping[str, AlphaInput], resamples: int, rng: np.random.Generator, points: Mapping[str, float | None]
) -> dict[str, KindInterval]:
    """BCa intervals of alpha (Efron 1987), for several kinds over the same matrix, from the
    same resamples of the pairable units (with replacement), the acceleration from the
    jackknife over units (leave one unit out; up to ``JACKKNIFE_MAX_ITEMS`` units). Per kind:
    the interval (``item_bootstrap_interval``: null and the reason when every resample gives
    the same alpha), the number of resamples where alpha was undefined (left out), that
    reason and the interval's method: at perfect agreement (D_o = 0, every resample 1) the
    Wilson bound of the disagreement share instead (``perfect_agreement_interval``). ``points`` are the kinds' alphas (None: no interval). All kinds must share their
    pairable units (they do: an item is pairable when it has two annotations, whatever the kind)."""
    usable = {
        kind: x
        for kind, x in inputs.items()
        if x.pairable.n_units > 0 and len(x.pairable.domain) >= 2 and points.get(kind) is not None
    }
    result: dict[str, KindInterval] = {kind: (None, 0, None, ITEM_BOOTSTRAP) for kind in inputs}
    if resamples <= 0 or not usable:
        return result
    n_units = {x.pairable.n_units for x in usable.values()}
    if len(n_units) != 1:
        raise ValueError("alpha kinds resampled together must share their items")
    units = n_units.pop()
    indexes = {kind: _resample_index(x.pairable, x.delta) for kind, x in usable.items()}
    cells = 2 * units + sum(x.pairable.n_values + 2 * len(x.pairable.domain) for x in usable.values())
    alphas: dict[str, list[npt.NDArray[np.float64]]] = {kind: [] for kind in usable}
    for size in resample_blocks(resamples, cells):
        weights = bootstrap_counts(rng, units, size)
        for kind, x in usable.items():
            alphas[kind].append(_weighted_alphas(x.pairable, x.delta, x.nominal, indexes[kind], weights))
    leave_one_out = 1.0 - np.eye(units) if 2 <= units <= JACKKNIFE_MAX_ITEMS else None
    for kind, x in usable.items():
        jackknife = (
            None
            if leave_one_out is None
            else _weighted_alphas(x.pairable, x.delta, x.nominal, indexes[kind], leave_one_out)
        )
        result[kind] = _kind_interval(x, np.concatenate(alphas[kind]), points[kind], jackknife)
    return result
