"""Which automatic metric agrees with people: every signal ranked by how well it predicts
the human majority's has_failure. Pure Python, NumPy, scikit-learn and SciPy; no Django.

The seed papers make opposite claims that a researcher can now check on their own labels:
"reference-overlap metrics are cheap but miscalibrated to procedural validity"
(How2Everything §4), and SCORE "as a binary detector" reaches "an AUC of 0.92" against
experts, with Kendall's tau = 0.72 on model rankings (Thoth/SciRecipe App. I.5).

For each signal (judges' How2Score verdicts, SCORE and its parts, ROUGE-L, BLEU, the length
ratio, the formatting proxies; annotate/metric_signals.py computes the per-item values):

* **AUC** of the signal against the human majority's has_failure (positive class:
  has_failure), ``sklearn.metrics.roc_auc_score``: the probability that a random
  has_failure item looks worse on the signal than a random no_failure item, **ties
  counting 1/2**. 0.5 is chance; below 0.5 the signal points the wrong way.
* **Agreement at the best threshold**: the largest share of items whose human majority
  the rule "has_failure when the signal is at or beyond t" reproduces, over every observed
  value t and "never has_failure"; among equal shares the rule flagging the fewest items
  wins. The threshold is chosen on the same items (an optimistic, in-sample number; the
  majority-class share is reported beside it as the baseline to beat).
* **Kendall's tau** (``scipy.stats.kendalltau``, tau-b: ties in either ranking are
  allowed) between the models ranked by the signal's mean and the models ranked by the
  human majority's success rate (share of items without failure), over the same items.

**Orientation is fixed before looking at the data** (``SIGNAL_SPECS``, with the reason for
each): a judge's has_failure, a step-count mismatch, a duplicated step and the duplicate
n-gram rate point to failure; SCORE and its parts, ROUGE-L, BLEU and the length ratio point
to success. It is never flipped to fit the labels: a signal that works backwards shows an
AUC below 0.5 and a negative tau.

**Items**: only items with a human majority (annotate/agreement.py ``human_majority``: more
than half of the item's non-excluded labels, on items with at least ``min_annotations``
(default 2) of them; an even split is a tie, counted in ``n_ties``, and an item with fewer
annotations is counted in ``n_too_few``; both are left out of everything). The report's
``human_majority`` block is ``HumanMajority.summary()``, the same counts as the agreement
report's. A signal uses the items with a majority *and* a value for it (``n``); Kendall's
tau also needs the item's model.

**Intervals**: 95 % percentile bootstrap (2.5th and 97.5th percentiles) over items:
``bootstrap`` resamples (default 1,000) of the majority-labelled items with replacement,
the *same* resamples for every signal (so signals are compared on paired resamples), drawn
by ``numpy.random.default_rng`` seeded from ``seed``. Each statistic is recomputed in each
resample (the best threshold is chosen again). A resample where a statistic is undefined
(AUC: one class missing among the drawn items that have the signal; agreement: none of them
drawn; tau: fewer than two models drawn, or one ranking all ties) is left out and counted in
``n_bootstrap_undefined``. The bootstrap computes the same quantities as the point estimates
with resample counts as weights (the tests check them against scikit-learn and SciPy)."""
from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from scipy.stats import kendalltau
from sklearn.metrics import roc_auc_score

from annotate.agreement import (
    DEFAULT_BOOTSTRAP,
    HAS_FAILURE,
    NO_FAILURE,
    HumanMajority,
    JudgmentRow,
    sample_size_note,
    _blocks,
    _bootstrap_counts,
    _check_bootstrap,
    _FieldError,
    _name_field,
    _parse_lines,
    _read,
    _seed_sequence,
    _type_name,
)
from core.intervals import percentile_interval

JUDGE_PREFIX = "judge:"

Direction = Literal["has_failure", "no_failure"]


@dataclass(frozen=True)
class SignalSpec:
    """One automatic signal and the a-priori direction it is read in: ``higher_means`` is
    the human label a higher value is taken to predict."""

    key: str
    label: str
    family: str
    higher_means: Direction
    why: str

    def as_dict(self) -> dict[str, str]:
        return {"key": self.key, "label": self.label, "family": self.family, "higher_means": self.higher_means,
                "why": self.why}


# The orientation of every signal, fixed from what the signal claims to measure or from the
# papers, never from the data this report is computed on.
SIGNAL_SPECS: dict[str, SignalSpec] = {spec.key: spec for spec in (
    SignalSpec("score", "SCORE", "SCORE", NO_FAILURE,
               "a structured reward: higher is closer to the reference; protocols with critical errors score "
               "lower (Thoth/SciRecipe App. I.5)"),
    SignalSpec("score_r_scale", "SCORE r_scale (step scale)", "SCORE", NO_FAILURE,
               "1 when the step count and verbosity match the reference, lower otherwise (Eq. (3))"),
    SignalSpec("score_order", "SCORE order (strict)", "SCORE", NO_FAILURE,
               "1 when the actions keep the reference's order (Eq. (13))"),
    SignalSpec("score_semantics", "SCORE semantics", "SCORE", NO_FAILURE,
               "object and parameter overlap of aligned steps (Eq. (5))"),
    SignalSpec("rouge_l", "ROUGE-L", "overlap", NO_FAILURE,
               "the conventional reading of an overlap metric: closer to the reference is better (the claim "
               "How2Everything §4 disputes)"),
    SignalSpec("bleu", "BLEU", "overlap", NO_FAILURE,
               "the conventional reading of an overlap metric: closer to the reference is better"),
    SignalSpec("length_ratio", "Length ratio (L2/L1 tokens)", "length", NO_FAILURE,
               "How2Everything App. D, Table 10: the odds of no_failure rise with the gen/ref token ratio for all "
               "seven models (OR 1.012-1.018 per +1 percentage point)"),
    SignalSpec("step_count_mismatch", "Step-count mismatch", "format", HAS_FAILURE,
               "a formatting failure: the prompt asks for exactly the reference's number of steps "
               "(How2Everything §5, App. D.3)"),
    SignalSpec("duplicate_step", "Duplicate step", "format", HAS_FAILURE,
               "a degenerate output: a step repeated verbatim (App. D.3)"),
    SignalSpec("dup_ngram_rate", "Duplicate n-gram rate", "format", HAS_FAILURE,
               "repetition within the output (App. D.3): more repetition, more likely broken"),
)}


def judge_signal(judge: str) -> SignalSpec:
    """A judge's How2Score verdict as a signal: 1 for has_failure, 0 for no_failure."""
    return SignalSpec(f"{JUDGE_PREFIX}{judge}", f"How2Score · {judge}", "judge", HAS_FAILURE,
                      "the judge's own verdict: has_failure (1) predicts a critical failure")


def signal_spec(key: str) -> SignalSpec:
    """The spec of a signal key: a fixed signal or ``judge:<name>``."""
    if key.startswith(JUDGE_PREFIX):
        return judge_signal(key[len(JUDGE_PREFIX):])
    try:
        return SIGNAL_SPECS[key]
    except KeyError:
        raise ValueError(f"unknown signal {key!r}; expected judge:<name> or one of {', '.join(SIGNAL_SPECS)}") from None


def judge_signals(judgments: Iterable[JudgmentRow]) -> dict[str, dict[str, float]]:
    """``judge:<name>`` -> item_id -> 1.0 (has_failure) or 0.0. Raises ``ValueError`` when a
    judge labels an item twice."""
    signals: dict[str, dict[str, float]] = {}
    for row in judgments:
        values = signals.setdefault(f"{JUDGE_PREFIX}{row.judge}", {})
        if row.item_id in values:
            raise ValueError(f"two judgments of item {row.item_id!r} by judge {row.judge!r}")
        values[row.item_id] = 1.0 if row.has_failure else 0.0
    return signals


# --------------------------------------------------------------------------- statistics


def failure_scores(values: Sequence[float] | npt.NDArray[np.float64], spec: SignalSpec) -> npt.NDArray[np.float64]:
    """The values turned so that higher means more likely has_failure (negated for a signal
    whose higher values mean no_failure)."""
    array = np.asarray(values, dtype=np.float64)
    return array if spec.higher_means == HAS_FAILURE else -array


def roc_auc(has_failure: Sequence[bool], values: Sequence[float], spec: SignalSpec) -> float | None:
    """AUC of the signal for has_failure (scikit-learn; ties count 1/2); ``None`` when one
    class is missing."""
    labels = np.asarray(has_failure, dtype=bool)
    if labels.size == 0 or labels.all() or not labels.any():
        return None
    return float(roc_auc_score(labels, failure_scores(values, spec)))


@dataclass(frozen=True)
class _Groups:
    """Items sorted by failure score and grouped by equal score (ascending)."""

    order: npt.NDArray[np.intp]
    starts: npt.NDArray[np.intp]
    scores: npt.NDArray[np.float64]  # one per group
    positive: npt.NDArray[np.float64]  # has_failure, in sorted order, as 0/1


def _groups(failure: npt.NDArray[np.float64], has_failure: npt.NDArray[np.bool_]) -> _Groups:
    order = np.argsort(failure, kind="stable")
    ordered = failure[order]
    starts = np.flatnonzero(np.r_[True, np.diff(ordered) != 0])
    return _Groups(order, starts, ordered[starts], has_failure[order].astype(np.float64))


def _group_weights(groups: _Groups, weights: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """(has_failure, no_failure) weight per group, groups x resamples."""
    w = weights[groups.order]
    positive = w * groups.positive[:, None]
    if groups.starts.size == groups.order.size:  # all values distinct: one item per group
        return positive, w - positive
    total = np.add.reduceat(w, groups.starts, axis=0)
    positive = np.add.reduceat(positive, groups.starts, axis=0)
    return positive, total - positive


def _weighted_auc(positive: npt.NDArray[np.float64], negative: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """AUC per resample from per-group weights: sum over groups of the has_failure weight
    times (the no_failure weight below + half the no_failure weight level with it), over
    (has_failure total x no_failure total). NaN where a class has no weight."""
    below = np.cumsum(negative, axis=0) - negative
    total = positive.sum(axis=0) * negative.sum(axis=0)
    pairs = (positive * (below + 0.5 * negative)).sum(axis=0)
    out = np.full(total.shape, np.nan)
    np.divide(pairs, total, out=out, where=total > 0)
    return out


def _best_accuracy(positive: npt.NDArray[np.float64], negative: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """The best agreement of ``_accuracy_by_cut`` per resample, in one pass: cutting below
    group g is right on every has_failure item at or above it and every no_failure item
    below it, i.e. (has_failure total + sum over groups below g of (no_failure -
    has_failure)); the best cut takes the largest such prefix sum (0 for flagging all)."""
    total_positive = positive.sum(axis=0)
    total = total_positive + negative.sum(axis=0)
    gain = np.maximum(np.cumsum(negative - positive, axis=0).max(axis=0), 0.0)
    out = np.full(total.shape, np.nan)
    np.divide(total_positive + gain, total, out=out, where=total > 0)
    return out


def _accuracy_by_cut(positive: npt.NDArray[np.float64], negative: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
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
    groups = _groups(failure_scores(values, spec), labels)
    positive, negative = _group_weights(groups, np.ones((n, 1)))
    accuracy = _accuracy_by_cut(positive, negative)[:, 0]
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
    return {"accuracy": float(accuracy[cut]), "threshold": threshold, "rule": rule, "n_flagged": n_flagged,
            "baseline_accuracy": max(n_positive, n - n_positive) / n}


def model_table(has_failure: Sequence[bool], values: Sequence[float], models: Sequence[str]) -> dict[str, dict[str, Any]]:
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
    goodness = [table[m]["signal_mean"] if spec.higher_means == NO_FAILURE else -table[m]["signal_mean"] for m in models]
    human = [table[m]["human_no_failure"] for m in models]
    tau = kendalltau(goodness, human).statistic
    return None if tau is None or math.isnan(tau) else float(tau)


def _model_sums(codes: npt.NDArray[np.intp], n_models: int, weights: npt.NDArray[np.float64],
                columns: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Sum over each model's items of weight x column: models x resamples."""
    one_hot = np.zeros((n_models, codes.size))
    one_hot[codes, np.arange(codes.size)] = 1.0
    return one_hot @ (weights * columns[:, None])


def _weighted_tau(count: npt.NDArray[np.float64], goodness: npt.NDArray[np.float64],
                  human: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
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


# --------------------------------------------------------------------------- the report

DENOMINATORS: dict[str, str] = {
    "human_majority": (
        "strict majority (more than half) of an item's non-excluded has_failure labels, for items with at least "
        "min_annotations (default 2, never fewer) of them; an even split is a tie (n_ties) and an item with fewer "
        "annotations has no majority (n_too_few); both are left out of every statistic; the same counts as the "
        "agreement report's human_majority; n_items at the top level = human_majority.n_with_majority"
    ),
    "n": "items with a human majority and a value of this signal",
    "n_missing": (
        "items with a human majority but no value of this signal (e.g. a judge that did not judge it); NaN and "
        "infinite values count as missing"
    ),
    "n_unlabelled": (
        "values of this signal on items without a human majority (tied, too few annotations or never "
        "annotated), left out; the "
        "reference-based signals of a study or file are computed only for items with a majority"
    ),
    "auc": (
        "roc_auc_score with positive class has_failure over the n items; the signal is read in its fixed "
        "orientation (higher_means); ties count 1/2; null when one class is missing"
    ),
    "best_threshold": (
        "agreement = items where the rule's label equals the human majority / n, maximised over the rules "
        "'has_failure when value >= t' (or <= t, by orientation) for every observed t and 'never has_failure'; "
        "equal agreement: the rule flagging fewest items; chosen on the same items (in-sample); "
        "baseline_accuracy = the larger class's share of the n items"
    ),
    "kendall_tau": (
        "scipy kendalltau (tau-b) between models ranked by the signal's mean (orientation applied) and by the "
        "human success rate (share of items whose majority is no_failure), over the n items that carry a model; "
        "null with fewer than two models or when either ranking is all ties"
    ),
    "ci95": (
        "95% percentile bootstrap resampling the majority-labelled items with replacement (the same resamples for "
        "every signal); each statistic recomputed per resample (the threshold chosen again); resamples where it "
        "is undefined are left out and counted in n_bootstrap_undefined"
    ),
    "ranking": "signals ordered by AUC, highest first; signals without an AUC last; equal AUC by key",
    "small_sample": (
        "per signal: a note when n is below 30 items or the AUC interval is wider than 0.3 "
        "(annotate/agreement.py sample_size_note); null otherwise"
    ),
    "null": "a statistic that is undefined, or an interval around an undefined statistic, is null",
}


def _usable(value: float | None) -> bool:
    """A value the statistics can use: present and finite (NaN or infinity count as missing)."""
    return value is not None and math.isfinite(value)


def _signal_result(
    spec: SignalSpec,
    items: Sequence[str],
    majority: Mapping[str, bool],
    values: Mapping[str, float],
    models: Mapping[str, str | None],
) -> tuple[dict[str, Any], npt.NDArray[np.intp]]:
    """Point estimates of one signal, and the positions (into ``items``) it is defined on."""
    positions = np.array([i for i, item in enumerate(items) if _usable(values.get(item))], dtype=np.intp)
    picked = [items[i] for i in positions]
    labels = [majority[item] for item in picked]
    raw = [float(values[item]) for item in picked]
    with_model = [(labels[k], raw[k], models[item]) for k, item in enumerate(picked) if models.get(item)]
    table = model_table([w[0] for w in with_model], [w[1] for w in with_model], [w[2] for w in with_model])
    n_positive = sum(labels)
    result = {
        **spec.as_dict(),
        "n": len(picked),
        "n_has_failure": n_positive,
        "n_no_failure": len(picked) - n_positive,
        "n_missing": len(items) - len(picked),
        "auc": roc_auc(labels, raw, spec),
        "best_threshold": best_threshold(labels, raw, spec),
        "kendall_tau": ranking_tau(table, spec),
        "n_models": len(table),
        "n_without_model": len(picked) - len(with_model),
        "models": table,
    }
    return result, positions


def metric_agreement_report(
    *,
    majority: HumanMajority,
    signals: Mapping[str, Mapping[str, float | None]],
    models: Mapping[str, str | None] | None = None,
    notes: Mapping[str, str] | None = None,
    bootstrap: int = DEFAULT_BOOTSTRAP,
    seed: int = 0,
) -> dict[str, Any]:
    """Every signal ranked by AUC against the human majority, as a JSON-ready dict.

    ``majority``: the items' human majority (``annotate.agreement.human_majority``; ties
    and items with too few annotations are left out). ``signals``: signal key (a key of
    ``SIGNAL_SPECS`` or ``judge:<name>``) -> item_id -> value. ``models``: item_id -> the
    model that wrote the item's generation (``None`` or absent: unknown; such items count
    for AUC and agreement but not for Kendall's tau). ``notes``: signal key -> a sentence
    shown with the signal (e.g. which components SCORE used).

    Returns ``n_items`` (items with a majority), ``n_ties``, ``human_majority``
    (``HumanMajority.summary()``: the agreement report's counts), ``n_models``, ``signals`` (a list, ranked: each with
    ``rank``, its spec, ``n``, ``auc``, ``auc_ci95``, ``best_threshold`` {accuracy, ci95,
    threshold, rule, n_flagged, baseline_accuracy}, ``kendall_tau``, ``kendall_tau_ci95``,
    ``n_models``, ``models`` and ``n_bootstrap_undefined``), ``bootstrap`` and
    ``denominators``. Raises ``ValueError`` for a negative ``bootstrap`` or ``seed`` or an
    unknown signal key."""
    _check_bootstrap(bootstrap)
    rng = np.random.default_rng(_seed_sequence(seed, "metric_agreement"))
    models = models or {}
    specs = {key: signal_spec(key) for key in signals}
    labelled = majority.decided()
    items = list(labelled)
    y_all = np.array([labelled[item] for item in items], dtype=bool)

    results: dict[str, dict[str, Any]] = {}
    prepared: dict[str, dict[str, Any]] = {}
    for key in sorted(signals):
        spec = specs[key]
        result, positions = _signal_result(spec, items, labelled, signals[key], models)
        if notes and key in notes:
            result["note"] = notes[key]
        result["n_unlabelled"] = sum(1 for item, v in signals[key].items() if _usable(v) and item not in labelled)
        results[key] = result
        values = np.array([float(signals[key][items[i]]) for i in positions], dtype=np.float64)
        y = y_all[positions]
        model_names = sorted(result["models"])
        code_of = {m: c for c, m in enumerate(model_names)}
        has_model = np.array([bool(models.get(items[i])) for i in positions], dtype=bool)
        prepared[key] = {
            "positions": positions,
            "groups": _groups(failure_scores(values, spec), y) if positions.size else None,
            "model_rows": np.flatnonzero(has_model),
            "codes": np.array([code_of[models[items[i]]] for i in positions[has_model]], dtype=np.intp),
            "goodness": (values if spec.higher_means == NO_FAILURE else -values)[has_model],
            "success": (~y[has_model]).astype(np.float64),
            "n_models": len(model_names),
            "draws": {"auc": [], "accuracy": [], "tau": []},
        }

    if bootstrap > 0 and items:
        for size in _blocks(bootstrap, 4 * len(items)):
            weights = _bootstrap_counts(rng, len(items), size)  # items x resamples
            for key, p in prepared.items():
                if p["groups"] is None:
                    continue
                w = weights[p["positions"]]
                positive, negative = _group_weights(p["groups"], w)
                p["draws"]["auc"].append(_weighted_auc(positive, negative))
                p["draws"]["accuracy"].append(_best_accuracy(positive, negative))
                if p["n_models"] >= 2:
                    wm = w[p["model_rows"]]
                    ones = np.ones(p["codes"].size)
                    count = _model_sums(p["codes"], p["n_models"], wm, ones)
                    goodness = _model_sums(p["codes"], p["n_models"], wm, p["goodness"])
                    success = _model_sums(p["codes"], p["n_models"], wm, p["success"])
                    p["draws"]["tau"].append(_weighted_tau(count, goodness, success))

    for key, result in results.items():
        draws = prepared[key]["draws"]
        undefined = {}
        for statistic, point in (("auc", result["auc"]), ("accuracy", result["best_threshold"]["accuracy"]),
                                 ("tau", result["kendall_tau"])):
            values = np.concatenate(draws[statistic]) if draws[statistic] else np.full(bootstrap if items else 0, np.nan)
            defined = ~np.isnan(values)
            undefined[statistic] = int((~defined).sum())
            interval = percentile_interval(values[defined]) if bootstrap > 0 and point is not None else None
            if statistic == "auc":
                result["auc_ci95"] = interval
            elif statistic == "accuracy":
                result["best_threshold"]["ci95"] = interval
            else:
                result["kendall_tau_ci95"] = interval
        result["n_bootstrap_undefined"] = undefined if bootstrap > 0 else {"auc": 0, "accuracy": 0, "tau": 0}
        result["small_sample"] = sample_size_note(result["n"], result["auc_ci95"])

    ranked = sorted(results.values(), key=lambda r: (r["auc"] is None, -(r["auc"] or 0.0), r["key"]))
    for rank, result in enumerate(ranked, start=1):
        result["rank"] = rank
    all_models = {models[item] for item in items if models.get(item)}
    summary = majority.summary()
    return {
        "n_items": len(items),
        "n_ties": summary["n_ties"],
        "human_majority": summary,
        "n_models": len(all_models),
        "signals": [{"rank": r.pop("rank"), **r} for r in ranked],
        "bootstrap": {
            "resamples": bootstrap,
            "seed": seed,
            "interval": "95% percentile (2.5th and 97.5th percentiles, linear interpolation)",
            "resampling": "the n_items majority-labelled items with replacement; the same resamples for every signal",
        },
        "denominators": DENOMINATORS,
    }


# --------------------------------------------------------------------------- generations file


@dataclass(frozen=True)
class GenerationRow:
    """One line of a generations file: an item's reference and generated steps and the model."""

    item_id: str
    reference_steps: tuple[str, ...]
    candidate_steps: tuple[str, ...]
    model: str | None


def _steps(record: Mapping[str, Any], name: str, *, non_empty: bool) -> tuple[str, ...]:
    if name not in record:
        raise _FieldError("missing", name)
    value = record[name]
    if not isinstance(value, list):
        raise _FieldError(f"expected a list of steps (strings), got {_type_name(value)}", name)
    if non_empty and not value:
        raise _FieldError("expected at least one step, got an empty list", name)
    for index, step in enumerate(value):
        if not isinstance(step, str):
            raise _FieldError(f"expected a string, got {_type_name(step)}", f"{name}[{index}]")
    return tuple(value)


def parse_generation_record(record: Any) -> GenerationRow:
    """Check one decoded generations record: ``item_id`` (non-empty string),
    ``reference_steps`` (non-empty list of strings), ``candidate_steps`` (list of strings),
    optionally ``model`` (non-empty string or null; when absent, ``source.model`` is read, so
    a study's items file serves as is). Other fields are ignored. Raises ``ValueError``
    naming the field."""
    if not isinstance(record, dict):
        raise _FieldError(f"expected a JSON object, got {_type_name(record)}")
    item_id = _name_field(record, "item_id")
    reference = _steps(record, "reference_steps", non_empty=True)
    candidate = _steps(record, "candidate_steps", non_empty=False)
    field, model = "model", record.get("model")
    if "model" not in record and isinstance(record.get("source"), dict):
        field, model = "source.model", record["source"].get("model")
    if model is not None and (not isinstance(model, str) or not model.strip()):
        raise _FieldError(f"expected a non-empty string or null, got {_type_name(model)} {model!r}", field)
    return GenerationRow(item_id=item_id, reference_steps=reference, candidate_steps=candidate, model=model)


def parse_generation_lines(lines: Iterable[bytes | str], *, source: str = "<generations>") -> list[GenerationRow]:
    """Parse JSONL generations records; two lines with the same ``item_id`` are an error.
    Raises ``AgreementInputError`` with ``source`` and the 1-based line number."""
    return _parse_lines(lines, source, parse_generation_record, lambda row: (row.item_id, ""))


def read_generations(path: str | Path) -> list[GenerationRow]:
    """Read a generations JSONL file (optionally .gz/.zst/.bz2/.xz)."""
    return _read(path, parse_generation_lines)
