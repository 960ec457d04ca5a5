"""Which automatic metric agrees with people: every signal ranked by how well it predicts
the human majority's has_failure. Pure Python, NumPy, scikit-learn and SciPy; no Django.

The seed papers make opposite claims that a researcher can now check on their own labels:
"reference-overlap metrics are cheap but miscalibrated to procedural validity"
(How2Everything §4), and SCORE "as a binary detector" reaches "an AUC of 0.92" against
experts, with Kendall's tau = 0.72 on model rankings (Thoth/SciRecipe App. I.5).

For each signal (judges' How2Score verdicts, SCORE and its parts, ROUGE-L, BLEU, the length
ratio, the formatting proxies; annotate/stats/signals.py computes the per-item values and
fixes each one's orientation, annotate/stats/ranking.py the statistics of one signal):

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

**Items**: only items with a human majority (annotate/stats/majority.py ``human_majority``: more
than half of the item's non-excluded labels, on items with at least ``min_annotations``
(default 2) of them; an even split is a tie, counted in ``n_ties``, and an item with fewer
annotations is counted in ``n_too_few``; both are left out of everything). The report's
``human_majority`` block is ``HumanMajority.summary()``, the same counts as the agreement
report's. A signal uses the items with a majority *and* a value for it (``n``); Kendall's
tau also needs the item's model.

**Intervals**: 95 % BCa bootstrap (Efron 1987) over items: ``bootstrap`` resamples
(default 1,000) of the majority-labelled items with replacement, the *same* resamples for
every signal (so signals are compared on paired resamples), drawn by
``numpy.random.default_rng`` seeded from ``seed``; the acceleration from the jackknife over
the signal's own items (up to 2,000; bias-corrected percentile above). An interval every
resample of which gives one value (a constant signal: AUC 0.5 by ties alone; a perfect
separation: AUC 1) is null with the reason ("interval not estimable (n = ...)"), never a
zero-width interval; each signal names the method and marks it approximate below 100 items
(``interval``, ``interval_name``, ``approximate``). Each statistic is recomputed in each
resample (the best threshold is chosen again). A resample where a statistic is undefined
(AUC: one class missing among the drawn items that have the signal; agreement: none of them
drawn; tau: fewer than two models drawn, or one ranking all ties) is left out and counted in
``n_bootstrap_undefined``. The bootstrap computes the same quantities as the point estimates
with resample counts as weights (the tests check them against scikit-learn and SciPy)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from annotate.stats.bootstrap import (
    DEFAULT_BOOTSTRAP,
    JACKKNIFE_MAX_ITEMS,
    bootstrap_counts,
    check_bootstrap,
    item_bootstrap_fields,
    item_bootstrap_interval,
    sample_size_note,
    seed_sequence,
)
from annotate.stats.majority import HumanMajority
from annotate.stats.ranking import (
    best_accuracy,
    best_threshold,
    group_weights,
    model_sums,
    model_table,
    ranking_tau,
    roc_auc,
    score_groups,
    weighted_auc,
    weighted_tau,
)
from annotate.stats.records import NO_FAILURE
from annotate.stats.signals import SignalSpec, failure_scores, signal_spec
from core.intervals import resample_blocks

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
        "95% BCa bootstrap (Efron 1987) resampling the majority-labelled items with replacement (the same "
        "resamples for every signal), the acceleration from the jackknife over the signal's items; each statistic "
        "recomputed per resample (the threshold chosen again); resamples where it is undefined are left out and "
        "counted in n_bootstrap_undefined; null with the reason in auc_ci95_not_estimable, "
        "best_threshold.ci95_not_estimable or kendall_tau_ci95_not_estimable when every resample gives the same "
        "value (a constant signal, a perfect separation): never a zero-width interval; interval, interval_name "
        "and approximate name the method and flag it below 100 items"
    ),
    "ranking": "signals ordered by AUC, highest first; signals without an AUC last; equal AUC by key",
    "small_sample": (
        "per signal: a note when n is below 30 items or the AUC interval is wider than 0.3 "
        "(annotate/stats/bootstrap.py sample_size_note); null otherwise"
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
    values: Mapping[str, float | None],
    models: Mapping[str, str | None],
) -> tuple[dict[str, Any], npt.NDArray[np.intp]]:
    """Point estimates of one signal, and the positions (into ``items``) it is defined on."""
    positions = np.array([i for i, item in enumerate(items) if _usable(values.get(item))], dtype=np.intp)
    picked = [items[i] for i in positions]
    labels = [majority[item] for item in picked]
    # ``picked`` holds the items whose value is usable: present (not None) and finite.
    raw = [float(cast(float, values[item])) for item in picked]
    with_model = [(labels[k], raw[k], model) for k, item in enumerate(picked) if (model := models.get(item))]
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


def constant_signal_reason(n: int) -> str:
    """Why a signal with one value on every item has no interval: it cannot rank the items,
    its AUC is 0.5 by ties alone in every resample, and [0.5, 0.5] would read as certainty."""
    items = "item" if n == 1 else "items"
    return (
        f"interval not estimable (n = {n}): the signal takes one value on all {n} {items}, so it cannot "
        f"separate has_failure from no_failure (its AUC of 0.5 is ties alone) and every resample gives the "
        f"same value"
    )


def _weighted_model_tau(p: Mapping[str, Any], w: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    """Kendall's tau of a prepared signal (``_prepared``) for each column of item weights
    ``w`` (the signal's items x resamples), from the weighted per-model sums."""
    wm = w[p["model_rows"]]
    count = model_sums(p["codes"], p["n_models"], wm, np.ones(p["codes"].size))
    goodness = model_sums(p["codes"], p["n_models"], wm, p["goodness"])
    success = model_sums(p["codes"], p["n_models"], wm, p["success"])
    return weighted_tau(count, goodness, success)


def _jackknife(p: Mapping[str, Any]) -> dict[str, npt.NDArray[np.float64]]:
    """Leave-one-item-out values of a signal's AUC, best-threshold agreement and tau over its
    own items (the BCa acceleration, Efron 1987); empty above ``JACKKNIFE_MAX_ITEMS`` items
    (the interval is then bias-corrected percentile)."""
    n = int(p["positions"].size)
    if not 2 <= n <= JACKKNIFE_MAX_ITEMS:
        return {}
    w = 1.0 - np.eye(n)
    positive, negative = group_weights(p["groups"], w)
    result = {"auc": weighted_auc(positive, negative), "accuracy": best_accuracy(positive, negative)}
    if p["n_models"] >= 2:
        result["tau"] = _weighted_model_tau(p, w)
    return result


def auc_interval(
    scores: Sequence[float], has_failure: Sequence[bool], *, bootstrap: int = DEFAULT_BOOTSTRAP, seed: int = 0
) -> list[float] | None:
    """The 95 % BCa bootstrap interval over items of the AUC of ``scores`` (higher: more
    likely has_failure) against ``has_failure`` (ties count 1/2), the interval the report
    gives each signal; None when a class is missing, ``bootstrap`` is 0 or it is not
    estimable (a constant score)."""
    check_bootstrap(bootstrap)
    values = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(has_failure, dtype=bool)
    if values.size != labels.size:
        raise ValueError(f"scores and labels differ in length ({values.size} and {labels.size})")
    if bootstrap == 0 or labels.all() or not labels.any():
        return None
    groups = score_groups(values, labels)
    ones = np.ones((values.size, 1))
    point = float(weighted_auc(*group_weights(groups, ones))[0])
    rng = np.random.default_rng(seed_sequence(seed, "auc"))
    draws = [
        weighted_auc(*group_weights(groups, bootstrap_counts(rng, values.size, size)))
        for size in resample_blocks(bootstrap, 4 * values.size)
    ]
    jackknife = (
        weighted_auc(*group_weights(groups, 1.0 - np.eye(values.size))) if values.size <= JACKKNIFE_MAX_ITEMS else None
    )
    interval, _ = item_bootstrap_interval(np.concatenate(draws), point, jackknife, values.size, low=0.0, high=1.0)
    return interval


def _prepared(
    spec: SignalSpec,
    result: Mapping[str, Any],
    positions: npt.NDArray[np.intp],
    items: Sequence[str],
    y_all: npt.NDArray[np.bool_],
    values: Mapping[str, float | None],
    models: Mapping[str, str | None],
) -> dict[str, Any]:
    """What the bootstrap of one signal needs, computed once: its positions among ``items``,
    its items grouped by failure score (``score_groups``; None without items), the rows and
    model codes of its items that carry a model, each one's goodness (the signal with its
    orientation applied) and success (human majority no_failure), and its lists of draws."""
    # ``positions`` are the items whose value is usable: present (not None) and finite.
    signal = np.array([float(cast(float, values[items[i]])) for i in positions], dtype=np.float64)
    y = y_all[positions]
    code_of = {m: c for c, m in enumerate(sorted(result["models"]))}
    has_model = np.array([bool(models.get(items[i])) for i in positions], dtype=bool)
    return {
        "positions": positions,
        "groups": score_groups(failure_scores(signal, spec), y) if positions.size else None,
        "model_rows": np.flatnonzero(has_model),
        "codes": np.array([code_of[models[items[i]]] for i in positions[has_model]], dtype=np.intp),
        "goodness": (signal if spec.higher_means == NO_FAILURE else -signal)[has_model],
        "success": (~y[has_model]).astype(np.float64),
        "n_models": len(code_of),
        "draws": {"auc": [], "accuracy": [], "tau": []},
    }


def _draw_resamples(prepared: Iterable[dict[str, Any]], rng: np.random.Generator, n_items: int, bootstrap: int) -> None:
    """Draw ``bootstrap`` resamples of the ``n_items`` items, the same for every signal, and
    add each signal's AUC, best-threshold agreement and tau in them to its ``draws``."""
    for size in resample_blocks(bootstrap, 4 * n_items):
        weights = bootstrap_counts(rng, n_items, size)  # items x resamples
        for p in prepared:
            if p["groups"] is None:
                continue
            w = weights[p["positions"]]
            positive, negative = group_weights(p["groups"], w)
            p["draws"]["auc"].append(weighted_auc(positive, negative))
            p["draws"]["accuracy"].append(best_accuracy(positive, negative))
            if p["n_models"] >= 2:
                p["draws"]["tau"].append(_weighted_model_tau(p, w))


def _set_intervals(result: dict[str, Any], p: Mapping[str, Any], bootstrap: int, *, has_items: bool) -> None:
    """Put a signal's intervals into its ``result``: for AUC, best-threshold agreement and tau,
    the BCa interval from its draws (or, for a constant signal, null with the reason), why
    it is null, the resamples where each was undefined, and the small-sample note."""
    draws = p["draws"]
    jackknife = _jackknife(p) if bootstrap > 0 and p["groups"] is not None else {}
    constant = p["groups"] is not None and p["groups"].starts.size == 1
    undefined = {}
    result.update(item_bootstrap_fields(result["n"]))
    for statistic, point, low in (
        ("auc", result["auc"], 0.0),
        ("accuracy", result["best_threshold"]["accuracy"], 0.0),
        ("tau", result["kendall_tau"], -1.0),
    ):
        values = (
            np.concatenate(draws[statistic]) if draws[statistic] else np.full(bootstrap if has_items else 0, np.nan)
        )
        undefined[statistic] = int(np.isnan(values).sum())
        reason = constant_signal_reason(result["n"]) if constant else None
        interval, not_estimable = (
            item_bootstrap_interval(
                values, point, jackknife.get(statistic), result["n"], low=low, high=1.0, reason=reason
            )
            if bootstrap > 0
            else (None, None)
        )
        if statistic == "auc":
            result["auc_ci95"], result["auc_ci95_not_estimable"] = interval, not_estimable
        elif statistic == "accuracy":
            result["best_threshold"]["ci95"] = interval
            result["best_threshold"]["ci95_not_estimable"] = not_estimable
        else:
            result["kendall_tau_ci95"], result["kendall_tau_ci95_not_estimable"] = interval, not_estimable
    result["n_bootstrap_undefined"] = undefined if bootstrap > 0 else {"auc": 0, "accuracy": 0, "tau": 0}
    result["small_sample"] = sample_size_note(result["n"], result["auc_ci95"])


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

    ``majority``: the items' human majority (``annotate.stats.majority.human_majority``; ties
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
    check_bootstrap(bootstrap)
    rng = np.random.default_rng(seed_sequence(seed, "metric_agreement"))
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
        prepared[key] = _prepared(spec, result, positions, items, y_all, signals[key], models)

    if bootstrap > 0 and items:
        _draw_resamples(prepared.values(), rng, len(items), bootstrap)
    for key, result in results.items():
        _set_intervals(result, prepared[key], bootstrap, has_items=bool(items))

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
            "interval": "95% BCa (Efron 1987), the acceleration from the jackknife over each signal's items",
            "resampling": "the n_items majority-labelled items with replacement; the same resamples for every signal",
        },
        "denominators": DENOMINATORS,
    }
