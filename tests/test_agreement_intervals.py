"""The agreement statistics' intervals (issue 27): shares and rates carry a Wilson interval
(never a percentile bootstrap of a proportion, which collapses to [1, 1] at 20 of 20), the
statistics without a closed form (Cohen's kappa, Krippendorff's alpha, AUC) a BCa bootstrap
over items that gives null and "interval not estimable (n = ...)" instead of a zero-width
interval and prints no float noise, and every interval names its method, its n and whether
it is approximate."""

from __future__ import annotations

import random

import numpy as np
import pytest

from annotate.stats.agreement import agreement_report, judge_agreement, leave_one_out_agreement, pairwise_agreement
from annotate.stats.alpha import nominal_alpha_estimate, nominal_alpha_interval
from annotate.stats.kappa import kappa_interval
from annotate.stats.majority import HumanMajority
from annotate.stats.metric_agreement import metric_agreement_report
from annotate.stats.records import AnnotationRow, JudgmentRow
from core.intervals import ITEM_BOOTSTRAP, PERFECT_AGREEMENT, WILSON, interval_fields, wilson_interval


def _wilson(k: int, n: int) -> tuple[float, float]:
    """The Wilson interval of k of n (n > 0: never None)."""
    interval = wilson_interval(k, n)
    assert interval is not None
    return interval


def _rows(labels: dict[str, dict[str, bool]]) -> list[AnnotationRow]:
    failure = {"description": "a critical failure", "L1_steps": [], "L2_steps": [1]}
    return [
        AnnotationRow(item, who, label, [failure] if label else [])
        for item, by_annotator in labels.items()
        for who, label in by_annotator.items()
    ]


# --------------------------------------------------------------------------- shares: Wilson


def test_two_judges_agreeing_on_20_of_20_items_get_the_wilson_interval_not_one_one():
    items = [f"i{k}" for k in range(20)]
    judgments = [
        JudgmentRow(item, judge, k % 3 == 0) for k, item in enumerate(items) for judge in ("judge-a", "judge-flaky")
    ]
    report = agreement_report(_rows({"i0": {"a": True}}), judgments, bootstrap=200)
    pair = report["judge_pairs"]["judge-a|judge-flaky"]
    assert (pair["agreement"], pair["n"]) == (1.0, 20)
    low, high = pair["ci95"]
    assert low == pytest.approx(0.8389, abs=5e-4) and high == 1.0
    assert pair["interval"] == WILSON and pair["interval_name"] == "Wilson score interval"
    assert pair["approximate"] is False


def test_judge_agreement_and_its_per_class_rates_are_wilson_with_their_n():
    majority = HumanMajority(labels={f"i{k}": k < 6 for k in range(10)})
    judge = {f"i{k}": True for k in range(10)}  # right on the 6 has_failure items, wrong on the 4 others
    result = judge_agreement(majority, judge, bootstrap=200)
    assert result["ci95"] == pytest.approx(list(_wilson(6, 10)))
    assert result["ci95_has_failure"] == pytest.approx([_wilson(6, 6)[0], 1.0])
    assert result["ci95_no_failure"] == pytest.approx([0.0, _wilson(0, 4)[1]])
    assert result["ci95_has_failure"][0] < 1.0  # 6 of 6 is not [1, 1]
    assert result["ci95_no_failure"][1] > 0.0  # 0 of 4 is not [0, 0]
    assert result["interval"] == WILSON and result["n"] == 10


def test_leave_one_out_agreement_is_wilson_with_its_n():
    labels = {f"i{k}": {"a": True, "b": True, "c": True} for k in range(5)}
    loo = leave_one_out_agreement(_rows(labels), bootstrap=200)
    assert loo["a"]["agreement"] == 1.0 and loo["a"]["n"] == 5
    assert loo["a"]["ci95"] == pytest.approx([_wilson(5, 5)[0], 1.0])
    assert {k: loo["a"][k] for k in ("interval", "interval_name", "approximate")} == interval_fields(WILSON, 5)


def test_annotator_pairs_are_wilson():
    pairs = pairwise_agreement({f"i{k}": {"a": True, "b": k != 0} for k in range(8)}, bootstrap=100)
    assert pairs["a|b"]["ci95"] == pytest.approx(list(_wilson(7, 8)))
    assert pairs["a|b"]["interval"] == WILSON


def test_the_percentile_share_bootstrap_is_gone():
    import annotate.stats.bootstrap as bootstrap

    assert not hasattr(bootstrap, "bootstrap_share_interval")


# --------------------------------------------------------------------------- kappa


def test_kappa_bounds_carry_no_float_noise():
    generator = random.Random(1)
    checked = 0
    for n in range(4, 14):
        for _ in range(40):
            a = [generator.random() < 0.5 for _ in range(n)]
            b = [generator.random() < 0.6 for _ in range(n)]
            interval = kappa_interval(a, b, bootstrap=200, seed=0)
            if interval:
                checked += 1
                assert not any(0 < abs(v) < 1e-9 for v in interval), (a, b, interval)
    # The case that printed a lower bound of -7.8e-16 under the percentile bootstrap.
    a = [False] * 6 + [True]
    b = [True, False, False, False, True, False, True]
    interval = kappa_interval(a, b, bootstrap=200, seed=0)
    assert interval is None or not any(0 < abs(v) < 1e-9 for v in interval)
    assert checked > 100


def test_kappa_of_identical_labels_takes_the_wilson_bound_instead_of_one_one():
    """Every resample of two raters who agree on every item gives kappa 1: no bootstrap
    interval. The interval is then [1 - u / (1 - p_e), 1], u the upper Wilson bound of 0
    disagreements in 5: z^2 / (5 + z^2) = 0.43448, p_e = 0.4^2 + 0.6^2 = 0.52."""
    from annotate.stats.kappa import kappa_estimate

    human = [True, True, False, False, False]
    estimate = kappa_estimate(human, list(human), bootstrap=500, seed=0)
    assert estimate["cohen_kappa"] == 1.0
    z2 = 1.959963984540054**2
    assert estimate["ci95"] == pytest.approx([1 - (z2 / (5 + z2)) / 0.48, 1.0], abs=1e-12)
    assert estimate["ci95"][0] == pytest.approx(0.0948, abs=1e-4)
    assert estimate["not_estimable"] is None
    assert estimate["interval"] == PERFECT_AGREEMENT and estimate["approximate"] is False


def test_alpha_at_perfect_agreement_takes_the_wilson_bound_on_every_page_shape():
    # Five items, two annotators each, agreeing everywhere; D_e = 2 * 6 * 4 / (10 * 9).
    matrix = [[1, 1], [0, 0], [1, 1], [0, 0], [1, 1]]
    estimate = nominal_alpha_estimate(matrix, bootstrap=200)
    z2 = 1.959963984540054**2
    assert estimate["alpha_ci95"] == pytest.approx([1 - (z2 / (5 + z2)) / (48 / 90), 1.0], abs=1e-12)
    assert estimate["alpha_ci95_not_estimable"] is None
    assert estimate["alpha_interval"] == interval_fields(PERFECT_AGREEMENT, 5)
    labels = {f"i{k}": {"a": k % 2 == 0, "b": k % 2 == 0} for k in range(5)}
    report = agreement_report(_rows(labels), [], bootstrap=200)
    assert report["alpha"]["binary"] == 1.0
    assert report["alpha_ci95"]["binary"] == pytest.approx(estimate["alpha_ci95"], abs=1e-12)
    assert report["alpha_interval"]["binary"] == interval_fields(PERFECT_AGREEMENT, 5)


def test_judge_kappa_interval_is_bca_labelled_approximate_below_its_threshold():
    majority = HumanMajority(labels={f"i{k}": k % 2 == 0 for k in range(12)})
    judge = {f"i{k}": (k % 2 == 0) != (k in (1, 4)) for k in range(12)}
    result = judge_agreement(majority, judge, bootstrap=500)
    low, high = result["cohen_kappa_ci95"]
    assert -1.0 <= low < result["cohen_kappa"] < high <= 1.0
    assert result["cohen_kappa_interval"] == interval_fields(ITEM_BOOTSTRAP, 12)
    assert result["cohen_kappa_interval"]["approximate"] is True
    assert result["cohen_kappa_ci95_not_estimable"] is None


# --------------------------------------------------------------------------- alpha


def test_alpha_interval_is_never_zero_width_and_names_its_method():
    # Two items that disagree the same way: every resample gives alpha -0.5.
    estimate = nominal_alpha_estimate([[1, 2], [2, 1]], bootstrap=200)
    assert estimate["alpha_ci95"] is None
    assert estimate["alpha_ci95_not_estimable"].startswith("interval not estimable (n = 2)")
    assert estimate["alpha_interval"] == interval_fields(ITEM_BOOTSTRAP, 2)
    report = agreement_report(_rows({"x": {"a": True, "b": False}, "y": {"a": False, "b": True}}), [], bootstrap=200)
    assert report["alpha_ci95"]["binary"] is None
    assert report["alpha_interval"]["binary"] == interval_fields(ITEM_BOOTSTRAP, 2)


def test_alpha_interval_is_bca_and_holds_the_estimate():
    generator = np.random.default_rng(3)
    matrix = [[int(x), int(x) if generator.random() < 0.8 else 1 - int(x)] for x in generator.integers(0, 2, 40)]
    interval = nominal_alpha_interval(matrix, bootstrap=500, seed=0)
    estimate = nominal_alpha_estimate(matrix, bootstrap=500, seed=0)
    assert estimate["alpha_ci95"] == interval
    assert interval is not None and interval[0] < estimate["alpha"] < interval[1] <= 1.0
    # Approximate below 100 items: at n = 20 the bootstrap fell short near the boundary.
    assert estimate["alpha_interval"] == interval_fields(ITEM_BOOTSTRAP, 40)
    assert estimate["alpha_interval"]["approximate"] is True
    larger = [[int(x), int(x) if generator.random() < 0.8 else 1 - int(x)] for x in generator.integers(0, 2, 120)]
    assert nominal_alpha_estimate(larger, bootstrap=200, seed=0)["alpha_interval"]["approximate"] is False


# --------------------------------------------------------------------------- AUC


def test_a_constant_metric_has_no_auc_interval_and_says_why():
    majority = HumanMajority(labels={f"i{k}": k % 2 == 0 for k in range(10)})
    report = metric_agreement_report(
        majority=majority, signals={"length_ratio": {f"i{k}": 1.0 for k in range(10)}}, bootstrap=200
    )
    (signal,) = report["signals"]
    assert signal["auc"] == 0.5
    assert signal["auc_ci95"] is None
    assert signal["auc_ci95_not_estimable"].startswith("interval not estimable (n = 10)")
    assert "one value" in signal["auc_ci95_not_estimable"]
    assert signal["interval"] == ITEM_BOOTSTRAP and signal["approximate"] is True


def test_auc_interval_of_a_separating_metric_is_bca_inside_zero_one():
    from annotate.stats.metric_agreement import auc_interval

    generator = np.random.default_rng(0)
    labels = (np.arange(40) % 2).astype(bool)
    scores = generator.normal(size=40) + 1.0 * labels
    interval = auc_interval(scores.tolist(), labels.tolist(), bootstrap=500, seed=0)
    assert interval is not None and 0.0 <= interval[0] < interval[1] <= 1.0
    assert auc_interval([1.0] * 6, [True, False] * 3) is None


# --------------------------------------------------------------------------- the judges chart


def test_judges_chart_draws_each_annotators_leave_one_out_point_with_n_and_wilson_interval():
    import json
    import re

    from annotate.reports.charts import judge_agreement_bars

    # p2, p3 and p4 agree with the others on 4 of 4 items each (one point, three names); p1 on 2 of 4.
    labels = {
        "i0": {"p1": True, "p2": True, "p3": True, "p4": True},
        "i1": {"p1": False, "p2": False, "p3": False, "p4": False},
        "i2": {"p1": True, "p2": False, "p3": False, "p4": False},
        "i3": {"p1": False, "p2": True, "p3": True, "p4": True},
    }
    rows = _rows(labels)
    judgments = [JudgmentRow(item, "judge-a", True) for item in labels]
    report = agreement_report(rows, judgments, bootstrap=0)
    html = judge_agreement_bars(report)
    assert "humans (leave-one-out)" in html
    assert not re.search(r"humans \(leave-one-out\) \d+\.\d–\d+\.\d", html)  # no min–max band
    script = re.search(r'<script type="application/json"[^>]*>(.*?)</script>', html, re.S)
    assert script is not None
    figure = json.loads(script.group(1))["figure"]
    (humans,) = [t for t in figure["data"] if t.get("name") == "humans (leave-one-out)"]
    loo = report["leave_one_out"]
    # Every annotator is named on the chart, the three at one point on that point's label.
    names = " ".join(str(x) for x in humans["x"])
    assert all(pid in names for pid in ("p1", "p2", "p3", "p4"))
    assert len(humans["x"]) == len({(v["agreement"], v["n"]) for v in loo.values()})
    for x, y, up, down in zip(humans["x"], humans["y"], humans["error_y"]["array"], humans["error_y"]["arrayminus"]):
        pid = next(p for p in ("p1", "p2", "p3", "p4") if p in x)
        low, high = loo[pid]["ci95"]
        assert y == pytest.approx(100 * loo[pid]["agreement"])
        assert (y - down, y + up) == (pytest.approx(100 * low), pytest.approx(100 * high))
    assert all("n=" in text for text in humans["text"])
