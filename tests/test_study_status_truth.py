"""What the study page and the studies API say about a study's participants and items is true,
and the two say the same: the release control only where a release applies (the web refuses
what the API refuses, through the same service), and a closed study's items below k that
nobody holds are "left incomplete", not "in progress"."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.urls import reverse

from annotate.models import Assignment, AssignmentStatus, Participation, ParticipationState
from annotate.participation.reservations import assignment_next
from annotate.studies.selectors import study_progress_get
from annotate.studies.services import study_update
from annotate.testing import annotate_all, annotator_start, study_make
from core.services import api_token_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def token_client(researcher) -> Client:
    return Client(HTTP_AUTHORIZATION=f"Token {api_token_create(user=researcher, label='script').secret}")


def _messages(response) -> list[tuple[str, str]]:
    """The flash messages of a response followed to the study page (which shows them)."""
    return [(m.level_tag, m.message) for m in response.context["messages"]]


# -- releasing a participant's slots ---------------------------------------------------------


@pytest.fixture
def finished_and_holding(db):
    """A study (k = 2, 2 items) where ``finisher`` labelled both items and completed, and
    ``holder`` holds a reservation on one."""
    study = study_make(n_items=2, annotators_per_item=2)
    finisher = annotator_start(study, "finisher")
    assert annotate_all(finisher, False) == 2
    finisher.refresh_from_db()
    assert finisher.state == ParticipationState.COMPLETED
    holder = annotator_start(study, "holder")
    held = assignment_next(participation=holder)
    assert held is not None
    return study, finisher, holder, held


def test_the_study_page_offers_the_release_only_to_participants_a_release_applies_to(
    researcher_client, finished_and_holding
):
    study, finisher, holder, _ = finished_and_holding
    page = researcher_client.get(reverse("annotate:study_detail", args=[study.slug])).content.decode()
    assert reverse("annotate:participant_release", args=[study.slug, holder.pk]) in page
    assert reverse("annotate:participant_release", args=[study.slug, finisher.pk]) not in page
    assert page.count("Returned: release slots") == 1
    assert "Release 0 reserved slots" not in page and "finisher is marked returned" not in page


def test_the_web_release_of_a_completed_participant_is_refused_as_the_api_refuses_it(
    researcher_client, token_client, finished_and_holding
):
    study, finisher, _, held = finished_and_holding
    url = reverse("annotate:participant_release", args=[study.slug, finisher.pk])
    response = researcher_client.post(url, {"confirm": "yes"}, follow=True)
    assert response.redirect_chain == [(reverse("annotate:study_detail", args=[study.slug]), 302)]
    api = token_client.post(
        f"/api/studies/{study.slug}/participants/{finisher.pk}/release/",
        data=json.dumps({"confirm": "yes"}),
        content_type="application/json",
    )
    assert api.status_code == 409
    detail = api.json()["detail"]
    assert detail == "finisher is completed and holds no reserved slot; nothing to release"
    # The page says what the API says, as an error, and no success.
    assert _messages(response) == [("error", detail)]
    assert Participation.objects.get(pk=finisher.pk).state == ParticipationState.COMPLETED
    assert Assignment.objects.get(pk=held.pk).status == AssignmentStatus.RESERVED
    # The confirmation page is not offered either: the same refusal.
    asked = researcher_client.get(url, follow=True)
    assert asked.redirect_chain[0][1] == 302 and _messages(asked) == [("error", detail)]


def test_the_web_release_is_refused_by_the_service_when_the_state_changed_after_the_page_read_it(
    researcher_client, finished_and_holding, monkeypatch
):
    """The page's check is the service's own (``participation_release_refusal``): when it was
    passed on a stale read, ``participation_release`` refuses under the row lock, and the
    page shows that refusal with nothing changed."""
    import annotate.studies.views as views

    study, finisher, _, _ = finished_and_holding
    monkeypatch.setattr(views, "participation_release_refusal", lambda participation, *, n_reserved: None)
    url = reverse("annotate:participant_release", args=[study.slug, finisher.pk])
    response = researcher_client.post(url, {"confirm": "yes"}, follow=True)
    assert _messages(response) == [("error", "finisher is completed and holds no reserved slot; nothing to release")]
    after = Participation.objects.get(pk=finisher.pk)
    assert (after.state, after.state_reason) == (ParticipationState.COMPLETED, finisher.state_reason)


def test_the_web_release_of_a_returned_participant_is_refused_as_the_api_refuses_it(
    researcher_client, token_client, finished_and_holding
):
    study, _, holder, held = finished_and_holding
    url = reverse("annotate:participant_release", args=[study.slug, holder.pk])
    first = researcher_client.post(url, {"confirm": "yes"}, follow=True)
    assert _messages(first) == [("success", "Released 1 reserved slot(s) of holder; they return to the pool.")]
    assert Assignment.objects.get(pk=held.pk).status == AssignmentStatus.RELEASED
    again = researcher_client.post(url, {"confirm": "yes"}, follow=True)
    api = token_client.post(
        f"/api/studies/{study.slug}/participants/{holder.pk}/release/",
        data=json.dumps({"confirm": "yes"}),
        content_type="application/json",
    )
    assert api.status_code == 409 and _messages(again) == [("error", api.json()["detail"])]
    assert "Returned: release slots" not in again.content.decode()


def test_a_completed_participant_still_holding_a_slot_can_be_released_and_stays_completed(
    researcher_client, finished_and_holding
):
    """The API releases the slots a finished participant still holds (it refuses only when
    there are none); the page offers that too and does not claim they become returned."""
    study, finisher, holder, held = finished_and_holding
    Participation.objects.filter(pk=holder.pk).update(state=ParticipationState.COMPLETED)
    page = researcher_client.get(reverse("annotate:study_detail", args=[study.slug])).content.decode()
    assert reverse("annotate:participant_release", args=[study.slug, holder.pk]) in page
    assert "holder is marked returned" not in page and "holder stays Completed" in page
    response = researcher_client.post(
        reverse("annotate:participant_release", args=[study.slug, holder.pk]), {"confirm": "yes"}, follow=True
    )
    assert _messages(response) == [("success", "Released 1 reserved slot(s) of holder; they return to the pool.")]
    assert Assignment.objects.get(pk=held.pk).status == AssignmentStatus.RELEASED
    assert Participation.objects.get(pk=holder.pk).state == ParticipationState.COMPLETED


# -- a closed study's items ------------------------------------------------------------------


@pytest.fixture
def half_done(db):
    """A study (k = 2, 3 items) where one annotator labelled every item and completed: each
    item has 1 of 2 slots filled, and nobody holds a reservation."""
    study = study_make(n_items=3, annotators_per_item=2)
    solo = annotator_start(study, "solo")
    assert annotate_all(solo, True) == 3
    solo.refresh_from_db()
    assert solo.state == ParticipationState.COMPLETED
    return study


def _page_counts(client: Client, study) -> str:
    return client.get(reverse("annotate:study_detail", args=[study.slug])).content.decode()


def test_an_open_studys_items_below_k_are_in_progress(researcher_client, token_client, half_done):
    study = half_done
    progress = study_progress_get(study)
    assert (progress["items_in_progress"], progress["items_incomplete"], progress["items_open"]) == (3, 0, 0)
    api = token_client.get(f"/api/studies/{study.slug}/").json()["progress"]
    assert (api["items_in_progress"], api["items_incomplete"]) == (3, 0)
    page = _page_counts(researcher_client, study)
    assert 'id="items-in-progress">3<' in page and "left incomplete" not in page


def test_a_closed_studys_items_below_k_are_left_incomplete_not_in_progress(researcher_client, token_client, half_done):
    study = half_done
    study = study_update(study=study, is_open=False)
    progress = study_progress_get(study)
    assert progress["live_reservations"] == 0
    assert (progress["items_complete"], progress["items_in_progress"], progress["items_incomplete"]) == (0, 0, 3)
    assert progress["items_open"] == 0
    api = token_client.get(f"/api/studies/{study.slug}/").json()["progress"]
    assert (api["items_in_progress"], api["items_incomplete"], api["items_open"]) == (0, 3, 0)
    page = _page_counts(researcher_client, study)
    assert 'id="items-in-progress">0<' in page
    assert "Items left incomplete (study closed)" in page and 'id="items-incomplete">3<' in page


def test_a_closed_studys_item_someone_still_holds_is_in_progress(researcher_client, token_client, half_done):
    """Closing a study turns away new participants only: someone already in it who holds a
    live reservation can still submit, so that item is still in progress."""
    study = half_done
    late = annotator_start(study, "late")
    held = assignment_next(participation=late)
    assert held is not None
    study = study_update(study=study, is_open=False)
    progress = study_progress_get(study)
    assert (progress["items_in_progress"], progress["items_incomplete"], progress["items_open"]) == (1, 2, 0)
    api = token_client.get(f"/api/studies/{study.slug}/").json()["progress"]
    assert (api["items_in_progress"], api["items_incomplete"]) == (1, 2)
    total = progress["items_complete"] + progress["items_in_progress"] + progress["items_incomplete"]
    assert total + progress["items_open"] == progress["items_total"]


def test_the_openapi_schema_describes_items_in_progress_and_incomplete(researcher_client):
    import yaml

    schema = yaml.safe_load(researcher_client.get("/api/schema/").content)
    fields = schema["components"]["schemas"]["StudyProgress"]["properties"]
    assert "closed" in fields["items_in_progress"]["description"]
    assert "closed" in fields["items_incomplete"]["description"]
