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
    from judging.selectors import leaderboard

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
    raw_low, raw_high = wilson_interval(3, 3)
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

    from judging.selectors import leaderboard

    return [{**r, "calibrated_json": json.loads(json.dumps(r["calibrated"]))} for r in leaderboard("How2Judge")]
