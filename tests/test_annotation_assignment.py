"""Assignment (k distinct annotators, leases, surplus, release), attention checks,
qualification and training: the annotator's path as the server enforces it."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotate.errors import StepRefused, StudyFull
from annotate.models import (
    Annotation,
    Assignment,
    AssignmentStatus,
    ParticipationState,
    Qualification,
)
from annotate.participation.reservations import assignment_next
from annotate.participation.services import (
    participation_consent,
    participation_enter,
    training_answer,
    training_examples,
    training_open,
)
from annotate.participation.submissions import annotation_submit
from annotate.studies.services import participation_release, study_round_create
from annotate.testing import (
    NO_FAILURE,
    ONE_FAILURE,
    annotate_next,
    annotator_start,
    read_everything,
    study_make,
)

pytestmark = pytest.mark.django_db


def _expire(a: Assignment) -> None:
    Assignment.objects.filter(pk=a.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))


def test_each_item_gets_k_distinct_annotators_and_nobody_sees_an_item_twice():
    study = study_make(n_items=3, annotators_per_item=2)
    people = [annotator_start(study, f"p{i}") for i in range(4)]
    for p in people:
        while annotate_next(p) is not None:
            pass
    per_item: dict[str, list[str]] = {}
    for ann in Annotation.objects.all():
        per_item.setdefault(ann.item.item_id, []).append(ann.annotator.pid)
    assert sorted(per_item) == ["item-1", "item-2", "item-3"]
    for pids in per_item.values():
        assert len(pids) == 2 and len(set(pids)) == 2
    assert not Annotation.objects.filter(surplus=True).exists()
    # Four people, six slots: the first two took all three items and completed; the others got
    # nothing left, and no completion code for zero items (tests/test_study_full_entry.py).
    for p in people:
        p.refresh_from_db()
    assert [p.state for p in people] == [ParticipationState.COMPLETED] * 2 + [ParticipationState.ANNOTATING] * 2


def test_a_reservation_holds_a_slot_until_its_lease_expires():
    study = study_make(n_items=1, annotators_per_item=1)
    first, second = annotator_start(study, "first"), annotator_start(study, "second")
    held = assignment_next(participation=first)
    assert held is not None
    assert assignment_next(participation=second) is None  # the only slot is reserved
    second.refresh_from_db()
    assert second.state == ParticipationState.ANNOTATING  # nothing annotated: no completion code
    with pytest.raises(StudyFull):  # a new participant is turned away while the slot is held
        annotator_start(study, "third")

    _expire(held)
    third = annotator_start(study, "third")
    taken = assignment_next(participation=third)
    assert taken is not None and taken.item_id == held.item_id


def test_returning_after_the_lease_keeps_the_item_if_a_slot_is_still_free():
    study = study_make(n_items=2, annotators_per_item=2)
    p = annotator_start(study, "back")
    a = assignment_next(participation=p)
    assert a is not None
    _expire(a)
    again = assignment_next(participation=p)
    assert again is not None and again.lease_expires_at is not None
    assert again.pk == a.pk and again.lease_expires_at > timezone.now()


def test_returning_after_the_lease_to_a_filled_item_moves_on_and_keeps_the_draft():
    study = study_make(n_items=2, annotators_per_item=1)
    slow = annotator_start(study, "slow")
    a = assignment_next(participation=slow)
    assert a is not None
    from annotate.participation.drafts import assignment_save

    assignment_save(participation=slow, public_id=a.public_id, draft={**NO_FAILURE, "comments": "mine"}, seq=1)
    _expire(a)
    fast = annotator_start(study, "fast")
    annotate_next(fast)  # takes the freed slot of item-1 and submits
    nxt = assignment_next(participation=slow)
    assert nxt is not None
    assert nxt.item.item_id == "item-2"
    stale = Assignment.objects.get(pk=a.pk)
    assert stale.status == AssignmentStatus.EXPIRED and stale.draft["comments"] == "mine"


def test_a_late_submit_is_stored_and_marked_surplus_when_the_item_was_filled():
    study = study_make(n_items=1, annotators_per_item=1)
    slow = annotator_start(study, "slow")
    a = assignment_next(participation=slow)
    assert a is not None
    read_everything(slow, a)
    _expire(a)
    fast = annotator_start(study, "fast")
    assert annotate_next(fast).annotation.surplus is False
    late = annotation_submit(participation=slow, public_id=a.public_id, answer=ONE_FAILURE)
    assert late.created and late.annotation.surplus and late.annotation.late
    assert Annotation.objects.filter(item=a.item).count() == 2


def test_a_late_submit_into_a_free_slot_is_not_surplus():
    study = study_make(n_items=1, annotators_per_item=2)
    p = annotator_start(study, "late")
    a = assignment_next(participation=p)
    assert a is not None
    read_everything(p, a)
    _expire(a)
    result = annotation_submit(participation=p, public_id=a.public_id, answer=NO_FAILURE)
    assert result.annotation.late and not result.annotation.surplus


def test_releasing_a_returned_participant_frees_their_slots_and_keeps_their_late_submit():
    study = study_make(n_items=1, annotators_per_item=1)
    gone = annotator_start(study, "gone")
    a = assignment_next(participation=gone)
    assert a is not None
    read_everything(gone, a)
    assert participation_release(participation=gone) == 1
    gone.refresh_from_db()
    assert gone.state == ParticipationState.RETURNED
    other = annotator_start(study, "other")
    taken = assignment_next(participation=other)
    assert taken is not None and taken.item_id == a.item_id
    kept = annotation_submit(participation=gone, public_id=a.public_id, answer=NO_FAILURE)
    assert kept.created and kept.annotation.late


def test_max_items_per_annotator_ends_the_session_with_the_completion_code():
    study = study_make(n_items=5, max_items_per_annotator=2)
    p = annotator_start(study, "two")
    assert annotate_next(p) and annotate_next(p)
    assert annotate_next(p) is None
    p.refresh_from_db()
    assert p.state == ParticipationState.COMPLETED and "2 items" in p.state_reason


# ---------------------------------------------------------------------------- attention checks


def test_attention_checks_are_mixed_in_at_the_study_rate():
    """One check in every stretch of 1/rate items, at the positions and in the order of the
    participant's seeded plan (annotate/participation/attention_plan.py)."""
    from annotate.participation.attention_plan import check_order, check_positions

    study = study_make(n_items=8, n_attention=2, attention_check_rate=0.25, attention_max_failures=5)
    p = annotator_start(study, "att")
    roles, check_items = [], []
    while (result := annotate_next(p, label=True)) is not None:
        roles.append(result.annotation.source)
        if result.annotation.source == "attention":
            check_items.append(result.annotation.item_id)
    p.refresh_from_db()
    assert p.attention_seed is not None
    assert len(roles) == 10 and roles.count("attention") == 2
    assert roles[0:4].count("attention") == 1 and roles[4:8].count("attention") == 1
    assert [i for i, role in enumerate(roles) if role == "attention"] == check_positions(p.attention_seed, 0.25, 2)
    in_study_order = list(study.items.filter(role="attention").order_by("position").values_list("pk", flat=True))
    assert check_items == check_order(p.attention_seed, in_study_order)


def test_failing_more_attention_checks_than_allowed_screens_out_and_excludes_but_keeps_annotations():
    study = study_make(
        n_items=6, n_attention=2, attention_check_rate=0.5, attention_max_failures=1, attention_answers=[True, True]
    )
    p = annotator_start(study, "careless")
    sources = []
    while "attention" not in sources:  # the first check (within the first two items), answered wrong
        sources.append(annotate_next(p, label=False).annotation.source)
    p.refresh_from_db()
    assert p.state == ParticipationState.ANNOTATING and p.attention_failures == 1  # one miss is allowed
    while sources.count("attention") < 2:  # the second check (within the next two items), wrong again
        sources.append(annotate_next(p, label=False).annotation.source)
    p.refresh_from_db()
    assert p.state == ParticipationState.SCREENED_OUT and p.excluded
    main = Annotation.objects.filter(participation=p, source="main")
    assert main.count() == sources.count("main") >= 1
    assert all(a.excluded and a.exclusion_reason == "failed_attention_checks" for a in main)
    assert assignment_next(participation=p) is None
    response = _done_page(study, "careless")
    assert study.screened_out_code.encode() in response.content


def _done_page(study, pid):
    client = Client()
    client.get(reverse("annotate:entry", args=[study.slug]), {"PROLIFIC_PID": pid})
    return client.get(reverse("annotate:done", args=[study.slug]))


# ---------------------------------------------------------------------------- qualification


def test_passing_the_qualification_leads_to_the_main_pool_and_is_remembered_per_guideline_version():
    study = study_make(n_items=2, n_gold=3, gold_answers=[True, False, True], qualification_pass=2)
    p = annotator_start(study, "qualifier")
    assert p.state == ParticipationState.QUALIFICATION
    for label in (True, False, False):  # two of three right
        result = annotate_next(p, label=label)
        assert result.annotation.source == "qualification" and result.annotation.excluded
    p.refresh_from_db()
    assert p.state == ParticipationState.ANNOTATING
    assert Qualification.objects.get(annotator__pid="qualifier").passed
    main = assignment_next(participation=p)
    assert main is not None and main.role == "main"

    # Same guidelines in another study: straight to the main pool, no retake.
    second = study_make(n_items=1, n_gold=3, name="Second study")
    assert second.guideline_version_id == study.guideline_version_id
    q = annotator_start(second, "qualifier")
    assert q.state == ParticipationState.ANNOTATING


def test_failing_the_qualification_screens_out_with_no_retry_on_the_same_guidelines():
    study = study_make(n_items=2, n_gold=3, gold_answers=[True, True, True], qualification_pass=3)
    p = annotator_start(study, "unlucky")
    for _ in range(3):
        annotate_next(p, label=False)
    p.refresh_from_db()
    assert p.state == ParticipationState.SCREENED_OUT and "0 of 3" in p.state_reason
    assert assignment_next(participation=p) is None
    assert study.screened_out_code.encode() in _done_page(study, "unlucky").content

    again = study_make(n_items=1, n_gold=3, name="Same guidelines")
    q = annotator_start(again, "unlucky")
    assert q.state == ParticipationState.SCREENED_OUT

    # A new round has new guidelines: a new chance.
    new_round = study_round_create(study=study, instructions="Revised guidelines for round two.")
    r = annotator_start(new_round, "unlucky")
    assert new_round.round == 2 and r.state == ParticipationState.QUALIFICATION


# ---------------------------------------------------------------------------- training


def test_training_requires_opening_each_example_in_order_and_shows_the_explanation():
    study = study_make(n_items=1, training_enabled=True)
    p = annotator_start(study, "trainee")
    assert p.state == ParticipationState.TRAINING
    examples = training_examples(study)
    assert len(examples) == 11 and sum(e["is_critical"] for e in examples) == 5
    with pytest.raises(StepRefused):
        training_answer(participation=p, index=0, answer=True)  # not opened yet
    with pytest.raises(StepRefused):
        training_open(participation=p, index=1)  # not in order
    for index, example in enumerate(examples):
        training_open(participation=p, index=index)
        wrong = not example["is_critical"]
        result = training_answer(participation=p, index=index, answer=wrong if index == 0 else example["is_critical"])
        assert result.explanation == example["explanation"]
        assert result.correct is (index != 0)
    p.refresh_from_db()
    assert p.state == ParticipationState.ANNOTATING and p.training_completed_at is not None
    assert p.training_progress[examples[0]["id"]]["correct"] is False


def test_training_pages_over_http_answer_and_move_on():
    study = study_make(n_items=1, training_enabled=True)
    client = Client()
    client.get(reverse("annotate:entry", args=[study.slug]), {"PROLIFIC_PID": "webtrainee"})
    assert client.post(reverse("annotate:consent", args=[study.slug]), {}).status_code == 400  # box not ticked
    response = client.post(reverse("annotate:consent", args=[study.slug]), {"agree": "yes"})
    assert response["Location"] == reverse("annotate:training", args=[study.slug])
    intro = client.get(response["Location"])
    assert b"What is a critical failure?" in intro.content and b"Internal inconsistency" in intro.content
    # Jumping ahead is redirected back to the first unanswered example.
    skip = client.get(reverse("annotate:training_example", args=[study.slug, 5]))
    assert skip.status_code == 302 and skip["Location"].endswith("/training/1/")
    page = client.get(reverse("annotate:training_example", args=[study.slug, 1]))
    assert b"Jacob" in page.content
    answer = client.post(reverse("annotate:training_example", args=[study.slug, 1]), {"answer": "acceptable"})
    assert b"Not quite." in answer.content and b"there is no largest or smallest piece" in answer.content


def test_entry_with_the_same_pid_and_session_resumes_and_another_session_is_refused():
    """A participation is bound to the Prolific session it started in (issue 28, F-08: anyone
    who knew a PID could enter with another SESSION_ID, see the draft and be screened out in
    the participant's place). Prolific gives a participant one submission, and one SESSION_ID,
    per study; the same link opened again carries the same one."""
    from annotate.errors import EntryRefused

    study = study_make(n_items=2)
    p = participation_enter(study=study, pid="resumer", prolific_study_id="S1", session_id="A")
    participation_consent(participation=p)
    a = assignment_next(participation=p)
    assert a is not None
    again = participation_enter(study=study, pid="resumer", prolific_study_id="S1", session_id="A")
    resumed = assignment_next(participation=again)
    assert again.pk == p.pk and resumed is not None and resumed.pk == a.pk
    with pytest.raises(EntryRefused) as caught:
        participation_enter(study=study, pid="resumer", prolific_study_id="S1", session_id="B")
    assert list(caught.value.fields) == ["SESSION_ID"] and "another Prolific session" in str(caught.value)
    p.refresh_from_db()
    assert p.prolific_session_id == "A" and len(p.sessions_seen) == 1
    # Linked to a Prolific study, whose links always carry a session, a link without one is refused too.
    study.prolific_study_id = "S1"
    study.save(update_fields=["prolific_study_id"])
    with pytest.raises(EntryRefused):
        participation_enter(study=study, pid="resumer", prolific_study_id="S1", session_id="")


def test_a_placeholder_session_binds_nothing():
    """The raw link a researcher opens to try it ({{%SESSION_ID%}} not filled in) is no session."""
    study = study_make(n_items=2)
    p = participation_enter(study=study, pid="tryer", prolific_study_id="S1", session_id="{{%SESSION_ID%}}")
    later = participation_enter(study=study, pid="tryer", prolific_study_id="S1", session_id="real-session")
    assert later.pk == p.pk and later.prolific_session_id == "real-session"


def test_a_closed_study_refuses_new_participants_but_lets_existing_ones_back():
    from annotate.errors import EntryRefused
    from annotate.studies.services import study_update

    study = study_make(n_items=2)
    annotator_start(study, "early")
    study = study_update(study=study, is_open=False)
    with pytest.raises(EntryRefused):
        participation_enter(study=study, pid="late")
    assert participation_enter(study=study, pid="early").state == ParticipationState.ANNOTATING
