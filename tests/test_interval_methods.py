"""The interval methods and tests in core/intervals.py on small cases worked by hand: Wilson
bounds, Newcombe's paired interval (method 10), the exact McNemar p-value, Holm's
adjustment, BCa and the registry every published interval names its method from. No
database."""

from __future__ import annotations

import math

import numpy as np
import pytest

from core.intervals import (
    ITEM_BOOTSTRAP,
    METHODS,
    NEWCOMBE_PAIRED,
    WILSON,
    bca_interval,
    holm_adjust,
    interval_fields,
    mcnemar_exact,
    newcombe_paired_interval,
    snap_interval,
    wilson_interval,
)


def test_wilson_gives_20_of_20_a_lower_bound_of_0_839_not_a_point():
    interval = wilson_interval(20, 20)
    assert interval is not None
    low, high = interval
    assert round(low, 3) == 0.839 and high == 1.0


def test_wilson_bounds_of_3_of_5_match_the_closed_form():
    z = 1.959963984540054
    p, n = 0.6, 5
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    interval = wilson_interval(3, 5)
    assert interval == pytest.approx((centre - half, centre + half))
    assert interval is not None and [round(v, 4) for v in interval] == [0.2307, 0.8824]


def test_mcnemar_on_three_of_five_discordant_all_one_way_is_0_25():
    assert mcnemar_exact(3, 0) == 0.25
    assert mcnemar_exact(0, 3) == 0.25


def test_mcnemar_exact_values_and_edges():
    assert mcnemar_exact(0, 0) == 1.0
    assert mcnemar_exact(1, 1) == 1.0  # capped at 1
    # 10 discordant, 9 to 1: 2 * (1 + 10) / 1024
    assert mcnemar_exact(9, 1) == pytest.approx(22 / 1024)
    assert mcnemar_exact(6, 0) == pytest.approx(2 / 64)
    with pytest.raises(ValueError):
        mcnemar_exact(-1, 2)


def _newcombe_by_hand(a: int, b: int, c: int, d: int) -> tuple[float, float]:
    """Newcombe (1998) method 10 written out from the paper's formulas."""
    n = a + b + c + d
    p1, p2 = (a + b) / n, (a + c) / n
    first, second = wilson_interval(a + b, n), wilson_interval(a + c, n)
    assert first is not None and second is not None
    (l1, u1), (l2, u2) = first, second
    product = (a + b) * (c + d) * (a + c) * (b + d)
    cross = a * d - b * c
    corrected = cross - n / 2 if cross > n / 2 else (cross if cross < 0 else 0.0)
    phi = 0.0 if product == 0 else corrected / math.sqrt(product)
    theta = p1 - p2
    lower = theta - math.sqrt((p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2)
    upper = theta + math.sqrt((p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2)
    return lower, upper


@pytest.mark.parametrize("table", [(8, 5, 4, 9), (12, 6, 1, 5), (1, 1, 7, 12), (3, 3, 0, 4), (20, 0, 0, 0)])
def test_newcombe_paired_interval_follows_method_10(table):
    assert newcombe_paired_interval(*table) == pytest.approx(list(_newcombe_by_hand(*table)))


def test_newcombe_never_gives_a_zero_width_interval():
    identical = newcombe_paired_interval(5, 0, 0, 0)  # both models pass all 5
    assert identical is not None and identical[0] < 0 < identical[1]
    opposite = newcombe_paired_interval(0, 5, 0, 0)  # A passes all, B fails all
    assert opposite is not None and opposite[1] == 1.0 and opposite[0] < 1.0
    assert round(opposite[0], 3) == 0.386
    assert newcombe_paired_interval(0, 0, 0, 0) is None


def test_holm_adjusts_step_down_and_keeps_order():
    assert holm_adjust([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm_adjust([0.5, 0.001]) == pytest.approx([0.5, 0.002])
    assert holm_adjust([0.9, 0.3]) == pytest.approx([0.9, 0.6])
    assert holm_adjust([]) == []


def test_bca_is_none_when_every_resample_is_the_same():
    assert bca_interval(np.full(1000, 0.5), 0.5, np.full(10, 0.5)) is None
    assert bca_interval(np.array([]), 0.5, None) is None


def test_bca_without_bias_or_acceleration_is_the_percentile_interval():
    values = np.linspace(-1, 1, 1001)
    interval = bca_interval(values, 0.0, None)
    assert interval is not None
    low, high = interval
    assert low == pytest.approx(np.quantile(values, 0.025), abs=0.003)
    assert high == pytest.approx(np.quantile(values, 0.975), abs=0.003)


def test_bca_moves_towards_the_skew_the_jackknife_shows():
    rng = np.random.default_rng(0)
    data = rng.exponential(size=30)
    boots = np.array([rng.choice(data, size=30).mean() for _ in range(2000)])
    jack = np.array([np.delete(data, i).mean() for i in range(30)])
    percentile = np.quantile(boots, [0.025, 0.975])
    bca = bca_interval(boots, float(data.mean()), jack)
    assert bca is not None and bca[1] > percentile[1]  # a right-skewed mean: BCa reaches further up


def test_snap_removes_float_noise_at_the_range_and_the_point():
    assert snap_interval([-2.78e-16, 0.4], low=-1.0, high=1.0, point=0.0) == [0.0, 0.4]
    assert snap_interval([0.2, 1.0000000000001], low=0.0, high=1.0) == [0.2, 1.0]


def test_every_published_method_names_itself_and_says_when_it_is_approximate():
    for key, method in METHODS.items():
        assert method.key == key and method.name and method.reference
    assert interval_fields(WILSON, 5)["approximate"] is False
    assert interval_fields(NEWCOMBE_PAIRED, 5)["interval_name"].startswith("Newcombe")
    below = METHODS[ITEM_BOOTSTRAP].approximate_below
    assert interval_fields(ITEM_BOOTSTRAP, below - 1)["approximate"] is True
    assert interval_fields(ITEM_BOOTSTRAP, below)["approximate"] is False


@pytest.mark.django_db
def test_the_api_lists_every_interval_method_with_its_name_and_approximate_threshold(researcher_client, client):
    response = researcher_client.get("/api/interval-methods/")
    assert response.status_code == 200
    rows = {row["key"]: row for row in response.json()}
    assert set(rows) == set(METHODS)
    assert rows[NEWCOMBE_PAIRED]["reference"].startswith("Newcombe 1998")
    assert rows[ITEM_BOOTSTRAP]["approximate_below"] == METHODS[ITEM_BOOTSTRAP].approximate_below
    assert rows[WILSON]["confidence"] == 0.95
    assert client.get("/api/interval-methods/").status_code in (401, 403)
