"""Issue 27's "done" check: every published figure (leaderboard and its pairwise list, compare,
cross-judge, agreement with its calibration, the leaderboard's calibrated column, rounds,
metric agreement), read through the API on new planted data, equals an independent
recomputation from the raw data (bench/recompute_figures.py), and no interval has zero width."""

from __future__ import annotations

import pytest

from bench.recompute_figures import JUDGES, Recomputation, check_cross_judge, plant, recompute

pytestmark = pytest.mark.django_db


def test_every_published_figure_equals_its_recomputation_and_no_interval_is_zero_width(researcher_client, tmp_path):
    planted = plant(seed=7, n_procedures=16, workdir=tmp_path)
    result = recompute(researcher_client, planted)
    assert result.mismatches == [], result.summary()
    assert result.zero_width == [], result.summary()
    assert result.checked >= 5000, result.summary()
    # Every kind of figure was read: the checks cannot pass on an empty answer.
    urls = set(result.answers)
    assert any(url.startswith("/api/leaderboard?") for url in urls)
    assert any(url.startswith("/api/leaderboard/compare?") for url in urls)
    assert "/api/leaderboard/judges/" in urls
    slug = planted.study_slug
    for path in ("agreement", "rounds/", "metric-agreement"):
        assert f"/api/studies/{slug}/{path}" in urls
    # The planted world has what the issue names: a surplus annotation, items with one
    # annotation, an incomplete model, and a tie.
    assert any(surplus for *_, surplus in planted.annotations)
    agreement = result.answers[f"/api/studies/{slug}/agreement"]
    assert agreement["n_surplus"] >= 1 and agreement["human_majority"]["n_too_few"] >= 1
    cross = result.answers["/api/leaderboard/judges/"]
    assert cross["incomplete_models"] and any(r["tied"] for r in cross["ranks"]["judge-a"].values())


def test_the_recomputation_catches_a_figure_that_does_not_follow_from_the_data(researcher_client, tmp_path):
    """The checker is not vacuous: a planted label that the database does not hold (one
    judge-a verdict flipped after import) shows as mismatches in the cross-judge figures."""
    planted = plant(seed=3, n_procedures=12, workdir=tmp_path)
    key = ("m-mid", planted.procedures[0])
    planted.labels[JUDGES[0]][key] = not planted.labels[JUDGES[0]][key]

    result = Recomputation()
    check_cross_judge(result, researcher_client, planted)
    assert any("estimates[judge-a][m-mid].how2score" in where for where, *_ in result.mismatches)
