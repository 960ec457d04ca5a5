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
