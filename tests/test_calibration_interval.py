"""The calibrated How2Score's two estimators (annotate/stats/calibration.py): Rogan-Gladen's
interval never collapses on an all-pass or all-fail model and does not move with the seed;
stratified PPI++ by hand, with its strata pooled when they have too few labels and never a
zero-width interval; both registered with the intervals the product publishes."""

from __future__ import annotations

import math

import numpy as np
import pytest

from annotate.stats.calibration import (
    PPI_STRATIFIED,
    ROGAN_GLADEN,
    calibrated_score,
    calibration_summary,
    ppi_score,
)
from core.intervals import METHODS

# A judge that agreed with the human majority on 5 no_failure and 5 has_failure items.
AGREEING_JUDGE = [False] * 5 + [True] * 5


def test_an_all_pass_model_is_never_100_100():
    # 2 + 2 labelled items the judge got right, 2,000 generations all judged no_failure: the
    # old interval was exactly [1.0, 1.0] (Jeffreys draws above 1 clipped to 1).
    few = [False, False, True, True]
    result = calibrated_score(few, few, [False] * 2000, seed=0)
    assert result["corrected_score"] == 1.0
    low, high = result["ci95"]
    assert high == 1.0 and round(100 * low, 1) < 100.0, result["ci95"]


def test_an_all_fail_model_is_never_0_0():
    few = [False, False, True, True]
    result = calibrated_score(few, few, [True] * 2000, seed=0)
    assert result["corrected_score"] == 0.0
    low, high = result["ci95"]
    assert low == 0.0 and round(100 * high, 1) > 0.0, result["ci95"]


def test_a_small_all_pass_model_keeps_an_honest_interval():
    result = calibrated_score(AGREEING_JUDGE, AGREEING_JUDGE, [False] * 60, seed=0)
    low, high = result["ci95"]
    assert high == 1.0 and 0.9 < low < 0.97, result["ci95"]


def test_the_interval_does_not_move_between_seeds():
    judge = [False] * 9 + [True] + [True] * 8 + [False] * 2
    human = [False] * 10 + [True] * 10
    target = [False] * 30 + [True] * 30
    bounds = np.array([calibrated_score(judge, human, target, seed=seed)["ci95"] for seed in range(5)])
    # At the old 1,000 Jeffreys draws the ends moved by several points; now by well under one.
    assert np.ptp(bounds, axis=0).max() < 0.01, bounds
    mc_se = calibrated_score(judge, human, target, seed=0)["ci95_mc_se"]
    assert max(mc_se) < 0.003, mc_se


def test_the_interval_holds_the_point_and_stays_in_0_1():
    judge = [False] * 9 + [True] + [True] * 8 + [False] * 2
    human = [False] * 10 + [True] * 10
    for target in ([False] * 20, [False] * 10 + [True] * 10, [True] * 20, [False] * 3):
        result = calibrated_score(judge, human, target, seed=1)
        low, high = result["ci95"]
        assert 0.0 <= low <= result["corrected_score"] <= high <= 1.0 and high - low > 0.01


def test_rogan_gladen_is_not_estimable_without_a_human_class_and_says_why():
    result = calibrated_score([True, False], [True, True], [True], bootstrap=20)
    assert result["corrected_score"] is None and result["ci95"] is None
    assert "class is missing" in result["ci95_not_estimable"]


def test_ppi_by_hand_on_one_stratum():
    # Labelled (Y = human no_failure, f = judge no_failure): (1,1) x3, (0,0) x1, (1,0) x1.
    labelled = [("t", False, False)] * 3 + [("t", True, True)] + [("t", True, False)]
    unlabelled = [("t", False)] * 12 + [("t", True)] * 8  # f mean 0.6 over N = 20
    result = ppi_score(labelled, unlabelled, min_labelled=2)
    ys = np.array([1, 1, 1, 0, 1.0])
    fs = np.array([1, 1, 1, 0, 0.0])
    fn = np.array([1.0] * 12 + [0.0] * 8)
    n, big_n = 5, 20
    lam = min(1.0, np.cov(ys, fs)[0, 1] / ((1 + n / big_n) * np.concatenate([fs, fn]).var(ddof=1)))
    theta = lam * fn.mean() + (ys - lam * fs).mean()
    adjusted = (ys.sum() + 2) / (n + 4)
    var_y = max(ys.var(ddof=1), adjusted * (1 - adjusted))
    var_rect = var_y - 2 * lam * np.cov(ys, fs)[0, 1] + lam**2 * fs.var(ddof=1)
    se = math.sqrt(lam**2 * fn.var(ddof=1) / big_n + var_rect / n)
    assert result["lambda"] == pytest.approx(lam)
    assert result["estimate"] == pytest.approx(min(1.0, theta))
    assert result["se"] == pytest.approx(se)
    t = 2.7764451051977987  # Student's t, 97.5 %, 4 degrees of freedom (5 labelled, 1 stratum)
    assert result["critical_value"] == pytest.approx(t)
    assert result["ci95"] == pytest.approx([max(0.0, min(1.0, theta) - t * se), min(1.0, min(1.0, theta) + t * se)])
    assert (result["n_labelled"], result["n_unlabelled"], result["method"]) == (5, 20, PPI_STRATIFIED)


def test_ppi_weights_strata_by_their_unlabelled_share():
    a = [("a", False, False)] * 6 + [("a", False, True)] * 4  # judge says no_failure, humans 60 %
    b = [("b", True, True)] * 8 + [("b", True, False)] * 2  # judge says has_failure, humans 20 %
    unlabelled = [("a", False)] * 30 + [("b", True)] * 70
    result = ppi_score(a + b, unlabelled)
    assert [s["stratum"] for s in result["strata"]] == ["a", "b"]
    assert [s["weight"] for s in result["strata"]] == [0.3, 0.7]
    # f is constant within each stratum, so each stratum's estimate is its human share.
    assert result["estimate"] == pytest.approx(0.3 * 0.6 + 0.7 * 0.2)
    assert result["pooled_because"] == {}


def test_ppi_pools_strata_with_too_few_or_all_equal_labels_and_says_which():
    labelled = (
        [("a", False, False)] * 6
        + [("a", True, True)] * 5  # kept alone
        + [("b", False, False)] * 12  # human labels all equal
        + [("c", True, True)]  # 1 labelled item
    )
    unlabelled = [("a", False)] * 10 + [("b", False)] * 10 + [("c", True)] * 10 + [("d", True)] * 10
    result = ppi_score(labelled, unlabelled)
    assert [s["stratum"] for s in result["strata"]] == ["a", "pooled"]
    assert result["strata"][1]["merged"] == ["b", "c", "d"]
    assert result["pooled_because"] == {
        "b": "human labels all equal",
        "c": "1 labelled item (fewer than 10)",
        "d": "0 labelled items (fewer than 10)",
    }
    assert result["strata"][1]["weight"] == pytest.approx(0.75)


def test_ppi_on_all_equal_labels_is_never_zero_width():
    labelled = [("t", False, False)] * 8
    result = ppi_score(labelled, [("t", False)] * 100)
    assert result["estimate"] == 1.0
    low, high = result["ci95"]
    assert high == 1.0 and 0.5 < low < 0.99  # the Agresti-Coull floor: never [1, 1]


def test_ppi_is_not_estimable_on_one_label_or_no_target():
    assert ppi_score([("t", False, False)], [("t", False)])["not_estimable"].startswith("not estimable: 1 labelled")
    result = ppi_score([("t", False, False)] * 3, [])
    assert result["estimate"] is None and result["ci95"] is None and "no unlabelled" in result["not_estimable"]


def test_both_estimators_are_registered_with_the_published_intervals():
    assert {ROGAN_GLADEN, PPI_STRATIFIED} <= set(METHODS)
    assert "Jeffreys" in METHODS[ROGAN_GLADEN].name and "bootstrap" not in METHODS[ROGAN_GLADEN].name


def test_the_summary_gives_fractions_with_percent_siblings():
    rogan = calibrated_score(AGREEING_JUDGE, AGREEING_JUDGE, [False] * 30 + [True] * 30, seed=0)
    ppi = ppi_score([("t", j, j) for j in AGREEING_JUDGE], [("t", False)] * 30 + [("t", True)] * 30)
    summary = calibration_summary(rogan, ppi, source_studies=["pilot-1"])
    assert summary["corrected_score"] == pytest.approx(0.5)
    assert summary["corrected_score_percent"] == pytest.approx(50.0)
    assert summary["ci95_percent"] == pytest.approx([100 * v for v in summary["ci95"]])
    assert summary["ppi_score"] == ppi["estimate"] and summary["ppi_score_percent"] == pytest.approx(
        100 * ppi["estimate"]
    )
    assert summary["ppi"]["ci95_percent"] == pytest.approx([100 * v for v in ppi["ci95"]])
    assert (summary["n_labelled"], summary["n_unlabelled"], summary["source"]) == (10, 60, "1 study")
    assert summary["ppi"]["source_studies"] == ["pilot-1"] and summary["ppi"]["n_unlabelled"] == 60
    assert summary["interval"] == ROGAN_GLADEN and summary["ppi"]["interval"] == PPI_STRATIFIED


def test_the_remembered_posterior_interval_is_the_one_computed_afresh():
    """A leaderboard shown again reuses each row's Rogan-Gladen interval (the same counts and
    seed give the same draws): the remembered result equals a fresh computation, and the
    caller's lists are its own."""
    import numpy as np

    from annotate.stats.calibration import _posterior_interval, _posterior_interval_memo, calibrated_score

    counts = (14, 16, 7, 9, 40, 60)
    fresh = _posterior_interval(counts, 20_000, np.random.default_rng(3))
    assert _posterior_interval_memo(counts, 20_000, 3) == fresh
    hits = _posterior_interval_memo.cache_info().hits
    judge_l = [False] * 14 + [True] * 2 + [True] * 7 + [False] * 2
    human_l = [False] * 16 + [True] * 9
    first = calibrated_score(judge_l, human_l, [False] * 40 + [True] * 20, seed=3, draws=20_000)
    first["ci95_mc_se"].append(-1.0)  # a caller that changes what it was given
    again = calibrated_score(judge_l, human_l, [False] * 40 + [True] * 20, seed=3, draws=20_000)
    assert _posterior_interval_memo.cache_info().hits >= hits + 1
    assert again["ci95"] == first["ci95"] and -1.0 not in again["ci95_mc_se"]
