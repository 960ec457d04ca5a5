"""A full study (no main item a new participant could be given: every one has its k counted
annotations or live reservations covering them) turns new participants away at the entry,
before the consent page's promise of items and pay, and records nobody; participants already
in it go on. A participant who reaches the items when none is left for them (it filled up
while they read the guidelines, trained or took the qualification test) sees the same "study
full" page: no completion code for zero items, not completed, and a slot that frees later is
theirs. Preview and test participants are unaffected (docs/annotation.md, "A full study")."""

from __future__ import annotations

import itertools
import re
from datetime import timedelta
from decimal import Decimal

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotate.errors import StudyFull
from annotate.kinds import kind_get
from annotate.models import Annotator, Assignment, Participation, ParticipationState, Qualification, Study
from annotate.participation.reservations import assignment_next
from annotate.participation.selectors import study_full
from annotate.participation.services import participation_consent, participation_enter, participation_test_start
from annotate.participation.submissions import annotation_submit
from annotate.studies.services import study_create
from annotate.studies.settings import StudySettings
from annotate.testing import ONE_FAILURE, annotate_all, annotate_next, annotator_start, read_everything, study_make

pytestmark = pytest.mark.django_db

FULL = "This study is full"
_addresses = itertools.count(1)


def _text(html: bytes) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", html.decode()))


def _pid(n: int) -> str:
    return f"{n:024x}"  # a Prolific id: 24 hexadecimal characters


def _client() -> Client:
    return Client(REMOTE_ADDR=f"198.51.100.{next(_addresses)}")  # the entry is rate-limited per address


def _enter(client: Client, study: Study, pid: str):
    return client.get(reverse("annotate:entry", args=[study.slug]), {"PROLIFIC_PID": pid, "STUDY_ID": "S"})


def _qualified(study: Study, pid: str) -> Participation:
    """A participant qualified on the study's guidelines already: straight to the items."""
    annotator = Annotator.objects.create(pid=pid)
    Qualification.objects.create(
        annotator=annotator, guideline_version=study.guideline_version, study=study, passed=True, n_correct=1, n_total=1
    )
    p = annotator_start(study, pid)
    assert p.state == ParticipationState.ANNOTATING
    return p


def _walk_cf() -> Study:
    """Study walk-cf: critical failure, k = 2, two main items, an attention check, a gold item,
    training on, 0.50 USD per item; both main items have their two annotations."""
    study = study_make(
        name="walk-cf",
        n_items=2,
        n_attention=1,
        n_gold=1,
        annotators_per_item=2,
        training_enabled=True,
        payment_per_item=Decimal("0.50"),
    )
    for pid in ("filler-1", "filler-2"):
        annotate_all(_qualified(study, pid), True)  # the attention check's answer is has_failure
    assert study_full(study)
    return study


def _assert_turned_away(response, study: Study) -> str:
    assert response.status_code == 409
    text = _text(response.content)
    assert FULL in text and "return the study on Prolific" in text
    assert study.completion_code not in text and "you are done" not in text
    assert "to label" not in text and "Pay:" not in text  # the consent page's promise
    return text


def test_a_new_participant_is_turned_away_from_a_full_study_before_consent_and_not_recorded():
    study = _walk_cf()
    before = (Participation.objects.count(), Annotator.objects.count())
    client = _client()
    _assert_turned_away(_enter(client, study, _pid(7)), study)
    assert (Participation.objects.count(), Annotator.objects.count()) == before
    # Nothing in the session: the consent and done pages are not theirs either.
    assert client.get(reverse("annotate:consent", args=[study.slug])).status_code == 403
    assert client.get(reverse("annotate:done", args=[study.slug])).status_code == 403
    with pytest.raises(StudyFull):
        participation_enter(study=study, pid=_pid(8), prolific_study_id="S", session_id="x")


def test_a_study_whose_items_are_all_held_by_live_reservations_is_full_until_a_lease_runs_out():
    study = study_make(n_items=1, annotators_per_item=1)
    holder = annotator_start(study, "holder")
    held = assignment_next(participation=holder)
    assert held is not None
    _assert_turned_away(_enter(_client(), study, _pid(1)), study)
    # The one holding the item goes on: back through the link, to their item.
    client = _client()
    response = _enter(client, study, "holder")
    assert response.status_code == 302 and response.url == reverse("annotate:work", args=[study.slug])
    page = client.get(response.url)
    assert page.status_code == 200 and str(held.public_id) in page.content.decode()
    # Once the lease has run out the slot is free again: a new participant is let in.
    Assignment.objects.filter(pk=held.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    assert not study_full(study)
    response = _enter(_client(), study, _pid(2))
    assert response.status_code == 302 and response.url == reverse("annotate:consent", args=[study.slug])


def test_a_participant_who_entered_before_the_study_filled_is_not_shown_the_consent_promise():
    study = study_make(n_items=1, annotators_per_item=1, payment_per_item=Decimal("0.50"))
    late = _client()
    assert _enter(late, study, _pid(3)).status_code == 302  # in time: the consent page is theirs
    annotate_next(annotator_start(study, "filler"))
    consent_url = reverse("annotate:consent", args=[study.slug])
    _assert_turned_away(late.get(consent_url), study)
    _assert_turned_away(late.post(consent_url, {"agree": "yes"}), study)
    p = Participation.objects.get(annotator__pid=_pid(3))
    assert p.state == ParticipationState.CONSENT and p.consented_at is None
    with pytest.raises(StudyFull):
        participation_consent(participation=p)


def test_after_training_and_qualification_a_participant_with_no_item_left_gets_no_completion_code():
    study = study_make(n_items=1, n_gold=1, annotators_per_item=1, gold_answers=[True])
    client = _client()
    assert _enter(client, study, _pid(4)).status_code == 302
    client.post(reverse("annotate:consent", args=[study.slug]), {"agree": "yes"})
    p = Participation.objects.get(annotator__pid=_pid(4))
    assert p.state == ParticipationState.QUALIFICATION
    # Meanwhile the only item is taken and reserved by someone else.
    filler = _qualified(study, "filler")
    held = assignment_next(participation=filler)
    gold = assignment_next(participation=p)
    assert held is not None and gold is not None
    read_everything(p, gold)
    result = annotation_submit(participation=p, public_id=gold.public_id, answer=ONE_FAILURE, submission_id="g")
    p.refresh_from_db()
    assert result.annotation.correct and p.state == ParticipationState.ANNOTATING
    work = client.get(reverse("annotate:work", args=[study.slug]))
    text = _assert_turned_away(work, study)
    assert "training and qualification" in text
    p.refresh_from_db()
    assert p.state == ParticipationState.ANNOTATING and p.finished_at is None  # not completed
    done = client.get(reverse("annotate:done", args=[study.slug]))
    assert done.status_code == 302 and done["Location"] == reverse("annotate:work", args=[study.slug])
    # The filler lets the lease run out: the slot is theirs when they open the link again.
    Assignment.objects.filter(pk=held.pk).update(lease_expires_at=timezone.now() - timedelta(seconds=1))
    again = client.get(_enter(client, study, _pid(4)).url)
    assert again.status_code == 200 and FULL not in _text(again.content)
    mine = Assignment.objects.get(participation=p, role="main")
    assert mine.item_id == held.item_id


def test_someone_who_annotated_goes_on_to_the_completion_code_as_before():
    study = study_make(n_items=2, annotators_per_item=1)
    first, second = annotator_start(study, "first"), annotator_start(study, "second")
    annotate_next(first)
    annotate_next(second)
    for p in (first, second):
        assert assignment_next(participation=p) is None
        p.refresh_from_db()
        assert p.state == ParticipationState.COMPLETED


def test_a_full_constraint_faithfulness_study_turns_a_new_participant_away():
    kind = kind_get("constraint_faithfulness")
    line = {
        "id": "cs-1",
        "abstract_goal": "Make a cake",
        "specific_goal": "Make a vanilla cake",
        "constraint": "Vanilla",
        "constraint_type": "modifier",
        "topic": "Food",
        "steps": ["Gather your ingredients.", "Bake the cake."],
    }
    study = study_create(
        name="walk-faithfulness",
        kind="constraint_faithfulness",
        items=[kind.parse_record(line)],
        settings=StudySettings(
            annotators_per_item=1,
            training_enabled=False,
            qualification_enabled=False,
            min_seconds=0,
            attention_check_rate=0,
            allow_other_pids=True,
        ),
    )
    filler = annotator_start(study, "filler")
    a = assignment_next(participation=filler)
    assert a is not None
    answer = {"specific_goal_ok": "yes", "meets_constraint": "yes", "steps_correct": "yes", "wrong_steps": []}
    annotation_submit(participation=filler, public_id=a.public_id, answer={**answer, "comments": ""})
    before = Participation.objects.count()
    _assert_turned_away(_enter(_client(), study, _pid(5)), study)
    assert Participation.objects.count() == before
    assert not Participation.objects.filter(state=ParticipationState.COMPLETED).exclude(pk=filler.pk).exists()


def test_test_participants_and_the_preview_still_walk_a_full_study(researcher_client):
    study = _walk_cf()
    preview = researcher_client.get(reverse("annotate:preview", args=[study.slug]))
    assert preview.status_code == 200 and "to label" in _text(preview.content)
    response = researcher_client.post(reverse("annotate:study_test_participant", args=[study.slug]))
    assert response.status_code == 302 and response.url == reverse("annotate:consent", args=[study.slug])
    consent = researcher_client.get(response.url)
    assert consent.status_code == 200 and FULL not in _text(consent.content)
    p = participation_test_start(study=study)
    p = participation_consent(participation=p)
    assert p.state == ParticipationState.TRAINING  # training on: the test participant walks it
    Participation.objects.filter(pk=p.pk).update(state=ParticipationState.ANNOTATING)
    p.refresh_from_db()
    assert assignment_next(participation=p) is not None  # a full item: a test participant holds no slot
