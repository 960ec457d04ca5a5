"""The interval of every SCORE mean (SCORE and the §4.2 metrics over a run's or a model's
generations): a BCa bootstrap over the generations (Efron 1987) with the jackknife of the
mean, never of zero width (all values equal: null and "interval not estimable (n = ...)"),
labelled with its method and as approximate below the n the coverage harness measured; the
run page says both."""

from __future__ import annotations

import numpy as np
import pytest
from django.template.loader import render_to_string

from core.intervals import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    ITEM_BOOTSTRAP,
    METHODS,
    bca_interval,
    bootstrap_mean_estimate,
    bootstrap_mean_interval,
    interval_fields,
    resample_blocks,
    uniform_draws,
)
from judging.score_metric import ScoreResult
from judging.score_selectors import GenerationScore, score_summary

KEYS = ("score", "step_m", "order_strict", "order_lcs_eval", "order_tau", "semantic")


def _result(score: float, semantic: float = 0.5) -> ScoreResult:
    return ScoreResult(
        format_ok=None,
        consistency_ok=None,
        r_scale=1.0,
        order_strict=1,
        order_lcs=1.0,
        semantic=semantic,
        score=score,
        step_m=1,
        order_lcs_eval=1.0,
        order_tau=1.0,
    )


def _scores(values: list[float]) -> list[GenerationScore]:
    return [GenerationScore(i, _result(v, semantic=0.1 * (i % 3)), "rule") for i, v in enumerate(values)]


def test_a_mean_of_equal_values_has_no_interval_but_a_reason():
    assert bootstrap_mean_interval([1.0] * 10) is None
    interval, reason = bootstrap_mean_estimate([0.7] * 4)
    assert interval is None
    assert reason is not None and reason.startswith("interval not estimable (n = 4)")


def test_nothing_to_resample_is_none_without_a_reason():
    assert bootstrap_mean_estimate([]) == (None, None)
    assert bootstrap_mean_estimate([0.1, 0.9], bootstrap=0) == (None, None)


def test_a_mean_interval_is_bca_with_the_jackknife_of_the_mean():
    rng_data = np.random.default_rng(3)
    data = rng_data.exponential(size=25)  # right-skewed: BCa and percentile differ
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    boot = np.concatenate(
        [
            data[uniform_draws(rng, data.size, size)].mean(axis=1)
            for size in resample_blocks(BOOTSTRAP_RESAMPLES, 2 * data.size)
        ]
    )
    jackknife = (data.sum() - data) / (data.size - 1)
    expected = bca_interval(boot, float(data.mean()), jackknife)
    interval = bootstrap_mean_interval(data)
    assert interval == pytest.approx(expected)
    assert interval != pytest.approx(list(np.quantile(boot, [0.025, 0.975])))
    assert interval is not None and interval[0] < data.mean() < interval[1]


def test_the_mean_interval_keeps_its_signature_for_other_callers():
    interval = bootstrap_mean_interval([0.0, 1.0, 1.0, 0.0, 1.0], bootstrap=200, seed=5)
    assert interval is not None and 0.0 <= interval[0] < interval[1] <= 1.0
    assert bootstrap_mean_interval([0.0, 1.0, 1.0], bootstrap=200, seed=5) == bootstrap_mean_interval(
        [0.0, 1.0, 1.0], bootstrap=200, seed=5
    )


def test_score_summary_gives_no_zero_width_interval_and_says_why():
    summary = score_summary(_scores([1.25] * 6))
    assert summary["ci95"]["score"] is None
    assert summary["not_estimable"]["score"].startswith("interval not estimable (n = 6)")
    # the semantic values differ between generations: that mean has its interval
    assert summary["ci95"]["semantic"] is not None and summary["not_estimable"]["semantic"] is None
    for key in KEYS:
        interval = summary["ci95"][key]
        assert interval is None or interval[1] > interval[0]


def test_score_summary_carries_its_method_n_and_the_approximate_label():
    small = score_summary(_scores([0.5, 1.0, 1.5, 2.0, 0.0]))
    assert {k: small[k] for k in ("interval", "interval_name", "approximate")} == interval_fields(ITEM_BOOTSTRAP, 5)
    assert small["approximate"] is True and small["n_scored"] == 5
    n_large = METHODS[ITEM_BOOTSTRAP].approximate_below
    large = score_summary(_scores([0.1 * (i % 7) for i in range(n_large)]))
    assert large["approximate"] is False
    empty = score_summary([])
    assert empty["ci95"]["score"] is None and empty["not_estimable"]["score"] is None


def test_the_score_panel_shows_the_reason_and_approximate():
    not_estimable = render_to_string("judging/score_summary.html", {"score": score_summary(_scores([1.25] * 6))})
    assert "interval not estimable (n = 6)" in not_estimable
    small = score_summary(_scores([0.5, 1.0, 1.5, 2.0, 0.0]))
    shown = render_to_string("judging/score_summary.html", {"score": small})
    low, high = small["ci95"]["score"]
    assert f"95% CI {low:.3f}–{high:.3f}" in shown
    assert "approximate" in shown and "BCa bootstrap over items" in shown
