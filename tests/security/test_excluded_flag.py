"""The annotators dashboard (and the study page's annotator table, and the annotators CSV)
marks an annotator excluded from the participation, never from the rows of the check and
qualification items they answered (those rows are always set aside from the statistics)."""

from __future__ import annotations

import csv
import io

import pytest
from django.urls import reverse

from annotate.kinds.base import ROLE_MAIN
from annotate.models import Annotation, Participation, ParticipationState
from annotate.participation.reservations import assignment_next
from annotate.participation.submissions import annotation_submit
from annotate.reports.selectors import annotator_table, study_agreement_report
from annotate.studies.selectors import study_annotators
from annotate.testing import NO_FAILURE, ONE_FAILURE, annotator_start, read_everything, study_make

pytestmark = pytest.mark.django_db

# PIDs shaped like Prolific's (24 hexadecimal characters), accepted by every study.
GOOD, BAD, GOLD0 = "a00000000000000000000001", "b00000000000000000000002", "c00000000000000000000003"


def _study():
    """4 main items, 2 gold items (qualification: both needed), 2 attention checks every
    other item, at most 0 misses."""
    return study_make(
        n_items=4,
        n_gold=2,
        n_attention=2,
        annotators_per_item=3,
        attention_check_rate=0.5,
        attention_max_failures=0,
        qualification_pass=2,
        gold_answers=[False, True],
        attention_answers=[True, True],
    )


def _walk(p: Participation, *, right_on_checks: bool, right_on_gold: bool = True) -> None:
    """Answer every item given: main items has_failure, gold and check items right or wrong."""
    while True:
        a = assignment_next(participation=p)
        if a is None:
            return
        read_everything(p, a)
        label = True
        if a.item.expected is not None and a.role != ROLE_MAIN:
            right = right_on_gold if a.role == "qualification" else right_on_checks
            label = a.item.expected if right else not a.item.expected
        annotation_submit(
            participation=p, public_id=a.public_id, answer=ONE_FAILURE if label else NO_FAILURE, submission_id="t"
        )


def _rows_by_pid(study) -> dict[str, dict]:
    return {r["pid"]: r for r in study_annotators(study)}


def test_an_annotator_who_passed_qualification_and_checks_is_not_excluded(researcher_client):
    study = _study()
    p = annotator_start(study, GOOD)
    _walk(p, right_on_checks=True)
    p.refresh_from_db()
    # The precondition the bug needs: they answered gold and check items, whose rows are set aside.
    assert Annotation.objects.filter(participation=p, source="qualification").count() == 2
    assert Annotation.objects.filter(participation=p, source="attention").exists()
    assert Annotation.objects.filter(participation=p, excluded=True).exclude(source=ROLE_MAIN).exists()
    row = _rows_by_pid(study)[GOOD]
    assert (row["excluded"], row["exclusion_reason"]) == (False, "")
    table = annotator_table(study, study_agreement_report(study, bootstrap=0))
    assert [(r["annotator"], r["excluded"]) for r in table] == [(GOOD, False)]
    html = researcher_client.get(reverse("annotate:report_annotators", args=[study.slug])).content.decode()
    assert 'class="badge bad"' not in html.split('id="annotator-table"')[1]
    csv_rows = list(
        csv.DictReader(
            io.StringIO(
                researcher_client.get(
                    reverse("annotate:report_annotators", args=[study.slug]) + "?format=csv"
                ).content.decode()
            )
        )
    )
    assert [(r["annotator"], r["excluded"], r["exclusion_reason"]) for r in csv_rows] == [(GOOD, "false", "")]
    detail = researcher_client.get(reverse("annotate:study_detail", args=[study.slug])).content.decode()
    annotators_section = detail.split('id="annotators"')[1].split("</section>")[0]
    assert "<td>no</td>" in annotators_section and "yes (" not in annotators_section


def test_an_annotator_screened_out_by_the_attention_checks_is_excluded_with_the_participations_reason():
    study = _study()
    p = annotator_start(study, BAD)
    _walk(p, right_on_checks=False)
    p.refresh_from_db()
    assert p.state == ParticipationState.SCREENED_OUT
    row = _rows_by_pid(study)[BAD]
    assert row["excluded"] is True and row["exclusion_reason"] == p.exclusion_reason == "failed_attention_checks"


def test_an_annotator_screened_out_by_the_qualification_is_excluded_with_the_participations_reason():
    study = _study()
    p = annotator_start(study, GOLD0)
    _walk(p, right_on_checks=True, right_on_gold=False)
    p.refresh_from_db()
    assert p.state == ParticipationState.SCREENED_OUT and p.state_reason.startswith("qualification:")
    row = _rows_by_pid(study)[GOLD0]
    assert row["excluded"] is True and row["exclusion_reason"] == p.state_reason


def test_excluded_and_kept_annotators_side_by_side():
    study = _study()
    _walk(annotator_start(study, GOOD), right_on_checks=True)
    _walk(annotator_start(study, BAD), right_on_checks=False)
    _walk(annotator_start(study, GOLD0), right_on_checks=True, right_on_gold=False)
    rows = _rows_by_pid(study)
    assert {pid: r["excluded"] for pid, r in rows.items()} == {GOOD: False, BAD: True, GOLD0: True}
