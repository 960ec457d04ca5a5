"""The leaderboard's calibrated How2Score names the studies whose human labels it rests on:
only those that gave it at least one human-labelled item, never every study whose items
came from judged generations."""

from __future__ import annotations

import pytest
from django.urls import reverse

from annotate.participation.reservations import assignment_next
from annotate.participation.submissions import annotation_submit
from annotate.reports.selectors import calibration_from_studies
from annotate.testing import (
    NO_FAILURE,
    ONE_FAILURE,
    annotate_all,
    annotator_start,
    judged_generation_study,
    label_as_the_judge,
)
from judging.models import Judgment

pytestmark = pytest.mark.django_db


def test_only_studies_with_human_labelled_items_are_counted(demo, researcher_client):
    from judging.leaderboard_selectors import leaderboard

    labelled = judged_generation_study(name="Labelled", annotators_per_item=2)
    label_as_the_judge(labelled, ("h1", "h2"))
    # From the same judged generations, but nobody has annotated it.
    judged_generation_study(name="Unlabelled", annotators_per_item=2)
    # Annotated, but one annotation per item is no human majority: no labelled item either.
    single = judged_generation_study(name="Single labels", annotators_per_item=1)
    annotate_all(annotator_start(single, "s1"), True)

    result = calibration_from_studies("How2Judge", [True, False, True])
    assert result is not None
    assert result["n_labelled"] == 10 and result["source"] == "1 study"
    claude = {r["model"]: r for r in leaderboard("How2Judge")}["claude-opus-4.5"]
    assert claude["calibrated"]["source"] == "1 study"
    html = researcher_client.get(reverse("leaderboard") + "?judge=How2Judge").content.decode()
    assert "over 10 human-labelled items (1 study)" in html


def test_two_labelled_studies_are_two(demo):
    for name, pids in (("First", ("a1", "a2")), ("Second", ("b1", "b2"))):
        label_as_the_judge(judged_generation_study(name=name, annotators_per_item=2), pids)
    judged_generation_study(name="Unlabelled", annotators_per_item=2)
    result = calibration_from_studies("How2Judge", [True, False])
    assert result is not None and result["n_labelled"] == 20 and result["source"] == "2 studies"


def test_a_calibrated_score_on_few_successes_is_never_narrower_than_its_raw_interval(demo, researcher_client):
    """Three generations all judged successes, a judge that agreed with every human label:
    the corrected score's interval used to be [1, 1] (resampling three equal labels cannot
    vary), narrower than the raw score's Wilson interval over the same three."""
    from annotate.stats.calibration import calibrated_score
    from core.intervals import wilson_interval

    judge = [False] * 4 + [True] * 4
    result = calibrated_score(judge, list(judge), [False, False, False], bootstrap=2000, seed=0)
    low, high = result["ci95"]
    raw = wilson_interval(3, 3)
    assert raw is not None
    raw_low, raw_high = raw
    assert result["corrected_score"] == 1.0 and high == pytest.approx(1.0, abs=1e-6)
    assert low < raw_low + 0.05 and low < 0.8, (low, raw_low)

    label_as_the_judge(judged_generation_study(name="Labelled", annotators_per_item=2), ("h1", "h2"))
    api = researcher_client.get("/api/leaderboard?judge=How2Judge").json()
    page = {r["model"]: r for r in leaderboard_rows()}
    for row in api["rows"]:
        calibrated = row["calibrated"]
        assert calibrated is not None and calibrated == page[row["model"]]["calibrated_json"]
        low, high = calibrated["ci95"]
        assert high - low > 0  # no degenerate interval on a handful of generations


def leaderboard_rows():
    import json

    from judging.leaderboard_selectors import leaderboard

    return [{**r, "calibrated_json": json.loads(json.dumps(r["calibrated"]))} for r in leaderboard("How2Judge")]


def test_the_leaderboard_api_and_the_agreement_api_give_calibration_on_one_scale(demo, researcher_client):
    """The same judge and human labels through both APIs: every score and interval a
    fraction (0-1) with its _percent sibling (0-100); the leaderboard API gave
    calibrated.corrected_score on 0-100 while the agreement API gave 0-1. Both show
    Rogan-Gladen and PPI++, each with n_labelled, n_unlabelled and source studies."""
    study = judged_generation_study(name="Labelled", annotators_per_item=2)
    label_as_the_judge(study, ("h1", "h2"))
    board = researcher_client.get("/api/leaderboard?judge=How2Judge").json()
    report = researcher_client.get(f"/api/studies/{study.slug}/agreement").json()
    from_report = report["calibration"]["How2Judge"]
    rows = [row for row in board["rows"] if row["calibrated"]]
    assert rows
    for calibrated in [from_report] + [row["calibrated"] for row in rows]:
        for field in ("corrected_score", "observed_score", "ppi_score"):
            value = calibrated[field]
            assert value is None or 0.0 <= value <= 1.0, (field, value)
            assert calibrated[f"{field}_percent"] == (None if value is None else pytest.approx(100 * value))
        for field in ("ci95", "ppi_ci95"):
            interval = calibrated[field]
            assert interval is None or (0.0 <= interval[0] < interval[1] <= 1.0), (field, interval)
            assert calibrated[f"{field}_percent"] == (
                None if interval is None else pytest.approx([100 * v for v in interval])
            )
        assert calibrated["interval"] == "rogan-gladen" and calibrated["ppi"]["interval"] == "ppi++ stratified"
        for block in (calibrated, calibrated["ppi"]):
            assert {"n_labelled", "n_unlabelled", "source_studies", "interval_name", "approximate"} <= set(block)
    # The same labelled items give the same error rates in both.
    assert (rows[0]["calibrated"]["tpr"], rows[0]["calibrated"]["tnr"]) == (from_report["tpr"], from_report["tnr"])
    assert rows[0]["calibrated"]["n_labelled"] == from_report["n_labelled"] == 10
    assert rows[0]["calibrated"]["source_studies"] == from_report["source_studies"] == [study.slug]
    # PPI++ on the leaderboard takes only the row's own labelled generations.
    assert sum(row["calibrated"]["ppi"]["n_labelled"] for row in rows) == 10


def test_both_estimators_are_on_the_leaderboard_and_the_agreement_page(demo, researcher_client):
    study = judged_generation_study(name="Labelled", annotators_per_item=2)
    label_as_the_judge(study, ("h1", "h2"))
    for url in (reverse("leaderboard") + "?judge=How2Judge", reverse("annotate:report_agreement", args=[study.slug])):
        html = researcher_client.get(url).content.decode()
        assert 'data-estimator="rogan-gladen"' in html and 'data-estimator="ppi++ stratified"' in html, url
        assert "100.0 [100.0–100.0]" not in html and "0.0 [0.0–0.0]" not in html
        assert "bootstrap over items" not in html.split('class="calibrated')[1][:3000]
