"""How well one signal separates has_failure from no_failure items and ranks the models like
the human majority: AUC, agreement at the best threshold, Kendall's tau, and the same
statistics with resample counts as weights (the bootstrap of the metric-agreement report,
``annotate/stats/metric_agreement.py``). Pure Python, NumPy, scikit-learn and SciPy; no Django.

A signal's values are first turned so that higher means more likely has_failure
(``annotate.stats.signals.failure_scores``, from the orientation fixed in ``SIGNAL_SPECS``)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np
import numpy.typing as npt

from annotate.stats.records import HAS_FAILURE, NO_FAILURE
from annotate.stats.signals import SignalSpec, failure_scores


def roc_auc(has_failure: Sequence[bool], values: Sequence[float], spec: SignalSpec) -> float | None:
    """AUC of the signal for has_failure (scikit-learn; ties count 1/2); ``None`` when one
    class is missing."""
    labels = np.asarray(has_failure, dtype=bool)
    if labels.size == 0 or labels.all() or not labels.any():
        return None
    from sklearn.metrics import roc_auc_score  # heavy: imported when an AUC is computed, not with the URLs

    return float(roc_auc_score(labels, failure_scores(values, spec)))


@dataclass(frozen=True)
class ScoreGroups:
    """Items sorted by failure score and grouped by equal score (ascending)."""

    order: npt.NDArray[np.intp]
    starts: npt.NDArray[np.intp]
    scores: npt.NDArray[np.float64]  # one per group
    positive: npt.NDArray[np.float64]  # has_failure, in sorted order, as 0/1


def score_groups(failure: npt.NDArray[np.float64], has_failure: npt.NDArray[np.bool_]) -> ScoreGroups:
    order = np.argsort(failure, kind="stable")
    ordered = failure[order]
    starts = np.flatnonzero(np.r_[True, np.diff(ordered) != 0])
    return ScoreGroups(order, starts, ordered[starts], has_failure[order].astype(np.float64))


def group_weights(
    groups: ScoreGroups, weights: npt.NDArray[np.float64]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """(has_failure, no_failure) weight per group, groups x resamples."""
    w = weights[groups.order]
    positive = w * groups.positive[:, None]
    if groups.starts.size == groups.order.size:  # all values distinct: one item per group
        return positive, w - positive
    total = np.add.reduceat(w, groups.starts, axis=0)
    positive = np.add.reduceat(positive, groups.starts, axis=0)
    return positive, total - positive


def weighted_auc(positive: npt.NDArray[np.float64], negative: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """AUC per resample from per-group weights: sum over groups of the has_failure weight
    times (the no_failure weight below + half the no_failure weight level with it), over
    (has_failure total x no_failure total). NaN where a class has no weight."""
    below = np.cumsum(negative, axis=0) - negative
    total = positive.sum(axis=0) * negative.sum(axis=0)
    pairs = (positive * (below + 0.5 * negative)).sum(axis=0)
    out = np.full(total.shape, np.nan)
    np.divide(pairs, total, out=out, where=total > 0)
    return out


def best_accuracy(positive: npt.NDArray[np.float64], negative: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """The best agreement of ``accuracy_by_cut`` per resample, in one pass: cutting below
    group g is right on every has_failure item at or above it and every no_failure item
    below it, i.e. (has_failure total + sum over groups below g of (no_failure -
    has_failure)); the best cut takes the largest such prefix sum (0 for flagging all)."""
    total_positive = positive.sum(axis=0)
    total = total_positive + negative.sum(axis=0)
    gain = np.maximum(np.cumsum(negative - positive, axis=0).max(axis=0), 0.0)
    out = np.full(total.shape, np.nan)
    np.divide(total_positive + gain, total, out=out, where=total > 0)
    return out


def accuracy_by_cut(positive: npt.NDArray[np.float64], negative: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Weighted agreement of each rule "has_failure when failure score >= group g's score"
    (g = 0..k-1) and of "never has_failure" (row k): (k + 1) x resamples; NaN without weight."""
    zeros = np.zeros((1, positive.shape[1]))
    positive_before = np.vstack([zeros, np.cumsum(positive, axis=0)])
    negative_before = np.vstack([zeros, np.cumsum(negative, axis=0)])
    total_positive = positive.sum(axis=0)
    total = total_positive + negative.sum(axis=0)
    correct = (total_positive - positive_before) + negative_before
    out = np.full(correct.shape, np.nan)
    np.divide(correct, total, out=out, where=total > 0)
    return out


def best_threshold(has_failure: Sequence[bool], values: Sequence[float], spec: SignalSpec) -> dict[str, Any]:
    """The rule with the highest agreement with the human majority.

    Rules: "has_failure when value >= t" (signals whose higher values mean has_failure) or
    "has_failure when value <= t" (the others), for every observed value t, and "never
    has_failure" (``threshold`` null). Among rules with equal agreement, the one flagging
    the fewest items. Returns ``accuracy`` (matches / n), ``threshold``, ``rule`` (in
    words), ``n_flagged`` and ``baseline_accuracy`` (the larger class's share: the
    agreement of always answering it). ``accuracy`` is ``None`` without items."""
    labels = np.asarray(has_failure, dtype=bool)
    n = int(labels.size)
    if n == 0:
        return {"accuracy": None, "threshold": None, "rule": None, "n_flagged": 0, "baseline_accuracy": None}
    groups = score_groups(failure_scores(values, spec), labels)
    positive, negative = group_weights(groups, np.ones((n, 1)))
    accuracy = accuracy_by_cut(positive, negative)[:, 0]
    # The last maximum: the highest cut, i.e. the fewest items flagged.
    cut = int(accuracy.size - 1 - np.argmax(accuracy[::-1]))
    n_flagged = int(positive[cut:].sum() + negative[cut:].sum())
    if cut == len(groups.scores):
        threshold, rule = None, "never has_failure"
    else:
        raw = float(groups.scores[cut]) if spec.higher_means == HAS_FAILURE else float(-groups.scores[cut])
        threshold = raw
        rule = f"has_failure when {spec.key} {'>=' if spec.higher_means == HAS_FAILURE else '<='} {raw:.6g}"
    n_positive = int(labels.sum())
    return {
        "accuracy": float(accuracy[cut]),
        "threshold": threshold,
        "rule": rule,
        "n_flagged": n_flagged,
        "baseline_accuracy": max(n_positive, n - n_positive) / n,
    }


def model_table(
    has_failure: Sequence[bool], values: Sequence[float], models: Sequence[str]
) -> dict[str, dict[str, Any]]:
    """Per model (sorted): ``n`` items, ``human_no_failure`` (share of them whose human
    majority is no_failure: the human success rate) and ``signal_mean`` (mean value)."""
    table: dict[str, dict[str, Any]] = {}
    for model in sorted(set(models)):
        picked = [i for i, m in enumerate(models) if m == model]
        table[model] = {
            "n": len(picked),
            "human_no_failure": sum(1 for i in picked if not has_failure[i]) / len(picked),
            "signal_mean": float(np.mean([values[i] for i in picked])),
        }
    return table


def ranking_tau(table: Mapping[str, Mapping[str, Any]], spec: SignalSpec) -> float | None:
    """Kendall's tau-b (SciPy) between the models ranked by the signal (mean value, read in
    its orientation: negated when higher means has_failure) and by the human success rate.
    ``None`` with fewer than two models or when either ranking is all ties."""
    if len(table) < 2:
        return None
    models = sorted(table)
    goodness = [
        table[m]["signal_mean"] if spec.higher_means == NO_FAILURE else -table[m]["signal_mean"] for m in models
    ]
    human = [table[m]["human_no_failure"] for m in models]
    from scipy.stats import kendalltau  # heavy: imported when a tau is computed, not with the URLs

    tau = kendalltau(goodness, human).statistic
    return None if tau is None or math.isnan(tau) else float(tau)


def model_sums(
    codes: npt.NDArray[np.intp], n_models: int, weights: npt.NDArray[np.float64], columns: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """Sum over each model's items of weight x column: models x resamples."""
    one_hot = np.zeros((n_models, codes.size))
    one_hot[codes, np.arange(codes.size)] = 1.0
    return one_hot @ (weights * columns[:, None])


def weighted_tau(
    count: npt.NDArray[np.float64], goodness: npt.NDArray[np.float64], human: npt.NDArray[np.float64]
) -> npt.NDArray[np.float64]:
    """Kendall's tau-b per resample between model means (models x resamples sums divided by
    the models' weights), over the models drawn at least once: (concordant - discordant) /
    sqrt((pairs - tied in the signal) x (pairs - tied in humans)); NaN when undefined."""
    present = count > 0
    safe = np.where(present, count, 1.0)
    x, y = goodness / safe, human / safe
    n_resamples = count.shape[1]
    numerator = np.zeros(n_resamples)
    pairs = np.zeros(n_resamples)
    tied_x = np.zeros(n_resamples)
    tied_y = np.zeros(n_resamples)
    for a, b in combinations(range(count.shape[0]), 2):
        valid = present[a] & present[b]
        sx, sy = np.sign(x[a] - x[b]), np.sign(y[a] - y[b])
        numerator += np.where(valid, sx * sy, 0.0)
        pairs += valid
        tied_x += valid & (sx == 0)
        tied_y += valid & (sy == 0)
    denominator = np.sqrt((pairs - tied_x) * (pairs - tied_y))
    out = np.full(n_resamples, np.nan)
    np.divide(numerator, denominator, out=out, where=denominator > 0)
    return out
