"""The human How2Score estimated from a judge's labels and a few human labels: two
estimators side by side. Pure Python, NumPy and SciPy, no Django.

The positive class is success = no_failure (How2Score counts no_failure). Both estimate the
share of the *target* items (usually a model's whole judged set, unlabelled) that the human
majority would call no_failure, from the judge's labels on the target and the items that
have both a judge label and a human majority (the labelled items).

**Rogan-Gladen** (``calibrated_score``; Rogan & Gladen 1978, Am J Epidemiol 107:71-76):
the judge's true-positive and true-negative rates on the labelled items correct its
observed no_failure share on the target, ``(observed + TNR - 1) / (TPR + TNR - 1)``
clipped to [0, 1]. Assumes the judge's error rates on the labelled items are its error rates
on the target (they transfer across models and topics). Its 95 % interval is the central
interval of the three rates' Jeffreys posteriors, Beta(k + 1/2, n - k + 1/2), restricted to
the region where the model holds (TPR + TNR > 1 and 1 - TNR <= observed rate <= TPR, so the
corrected value lies in [0, 1]); values are *never clipped* (clipping piled them on 0 or 1
and gave 100 [100, 100]). The restricted posterior is drawn exactly: TPR and TNR from their
posteriors, the observed rate from its posterior truncated to [1 - TNR, TPR] by inverse CDF,
each draw weighted by that truncated mass (importance weights). ``draws`` (default
``RG_DRAWS`` = 100,000) draws give each bound to a Monte Carlo standard error of about
0.001-0.002 on 0-1 (``ci95_mc_se``, by batch means over 20 batches), so no seed moves a printed
bound. The interval always contains the point (a point clipped to 0 or 1 is a bound).

**PPI++, stratified** (``ppi_score``; Angelopoulos, Duchi & Zrnic 2023, "PPI++: Efficient
Prediction-Powered Inference", arXiv 2311.01453, §2 and Example 6.1 for the mean; strata as
in Fisch et al. 2024, "Stratified Prediction-Powered Inference for Hybrid Language Model
Evaluation", arXiv 2406.04291, §3): with Y the human majority's no_failure and f the judge's,
per stratum ``theta = lambda * mean_N(f) + mean_n(Y - lambda * f)``, ``lambda = Cov_n(Y, f) /
((1 + n / N) Var(f))`` clipped to [0, 1] (0 when f does not vary), ``var = lambda^2
Var_N(f) / N + Var_n(Y - lambda f) / n``. Strata are weighted by their share of the
unlabelled items, ``theta = sum w_k theta_k``, ``var = sum w_k^2 var_k + sum w_k (theta_k -
theta)^2 / N`` (the last term: the shares are estimated). A stratum with fewer than
``min_labelled`` (10) labelled items, with no unlabelled item, or whose human labels are all
equal is merged into one ``pooled`` stratum (``strata`` says which); if the pooled stratum
then has fewer than ``min_labelled`` labels, everything is one stratum. Assumes the labelled
items are a random sample of the target population within each stratum. The 95 % interval
is ``theta +- t sqrt(var)`` around the point clipped to [0, 1] and cut to [0, 1], with t
Student's 97.5 % quantile at n_labelled - (number of strata) degrees of freedom (1.96 at
large n; the normal quantile itself undercovered at 20 labelled items over 3 topics); in ``Var_n(Y)`` the share of Y is replaced by the Agresti-Coull share ``(s + 2) /
(n + 4)`` when that is larger (two pseudo-successes and two pseudo-failures; Agresti & Coull
1998, Am Stat 52:119), so all-equal human labels never give a zero variance and never a
zero-width interval. Fewer than two labelled items or no unlabelled item: not estimable
(``estimate`` and ``ci95`` None, ``not_estimable`` says why).

Signatures (the coverage harness bench/interval_coverage.py calls them)::

    calibrated_score(judge_on_labelled: Sequence[bool], human_on_labelled: Sequence[bool],
                     judge_on_target: Sequence[bool], *, bootstrap=1000, seed=0,
                     draws=RG_DRAWS) -> {"corrected_score", "ci95", ...}   # has_failure labels
    ppi_score(labelled: Sequence[(stratum, judge_has_failure, human_has_failure)],
              unlabelled: Sequence[(stratum, judge_has_failure)], *, min_labelled=2)
              -> {"estimate", "ci95", "n_labelled", "n_unlabelled", "lambda", "strata", "method", ...}

``calibration_summary`` puts both in the one shape the leaderboard API and the agreement API
show (fractions, each with its ``_percent`` sibling)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from annotate.stats.bootstrap import DEFAULT_BOOTSTRAP, SeedLike, check_bootstrap, rate
from annotate.stats.records import NO_FAILURE
from core.intervals import CI_QUANTILES, interval_fields
from judging.how2score import percent_forms

ROGAN_GLADEN = "rogan-gladen"
PPI_STRATIFIED = "ppi++ stratified"
# Draws of the restricted Jeffreys posterior behind the Rogan-Gladen interval: at 100,000 the
# bounds' Monte Carlo standard error is about 0.001-0.002 (tests/test_calibration_interval.py pins < 0.003).
RG_DRAWS = 100_000
_RG_BATCHES = 20
# Strata with fewer labels are pooled: at 2, the per-stratum variances of 20 labelled items
# over 3 topics covered 0.87 (the simulation in docs/agreement.md).
PPI_MIN_LABELLED = 10
POOLED = "pooled"


def rogan_gladen(observed: float, tpr: float, tnr: float) -> float | None:
    """Rogan-Gladen corrected prevalence of the positive class:
    (observed + TNR - 1) / (TPR + TNR - 1), clipped to [0, 1].

    Here the **positive class is success = no_failure** (How2Score counts no_failure):
    ``observed`` is the judge's fraction of no_failure labels, ``tpr`` = P(judge
    no_failure | human majority no_failure) and ``tnr`` = P(judge has_failure | human
    majority has_failure). ``None`` when TPR + TNR - 1 <= 0 (the judge is no better than
    chance, so its labels carry no information to correct with)."""
    youden = tpr + tnr - 1.0
    if youden <= 0.0:
        return None
    return min(1.0, max(0.0, (observed + tnr - 1.0) / youden))


def _weighted_quantiles(values: npt.NDArray[np.float64], weights: npt.NDArray[np.float64]) -> list[float] | None:
    """The 2.5 % and 97.5 % quantiles of ``values`` under ``weights`` (None without weight)."""
    keep = weights > 0
    if not keep.any():
        return None
    order = np.argsort(values[keep])
    sorted_values, cumulative = values[keep][order], np.cumsum(weights[keep][order])
    cumulative /= cumulative[-1]
    return [
        float(sorted_values[min(int(np.searchsorted(cumulative, q)), sorted_values.size - 1)]) for q in CI_QUANTILES
    ]


def _restricted_posterior(
    rng: np.random.Generator, counts: tuple[int, int, int, int, int, int], draws: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Corrected values and their importance weights: TPR, TNR from their Jeffreys
    posteriors, the observed rate from its Jeffreys posterior truncated to [1 - TNR, TPR]."""
    from scipy import special  # imported when a calibration is computed, not with the URLs

    k_pos, n_pos, k_neg, n_neg, k_obs, n_obs = counts
    tpr = rng.beta(k_pos + 0.5, n_pos - k_pos + 0.5, size=draws)
    tnr = rng.beta(k_neg + 0.5, n_neg - k_neg + 0.5, size=draws)
    a, b = k_obs + 0.5, n_obs - k_obs + 0.5
    youden = tpr + tnr - 1.0
    low_cdf = special.betainc(a, b, np.clip(1.0 - tnr, 0.0, 1.0))
    high_cdf = special.betainc(a, b, tpr)
    weights = np.where(youden > 0, np.clip(high_cdf - low_cdf, 0.0, None), 0.0)
    u = low_cdf + rng.random(draws) * (high_cdf - low_cdf)
    observed = special.betaincinv(a, b, np.clip(u, 0.0, 1.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        corrected = np.clip((observed + tnr - 1.0) / youden, 0.0, 1.0)  # clip: float noise only
    bad = ~np.isfinite(corrected) | (youden <= 0)
    weights[bad] = 0.0
    corrected[bad] = 0.0
    return corrected, weights


def _posterior_interval(
    counts: tuple[int, int, int, int, int, int], draws: int, rng: np.random.Generator
) -> tuple[list[float] | None, list[float] | None, int]:
    """The central 95 % interval of the restricted posterior's corrected values, each
    bound's Monte Carlo standard error (over ``_RG_BATCHES`` batches of the draws) and the
    number of draws outside the model."""
    values, weights = _restricted_posterior(rng, counts, draws)
    undefined = int((weights <= 0).sum())
    interval = _weighted_quantiles(values, weights)
    mc_se = None
    if interval is not None:
        batches = [
            _weighted_quantiles(v, w)
            for v, w in zip(np.array_split(values, _RG_BATCHES), np.array_split(weights, _RG_BATCHES))
        ]
        spread = np.array([b for b in batches if b is not None])
        if len(spread) >= 2:
            mc_se = [float(s) for s in spread.std(axis=0, ddof=1) / math.sqrt(len(spread))]
    return interval, mc_se, undefined


@lru_cache(maxsize=4096)
def _posterior_interval_memo(
    counts: tuple[int, int, int, int, int, int], draws: int, seed: int
) -> tuple[list[float] | None, list[float] | None, int]:
    """``_posterior_interval`` for an integer seed, remembered per process: the same six
    counts give the same draws, so a leaderboard shown again costs nothing (100,000 draws
    were 0.12 s a row). Callers copy the lists they change."""
    interval, mc_se, undefined = _posterior_interval(counts, draws, np.random.default_rng(seed))
    return interval, mc_se, undefined


def _uncorrectable_reason(n_pos: int, n_neg: int, n_obs: int) -> str:
    """Why the Rogan-Gladen correction is undefined, from the counts it rests on."""
    if n_pos == 0 or n_neg == 0:
        return "not estimable: a human-majority class is missing from the labelled items"
    if n_obs == 0:
        return "not estimable: no target item"
    return "not estimable: TPR + TNR - 1 <= 0 (the judge is no better than chance)"


def _rogan_gladen_interval(
    counts: tuple[int, int, int, int, int, int], corrected: float, draws: int, seed: SeedLike
) -> tuple[list[float] | None, list[float] | None, int, str | None]:
    """The interval of a defined correction ``corrected`` from the restricted posterior of the
    six counts (remembered per process for an integer seed), widened to hold the point, with
    each bound's Monte Carlo standard error, the draws outside the model and, when there is
    no interval, why."""
    if isinstance(seed, int) and not isinstance(seed, bool):
        interval, mc_se, undefined = _posterior_interval_memo(counts, draws, seed)
        mc_se = None if mc_se is None else list(mc_se)  # the remembered lists stay as they were
    else:
        interval, mc_se, undefined = _posterior_interval(counts, draws, np.random.default_rng(seed))
    if interval is None:
        return None, mc_se, undefined, "interval not estimable: no posterior draw lies where TPR + TNR > 1"
    # The point is the clipped Rogan-Gladen value; the interval always holds it.
    interval = [min(interval[0], corrected), max(interval[1], corrected)]
    if interval[1] - interval[0] <= 1e-12:
        n_labelled = counts[1] + counts[3]
        return None, mc_se, undefined, f"interval not estimable (n = {n_labelled}): the posterior has no spread"
    return interval, mc_se, undefined, None


def calibrated_score(
    judge_on_labelled: Sequence[bool],
    human_on_labelled: Sequence[bool],
    judge_on_target: Sequence[bool],
    *,
    bootstrap: int = DEFAULT_BOOTSTRAP,
    seed: SeedLike = 0,
    draws: int = RG_DRAWS,
) -> dict[str, Any]:
    """A judge's success rate (How2Score as a fraction) corrected for its errors
    (Rogan-Gladen; the module docstring gives the interval).

    The **positive class is success = no_failure**. ``judge_on_labelled`` and
    ``human_on_labelled`` are paired has_failure labels on items with a human majority;
    they give TPR (judge no_failure among human no_failure) and TNR (judge has_failure
    among human has_failure). ``judge_on_target`` are the judge's labels on the set to
    score; their no_failure fraction is the observed score.
    ``corrected_score = rogan_gladen(observed, TPR, TNR)``.

    ``bootstrap`` 0 turns the interval off (any other value turns it on: the interval is
    not a bootstrap, ``draws`` sets its precision). ``ci95`` is None when the correction is
    undefined or the restricted posterior has no mass (``ci95_not_estimable`` says why);
    ``ci95_mc_se`` gives the Monte Carlo standard error of each bound and
    ``n_bootstrap_undefined`` the draws outside the model (TPR + TNR <= 1, or an observed
    rate the truncation could not reach)."""
    check_bootstrap(bootstrap)
    if draws < _RG_BATCHES:
        raise ValueError(f"draws must be at least {_RG_BATCHES}, got {draws}")
    if len(judge_on_labelled) != len(human_on_labelled):
        raise ValueError("judge_on_labelled and human_on_labelled differ in length")
    judge_l = np.asarray(judge_on_labelled, dtype=bool).reshape(-1)
    human_l = np.asarray(human_on_labelled, dtype=bool).reshape(-1)
    target = np.asarray(judge_on_target, dtype=bool).reshape(-1)
    positive = ~human_l  # human majority no_failure
    negative = human_l
    n_pos, n_neg = int(positive.sum()), int(negative.sum())
    k_pos, k_neg = int((positive & ~judge_l).sum()), int((negative & judge_l).sum())
    k_obs, n_obs = int((~target).sum()), int(target.size)
    tpr, tnr, observed = rate(k_pos, n_pos), rate(k_neg, n_neg), rate(k_obs, n_obs)
    corrected = None if tpr is None or tnr is None or observed is None else rogan_gladen(observed, tpr, tnr)
    interval: list[float] | None = None
    mc_se: list[float] | None = None
    undefined = 0
    reason = None
    if corrected is None:
        reason = _uncorrectable_reason(n_pos, n_neg, n_obs)
        undefined = bootstrap
    elif bootstrap > 0:
        counts = (k_pos, n_pos, k_neg, n_neg, k_obs, n_obs)
        interval, mc_se, undefined, reason = _rogan_gladen_interval(counts, corrected, draws, seed)
    return {
        "positive_class": NO_FAILURE,
        "observed_score": observed,
        "n_target": n_obs,
        "tpr": tpr,
        "tnr": tnr,
        "n_positive": n_pos,
        "n_negative": n_neg,
        "n_labelled": n_pos + n_neg,
        "corrected_score": corrected,
        "ci95": interval,
        "ci95_mc_se": mc_se,
        "ci95_not_estimable": reason if interval is None else None,
        "draws": draws if bootstrap > 0 else 0,
        "n_bootstrap_undefined": undefined,
        "method": ROGAN_GLADEN,
    }


# --------------------------------------------------------------------------- PPI++


def _stratum_estimate(
    ys: npt.NDArray[np.float64], fs: npt.NDArray[np.float64], fn: npt.NDArray[np.float64]
) -> dict[str, Any]:
    """PPI++ for one stratum: labelled (Y, f) pairs and unlabelled f (all 0/1 floats)."""
    n, big_n = ys.size, fn.size
    var_f = float(np.concatenate([fs, fn]).var(ddof=1)) if n + big_n >= 2 else 0.0
    cov = float(np.cov(ys, fs, ddof=1)[0, 1]) if n >= 2 else 0.0
    lam = 0.0 if var_f <= 0 else min(1.0, max(0.0, cov / ((1 + n / big_n) * var_f)))
    theta = lam * float(fn.mean()) + float((ys - lam * fs).mean())
    share = float(ys.mean())
    adjusted = (float(ys.sum()) + 2.0) / (n + 4.0)  # Agresti-Coull: two pseudo-successes, two pseudo-failures
    var_y = max(float(ys.var(ddof=1)) if n >= 2 else 0.0, adjusted * (1 - adjusted))
    var_fs = float(fs.var(ddof=1)) if n >= 2 else 0.0
    var_rect = max(0.0, var_y - 2 * lam * cov + lam * lam * var_fs)
    var_fn = float(fn.var(ddof=1)) if big_n >= 2 else 0.0
    variance = lam * lam * var_fn / big_n + var_rect / n
    return {"theta": theta, "variance": variance, "lambda": lam, "human_share": share}


def _ppi_groups(
    lab: Mapping[Hashable, list[tuple[float, float]]], unl: Mapping[Hashable, list[float]], min_labelled: int
) -> tuple[list[tuple[Hashable, list[Hashable]]], dict[Hashable, str]]:
    """The strata PPI++ estimates, each a name and the strata it holds, and why each merged
    stratum was merged: a stratum stands alone with at least ``min_labelled`` labels, an
    unlabelled item and human labels that vary; the others form one ``pooled`` stratum, and
    when that has too few labels itself, everything is one stratum."""
    alone, pooled, because = [], [], {}
    for stratum in sorted(set(lab) | set(unl), key=repr):
        humans = [y for y, _ in lab.get(stratum, [])]
        if stratum not in unl:
            because[stratum] = "no unlabelled item"
        elif len(humans) < min_labelled:
            because[stratum] = (
                f"{len(humans)} labelled item{'' if len(humans) == 1 else 's'} (fewer than {min_labelled})"
            )
        elif len(set(humans)) == 1:
            because[stratum] = "human labels all equal"
        else:
            alone.append(stratum)
            continue
        pooled.append(stratum)
    groups: list[tuple[Hashable, list[Hashable]]] = [(s, [s]) for s in alone]
    if pooled:
        n_pooled = sum(len(lab.get(s, [])) for s in pooled)
        if n_pooled < min_labelled or not any(s in unl for s in pooled):
            groups = [(POOLED, alone + pooled)]  # too few labels to pool apart: one stratum
            because = {s: because.get(s, "too few labels in the pooled stratum: unstratified") for s in alone + pooled}
        else:
            groups.append((POOLED, pooled))
    return groups, because


def _ppi_strata(
    groups: Sequence[tuple[Hashable, list[Hashable]]],
    lab: Mapping[Hashable, list[tuple[float, float]]],
    unl: Mapping[Hashable, list[float]],
    big_n: int,
) -> tuple[list[dict[str, Any]], list[float], list[float], list[float]]:
    """PPI++ in each group of strata: the ``strata`` entries of the result, and each group's
    estimate, weight (its share of the ``big_n`` unlabelled items) and variance."""
    strata, thetas, weights, variances = [], [], [], []
    for name, members in groups:
        pairs = [p for s in members for p in lab.get(s, [])]
        fn = np.array([f for s in members for f in unl.get(s, [])], dtype=np.float64)
        if len(pairs) < 2 or fn.size == 0:
            continue  # cannot happen with the merging above; kept as a guard
        ys = np.array([y for y, _ in pairs], dtype=np.float64)
        fs = np.array([f for _, f in pairs], dtype=np.float64)
        one = _stratum_estimate(ys, fs, fn)
        weight = fn.size / big_n
        strata.append(
            {
                "stratum": name if isinstance(name, (str, int)) else str(name),
                "weight": weight,
                "n_labelled": len(pairs),
                "n_unlabelled": int(fn.size),
                "lambda": one["lambda"],
                "estimate": one["theta"],
                "merged": [m if isinstance(m, (str, int)) else str(m) for m in members] if name == POOLED else [],
            }
        )
        thetas.append(one["theta"])
        weights.append(weight)
        variances.append(one["variance"])
    return strata, thetas, weights, variances


def _ppi_combined(
    strata: list[dict[str, Any]],
    thetas: Sequence[float],
    weights: Sequence[float],
    variances: Sequence[float],
    n_labelled: int,
    big_n: int,
) -> dict[str, Any]:
    """The strata's estimates weighted into one, its variance (with the term for the
    estimated weights), and the Student-t interval around the point clipped to [0, 1]."""
    w = np.array(weights)
    t = np.array(thetas)
    theta = float((w * t).sum() / w.sum())
    variance = float((w * w * np.array(variances)).sum() + (w * (t - theta) ** 2).sum() / big_n)
    se = math.sqrt(variance)
    point = min(1.0, max(0.0, theta))
    # Student's t with n_labelled - (number of strata) degrees of freedom, not the normal 1.96:
    # at 20 labelled items over 3 topics the normal interval covered 0.925 (docs/agreement.md).
    df = max(1, n_labelled - len(strata))
    from scipy import special

    critical = float(special.stdtrit(df, 0.975))
    low, high = max(0.0, point - critical * se), min(1.0, point + critical * se)
    return {
        "estimate": point,
        "estimate_unclipped": theta,
        "se": se,
        "df": df,
        "critical_value": critical,
        "ci95": [low, high] if high - low > 1e-12 else None,
        "lambda": float((w * np.array([s["lambda"] for s in strata])).sum() / w.sum()),
        "strata": strata,
    }


def ppi_score(
    labelled: Sequence[tuple[Hashable, bool, bool]],
    unlabelled: Sequence[tuple[Hashable, bool]],
    *,
    min_labelled: int = PPI_MIN_LABELLED,
) -> dict[str, Any]:
    """The human How2Score (share of no_failure by the human majority) of the population the
    ``unlabelled`` items stand for, by stratified PPI++ (module docstring).

    ``labelled``: ``(stratum, judge_has_failure, human_has_failure)`` per item with a human
    majority; ``unlabelled``: ``(stratum, judge_has_failure)`` per item of the target (the
    judge's labels on the whole set to score). Returns ``estimate`` and ``ci95`` (0-1, None
    when not estimable), ``se``, ``n_labelled``, ``n_unlabelled``, ``lambda`` (per stratum in
    ``strata``; the weighted mean here), ``strata`` (one entry per stratum used: ``stratum``,
    ``weight``, ``n_labelled``, ``n_unlabelled``, ``lambda``, ``estimate``, ``merged``: the
    strata merged into it), ``pooled_because`` and ``method``."""
    if min_labelled < 2:
        raise ValueError(f"min_labelled must be at least 2, got {min_labelled}")
    result: dict[str, Any] = {
        "estimate": None,
        "ci95": None,
        "se": None,
        "n_labelled": len(labelled),
        "n_unlabelled": len(unlabelled),
        "lambda": None,
        "strata": [],
        "pooled_because": {},
        "not_estimable": None,
        "method": PPI_STRATIFIED,
    }
    if len(labelled) < 2 or not unlabelled:
        result["not_estimable"] = (
            f"not estimable: {len(labelled)} labelled item{'' if len(labelled) == 1 else 's'} (at least 2 needed)"
            if len(labelled) < 2
            else "not estimable: no unlabelled item to score"
        )
        return result
    lab: dict[Hashable, list[tuple[float, float]]] = defaultdict(list)
    unl: dict[Hashable, list[float]] = defaultdict(list)
    for stratum, judge_hf, human_hf in labelled:
        lab[stratum].append((0.0 if human_hf else 1.0, 0.0 if judge_hf else 1.0))
    for stratum, judge_hf in unlabelled:
        unl[stratum].append(0.0 if judge_hf else 1.0)
    groups, because = _ppi_groups(lab, unl, min_labelled)
    strata, thetas, weights, variances = _ppi_strata(groups, lab, unl, len(unlabelled))
    result.update(_ppi_combined(strata, thetas, weights, variances, len(labelled), len(unlabelled)))
    result["pooled_because"] = {str(k) if not isinstance(k, (str, int)) else k: v for k, v in because.items()}
    if result["ci95"] is None:
        result["not_estimable"] = f"interval not estimable (n = {len(labelled)}): zero estimated variance"
    return result


# --------------------------------------------------------------------------- one shape for both APIs


def _plural_studies(count: int) -> str:
    return f"{count} stud{'y' if count == 1 else 'ies'}"


def calibration_summary(
    rogan: dict[str, Any],
    ppi: dict[str, Any],
    *,
    source_studies: Sequence[str],
    ppi_source_studies: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Both estimators in the one shape the leaderboard API (``calibrated``) and the
    agreement API (``calibration``) give: every score and interval on 0-1 with its
    ``_percent`` sibling on 0-100 (judging/how2score.percent_forms, the reference's
    convention). Rogan-Gladen's fields stay at the top level (``corrected_score``, ``ci95``,
    ``tpr``, ``tnr``, ``n_labelled``, ``n_unlabelled`` = its target, ``interval``,
    ``interval_name``, ``approximate``, ``ci95_mc_se``, ...); PPI++'s are ``ppi_score``,
    ``ppi_ci95`` and ``ppi`` (``ppi_score``'s whole result, with its own ``n_labelled``,
    ``n_unlabelled``, interval fields and ``source_studies``). ``source_studies`` names the
    studies whose human labels Rogan-Gladen used, ``source`` counts them."""
    ppi_sources = list(source_studies if ppi_source_studies is None else ppi_source_studies)
    ppi_block = percent_forms(
        {
            **ppi,
            **interval_fields(PPI_STRATIFIED, ppi["n_labelled"]),
            "source_studies": ppi_sources,
            "source": _plural_studies(len(ppi_sources)),
        },
        ["estimate", "ci95"],
    )
    rg = {
        **rogan,
        "n_unlabelled": rogan["n_target"],
        **interval_fields(ROGAN_GLADEN, rogan["n_labelled"]),
        "source_studies": list(source_studies),
        "source": _plural_studies(len(source_studies)),
        "ppi_score": ppi["estimate"],
        "ppi_ci95": ppi["ci95"],
        "ppi": ppi_block,
    }
    return percent_forms(rg, ["corrected_score", "ci95", "observed_score", "ppi_score", "ppi_ci95"])
