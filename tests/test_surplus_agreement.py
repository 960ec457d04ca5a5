"""Surplus annotations (a late submit into an item that already had its k counted
annotations) count nowhere in the agreement statistics: not in alpha, the human majority, its
ties, the report's counts or the counted annotations of the progress, on the pages, the API
and the export's report alike, and the pages say how many were left out.

The walk of study ``walk-lease``: k = 1, a lease of 1 minute; A opens L-0 and lets the lease
run out, B takes L-0 and L-1 and submits both, then A submits L-0 late (surplus)."""

from __future__ import annotations

import io
import json
import re
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from annotate.kinds.base import ItemSpec
from annotate.models import Assignment, Study
from annotate.participation.reservations import assignment_next
from annotate.participation.submissions import annotation_submit
from annotate.reports.selectors import study_agreement_report, study_human_majority
from annotate.stats.agreement import agreement_report
from annotate.stats.records import parse_annotation_lines, parse_annotation_record
from annotate.studies.exports import annotation_export
from annotate.studies.round_selectors import study_round_summaries
from annotate.studies.selectors import study_annotators, study_progress_get
from annotate.studies.services import study_create
from annotate.studies.settings import StudySettings
from annotate.testing import NO_FAILURE, ONE_FAILURE, annotator_start, read_everything

pytestmark = pytest.mark.django_db


def _text(html: bytes) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html.decode()))


def _walk_lease() -> Study:
    """The product walk: B's two labels count, A's late label of L-0 is surplus."""
    items = [
        ItemSpec(
            item_id=f"L-{n}",
            topic="Food & Dining",
            goal=f"Goal {n}: make a pot of tea.",
            reference_steps=[f"Reference step {i}." for i in range(1, 4)],
            candidate_steps=[f"Candidate step {i}." for i in range(1, 4)],
        )
        for n in range(2)
    ]
    study = study_create(
        name="walk-lease",
        items=items,
        settings=StudySettings(
            annotators_per_item=1,
            lease_minutes=1,
            training_enabled=False,
            qualification_enabled=False,
            min_seconds=0,
            allow_other_pids=True,
        ),
    )
    a = annotator_start(study, "annotator-a")
    held = assignment_next(participation=a)
    assert held is not None and held.item.item_id == "L-0"
    read_everything(a, held)  # A opens its steps: the full lease of 1 minute
    # 75 seconds later the lease has run out.
    Assignment.objects.filter(pk=held.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=15))
    b = annotator_start(study, "annotator-b")
    for expected in ("L-0", "L-1"):
        mine = assignment_next(participation=b)
        assert mine is not None and mine.item.item_id == expected
        read_everything(b, mine)
        annotation_submit(participation=b, public_id=mine.public_id, answer=ONE_FAILURE, submission_id="b")
    late = annotation_submit(participation=a, public_id=held.public_id, answer=NO_FAILURE, submission_id="a")
    assert late.created and late.annotation.surplus and late.annotation.late
    return study


def test_the_agreement_report_leaves_a_surplus_annotation_out(researcher_client):
    study = _walk_lease()
    report = researcher_client.get(f"/api/studies/{study.slug}/agreement?bootstrap=0").json()
    assert (report["n_annotations"], report["n_excluded"], report["n_surplus"]) == (2, 0, 1)
    assert (report["n_items"], report["n_annotators"]) == (2, 1)
    # One counted label per item: nothing to pair, so alpha is undefined (not 0.0 on one item).
    assert report["alpha"]["binary"] is None
    assert report["alpha_details"]["binary"]["n_units"] == 0
    assert report["alpha_undefined"]["binary"] is not None
    majority = report["human_majority"]
    assert (majority["n_items"], majority["n_ties"], majority["n_too_few"], majority["n_with_majority"]) == (2, 0, 2, 0)
    assert report["annotator_pairs"] == {}
    assert "annotator-a" not in report["leave_one_out"]
    assert study_human_majority(study).summary() == majority


def test_the_study_page_rounds_row_and_the_rounds_api_leave_it_out(researcher_client):
    study = _walk_lease()
    (row,) = study_round_summaries(study)
    # Issue 27: n_annotations counts the counted annotations, as the agreement page does (it
    # was 3 here, the surplus one included, against the agreement page's 2).
    assert (row["n_annotations"], row["n_excluded"], row["n_surplus"]) == (2, 0, 1)
    assert row["alpha"] is None and row["alpha_n"] == 0 and row["alpha_ci95"] is None
    page = _text(researcher_client.get(reverse("annotate:study_detail", args=[study.slug])).content)
    assert "0.000 [0.000, 0.000]" not in page
    assert "1 surplus annotation left out" in page
    (api_row,) = researcher_client.get(f"/api/studies/{study.slug}/rounds/").json()
    assert (api_row["n_annotations"], api_row["n_excluded"], api_row["n_surplus"]) == (2, 0, 1)
    assert api_row["alpha"] is None and api_row["alpha_n"] == 0


def test_the_rounds_api_and_the_agreement_page_count_annotations_alike(researcher_client):
    """Issue 27: n_annotations was 123 in the rounds API and 122 on the agreement page (the
    surplus annotation counted in one). Both read one count: the counted annotations, with the
    surplus and the excluded ones beside it."""
    study = _walk_lease()
    (api_row,) = researcher_client.get(f"/api/studies/{study.slug}/rounds/").json()
    api = researcher_client.get(f"/api/studies/{study.slug}/agreement?bootstrap=0").json()
    response = researcher_client.get(reverse("annotate:report_agreement", args=[study.slug]))
    page_report = response.context["report"]
    (page_round,) = response.context["rounds"]
    for key in ("n_annotations", "n_excluded", "n_surplus"):
        assert api_row[key] == api[key] == page_report[key] == page_round["report"][key], key
    assert api_row["n_annotations"] == 2 and api_row["n_surplus"] == 1
    # The round's alpha names its interval method, as the agreement report's does.
    assert api_row["alpha_interval"] == api["alpha_interval"]["binary"]
    assert api_row["alpha_interval"]["interval"] == "bootstrap over items"
    study_page = researcher_client.get(reverse("annotate:study_detail", args=[study.slug])).context["rounds"][0]
    assert (study_page["n_annotations"], study_page["n_surplus"]) == (2, 1)


def test_counted_annotations_leave_surplus_out_on_the_page_and_the_api(researcher_client):
    study = _walk_lease()
    progress = study_progress_get(study)
    assert (progress["annotations_main"], progress["annotations_surplus"]) == (3, 1)
    assert progress["n_counted_annotations"] == 2
    api = researcher_client.get(f"/api/studies/{study.slug}/").json()["progress"]
    assert (api["annotations_main"], api["annotations_surplus"], api["n_counted_annotations"]) == (3, 1, 2)
    report = researcher_client.get(f"/api/studies/{study.slug}/report/").json()
    assert report["median_active_seconds"]["n"] == 2
    counted = {row["pid"]: (row["n_main"], row["n_counted"]) for row in study_annotators(study)}
    assert counted == {"annotator-a": (1, 0), "annotator-b": (2, 2)}


def test_the_agreement_page_says_the_surplus_annotation_was_left_out(researcher_client):
    study = _walk_lease()
    page = _text(researcher_client.get(reverse("annotate:report_agreement", args=[study.slug])).content)
    assert "1 surplus annotation left out" in page
    assert "1 item is tied" not in page and "0 items are tied" in page
    assert "2 annotations by 1 annotator on 2 items" in page


def test_the_export_and_its_report_agree_with_the_study(tmp_path):
    study = _walk_lease()
    path = tmp_path / "walk.jsonl"
    annotation_export(study=study, output=path)
    lines = path.read_text().splitlines()
    assert sorted(json.loads(line)["surplus"] for line in lines) == [False, False, True]
    from_file = agreement_report(parse_annotation_lines(lines), [], bootstrap=0)
    from_study = study_agreement_report(study, bootstrap=0)
    for key in ("n_annotations", "n_excluded", "n_surplus", "n_items", "alpha", "human_majority"):
        assert from_file[key] == from_study[key], key
    out = io.StringIO()
    call_command("agreement_report", "--annotations", str(path), "--bootstrap", "0", stdout=out)
    assert json.loads(out.getvalue())["n_surplus"] == 1


def test_a_surplus_record_is_left_out_and_counted_apart_from_exclusions():
    def record(annotator: str, **extra) -> dict:
        return {"item_id": "x", "annotator": annotator, "has_failure": True, "failures": [], **extra}

    rows = [
        parse_annotation_record(record("a")),
        parse_annotation_record(record("b", has_failure=False, surplus=True)),
        parse_annotation_record(record("c", excluded=True, surplus=True)),  # excluded: counted there once
        parse_annotation_record(record("d", excluded=True)),
    ]
    report = agreement_report(rows, [], bootstrap=0)
    assert (report["n_annotations"], report["n_excluded"], report["n_surplus"]) == (1, 2, 1)
    with pytest.raises(ValueError):
        parse_annotation_record(record("e", surplus="yes"))
