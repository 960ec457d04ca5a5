"""A judge's score corrected for its errors (Rogan-Gladen), with a bootstrap interval. Pure
Python and NumPy, no Django.

The positive class is success = no_failure (How2Score counts no_failure): the judge's true
positive and true negative rates come from the items with a human majority, and correct its
observed success rate on a (usually larger, unlabelled) set of items."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from annotate.stats.bootstrap import DEFAULT_BOOTSTRAP, SeedLike, check_bootstrap, rate
from annotate.stats.records import NO_FAILURE
from core.intervals import percentile_interval


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


def _jeffreys_draws(rng: np.random.Generator, k: int, n: int, size: int) -> npt.NDArray[np.float64]:
    """``size`` draws of a rate with ``k`` successes in ``n`` from its Jeffreys posterior."""
    return rng.beta(k + 0.5, n - k + 0.5, size=size)


def calibrated_score(
    judge_on_labelled: Sequence[bool],
    human_on_labelled: Sequence[bool],
    judge_on_target: Sequence[bool],
    *,
    bootstrap: int = DEFAULT_BOOTSTRAP,
    seed: SeedLike = 0,
) -> dict[str, Any]:
    """A judge's success rate (How2Score as a fraction) corrected for its errors.

    The **positive class is success = no_failure**. ``judge_on_labelled`` and
    ``human_on_labelled`` are paired has_failure labels on items with a human majority;
    they give TPR (judge no_failure among human no_failure) and TNR (judge has_failure
    among human has_failure). ``judge_on_target`` are the judge's labels on the set to
    score (usually larger and unlabelled); their no_failure fraction is the observed score.
    ``corrected_score = rogan_gladen(observed, TPR, TNR)``.

    ``ci95`` is a 95 % percentile interval of the correction over ``bootstrap`` draws of the
    three rates (TPR, TNR and the observed score), each from its Jeffreys posterior
    Beta(k + 1/2, n - k + 1/2), independently: a parametric bootstrap. Resampling the items
    instead could not vary a rate of 0 or 1 (three generations all judged successes gave
    [1, 1], narrower than the raw score's Wilson interval); the Jeffreys draws give such a
    rate the uncertainty its n allows. Draws where the correction is undefined
    (TPR + TNR - 1 <= 0) are left out and counted in ``n_bootstrap_undefined``."""
    check_bootstrap(bootstrap)
    if len(judge_on_labelled) != len(human_on_labelled):
        raise ValueError("judge_on_labelled and human_on_labelled differ in length")
    judge_l = np.asarray(judge_on_labelled, dtype=bool).reshape(-1)
    human_l = np.asarray(human_on_labelled, dtype=bool).reshape(-1)
    target = np.asarray(judge_on_target, dtype=bool).reshape(-1)
    positive = ~human_l  # human majority no_failure
    negative = human_l
    n_pos, n_neg = int(positive.sum()), int(negative.sum())
    tpr = rate(int((positive & ~judge_l).sum()), n_pos)
    tnr = rate(int((negative & judge_l).sum()), n_neg)
    observed = rate(int((~target).sum()), int(target.size))
    corrected = None if tpr is None or tnr is None or observed is None else rogan_gladen(observed, tpr, tnr)
    interval: list[float] | None = None
    undefined = 0
    if bootstrap > 0 and n_pos > 0 and n_neg > 0 and target.size > 0:
        rng = np.random.default_rng(seed)
        tpr_b = _jeffreys_draws(rng, int((positive & ~judge_l).sum()), n_pos, bootstrap)
        tnr_b = _jeffreys_draws(rng, int((negative & judge_l).sum()), n_neg, bootstrap)
        observed_b = _jeffreys_draws(rng, int((~target).sum()), int(target.size), bootstrap)
        youden = tpr_b + tnr_b - 1.0
        defined = youden > 0.0
        undefined = int((~defined).sum())
        if defined.any():
            corrected_b = (observed_b[defined] + tnr_b[defined] - 1.0) / youden[defined]
            interval = percentile_interval(np.clip(corrected_b, 0.0, 1.0))
    elif bootstrap > 0:
        undefined = bootstrap  # a class missing from the labelled items: nothing to correct with
    if corrected is None:
        interval = None  # no interval around an undefined value
    return {
        "positive_class": NO_FAILURE,
        "observed_score": observed,
        "n_target": int(target.size),
        "tpr": tpr,
        "tnr": tnr,
        "n_positive": n_pos,
        "n_negative": n_neg,
        "corrected_score": corrected,
        "ci95": interval,
        "n_bootstrap_undefined": undefined,
    }
