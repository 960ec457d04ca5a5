"""Annotators can flag an item as broken and say they are unsure (issue 31, part 5), and
switching "critical failures identified" back to "no critical failures" is never a trap."""

from __future__ import annotations

import pytest

from annotate.models import Annotation
from annotate.participation.reservations import assignment_next
from annotate.participation.submissions import annotation_submit
from annotate.testing import annotator_start, read_everything, study_make

pytestmark = pytest.mark.django_db

EMPTY_FAILURE = {"description": "", "L1_steps": [], "L2_steps": []}


@pytest.fixture
def ready():
    study = study_make(n_items=3)
    p = annotator_start(study, "pid-flags")
    a = assignment_next(participation=p)
    read_everything(p, a)
    return study, p, a


def test_switching_to_no_failures_drops_the_empty_failure_the_page_added(ready):
    study, p, a = ready
    answer = {"has_failure": False, "failures": [EMPTY_FAILURE], "comments": ""}
    result = annotation_submit(participation=p, public_id=a.public_id, answer=answer)
    assert result.created and result.annotation.has_failure is False
    assert result.annotation.failures == [] and result.annotation.answer["failures"] == []


def test_switching_to_no_failures_with_a_described_failure_is_still_refused(ready):
    from annotate.errors import SubmissionRejected

    study, p, a = ready
    answer = {"has_failure": False, "failures": [EMPTY_FAILURE, {"description": "typed", "L1_steps": [], "L2_steps": []}]}
    with pytest.raises(SubmissionRejected) as info:
        annotation_submit(participation=p, public_id=a.public_id, answer=answer)
    assert "failures" in {e.field for e in info.value.errors}
    assert not Annotation.objects.exists()


# --------------------------------------------------------------------------- storing a flag

BROKEN = {"flag": "broken", "reason": "unreadable", "note": "L2 is one garbled line."}


def _errors(p, a, answer):
    from annotate.errors import SubmissionRejected

    with pytest.raises(SubmissionRejected) as info:
        annotation_submit(participation=p, public_id=a.public_id, answer=answer)
    assert not Annotation.objects.exists()
    return {e.field: e.message for e in info.value.errors}


def test_a_broken_flag_submits_without_the_kinds_questions_and_is_stored(ready):
    study, p, a = ready
    result = annotation_submit(participation=p, public_id=a.public_id, answer={"flag": BROKEN, "comments": "odd"})
    ann = result.annotation
    assert result.created and ann.flag == "broken" and ann.broken
    assert ann.flag_reason == "unreadable" and ann.flag_note == "L2 is one garbled line."
    assert ann.has_failure is None and ann.failures == [] and ann.correct is None
    assert ann.comments == "odd" and "flag" not in ann.answer and ann.label == "flagged broken"


def test_a_broken_flag_keeps_what_was_answered_as_a_draft_would(ready):
    study, p, a = ready
    answer = {"flag": BROKEN, "has_failure": True, "failures": [{"description": "half", "L1_steps": [9]}]}
    ann = annotation_submit(participation=p, public_id=a.public_id, answer=answer).annotation
    assert ann.answer["has_failure"] is True and ann.answer["failures"][0]["description"] == "half"
    assert ann.has_failure is None and ann.failures == []  # the label is no label


def test_a_broken_flag_still_waits_for_the_minimum_time_and_the_steps():
    study = study_make(n_items=1, min_seconds=90)
    p = annotator_start(study, "pid-early-flag")
    a = assignment_next(participation=p)
    errors = _errors(p, a, {"flag": BROKEN})
    assert {"time", "steps", "goal"} <= set(errors)


def test_an_unsure_flag_needs_the_answer_and_keeps_its_note(ready):
    study, p, a = ready
    errors = _errors(p, a, {"flag": {"flag": "unsure"}})
    assert "has_failure" in errors
    answer = {"has_failure": False, "failures": [], "flag": {"flag": "unsure", "note": "  not my field  "}}
    ann = annotation_submit(participation=p, public_id=a.public_id, answer=answer).annotation
    assert ann.flag == "unsure" and ann.flag_reason == "" and ann.flag_note == "not my field"
    assert ann.has_failure is False and ann.label == "no_failure"


def test_a_null_flag_is_no_flag(ready):
    study, p, a = ready
    ann = annotation_submit(
        participation=p, public_id=a.public_id, answer={"has_failure": False, "failures": [], "flag": None}
    ).annotation
    assert ann.flag == "" and ann.flag_reason == "" and ann.flag_note == ""


@pytest.mark.parametrize(
    "flag, field",
    [
        ({"flag": "broken"}, "flag.reason"),
        ({"flag": "broken", "reason": "because"}, "flag.reason"),
        ({"flag": "broken", "reason": "other"}, "flag.note"),
        ({"flag": "broken", "reason": "other", "note": "x" * 501}, "flag.note"),
        ({"flag": "broken", "reason": "unreadable", "note": 5}, "flag.note"),
        ({"flag": "maybe"}, "flag.flag"),
        ({"flag": "unsure", "reason": "unreadable"}, "flag.reason"),
        ({"flag": "unsure", "colour": "red"}, "flag.colour"),
        ("broken", "flag"),
        ([BROKEN], "flag"),
    ],
)
def test_a_bad_flag_is_refused_naming_its_field_and_nothing_is_stored(ready, flag, field):
    study, p, a = ready
    errors = _errors(p, a, {"has_failure": False, "failures": [], "flag": flag})
    assert field in errors


def test_a_flag_note_of_exactly_the_limit_is_accepted(ready):
    study, p, a = ready
    note = "n" * 500
    ann = annotation_submit(
        participation=p, public_id=a.public_id, answer={"flag": {"flag": "broken", "reason": "other", "note": note}}
    ).annotation
    assert ann.flag_note == note


def test_a_draft_keeps_the_flag_as_typed_and_the_page_gets_it_back(ready):
    from annotate.models import Assignment
    from annotate.participation.drafts import assignment_save

    study, p, a = ready
    draft = {"has_failure": None, "failures": [], "flag": {"flag": "broken", "reason": "nonsense", "note": "y" * 900}}
    assignment_save(participation=p, public_id=a.public_id, draft=draft, seq=1)
    stored = Assignment.objects.get(pk=a.pk).draft
    assert stored["flag"] == {"flag": "broken", "note": "y" * 500}
    assignment_save(participation=p, public_id=a.public_id, draft={"flag": {"flag": "nope"}}, seq=2)
    assert "flag" not in Assignment.objects.get(pk=a.pk).draft
