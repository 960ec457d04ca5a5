"""Active time is what the server can vouch for: the page's claims of tab-visible time are
credited only up to the server's own elapsed time between its events, and the total never
exceeds the wall time since the item was first served (issue 18: 60 rapid autosaves used to
credit 121 s in 6.9 s of wall time, defeating the speeder screening and the implied pay)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from annotate.models import Annotation, Assignment
from annotate.participation.drafts import assignment_save
from annotate.participation.reservations import assignment_next
from annotate.participation.submissions import annotation_submit
from annotate.testing import NO_FAILURE, annotator_start, read_everything, study_make

pytestmark = pytest.mark.django_db


def _wall_seconds(a: Assignment) -> float:
    assert a.first_served_at is not None
    return (timezone.now() - a.first_served_at).total_seconds()


def test_sixty_rapid_autosaves_claiming_two_seconds_each_credit_at_most_the_wall_time():
    study = study_make(n_items=1)
    client = Client()
    client.get(
        reverse("annotate:entry", args=[study.slug]), {"PROLIFIC_PID": "speeder", "STUDY_ID": "s", "SESSION_ID": "s"}
    )
    client.post(reverse("annotate:consent", args=[study.slug]), {"agree": "yes"})
    client.get(reverse("annotate:work", args=[study.slug]))
    a = Assignment.objects.get()
    url = reverse("annotate:save", args=[study.slug, a.public_id])
    for _ in range(60):
        response = client.post(url, data=json.dumps({"active_ms": 2000, "events": []}), content_type="application/json")
        assert response.status_code == 200
    a.refresh_from_db()
    wall = _wall_seconds(a)
    assert a.active_seconds <= wall, (a.active_seconds, wall)
    assert a.active_seconds < 60 * 2  # the claims added up to 120 s


def test_the_total_never_exceeds_the_time_since_the_first_serve_even_with_a_stale_last_activity():
    study = study_make(n_items=1)
    p = annotator_start(study, "stale")
    a = assignment_next(participation=p)
    assert a is not None and a.first_served_at is not None
    # A last activity before the first serve (clock change, a restored row) must not open a window.
    Assignment.objects.filter(pk=a.pk).update(last_activity_at=a.first_served_at - timedelta(hours=1))
    assignment_save(participation=p, public_id=a.public_id, active_ms=3_600_000)
    a.refresh_from_db()
    assert a.active_seconds <= _wall_seconds(a)


def test_saves_spaced_like_the_page_credit_what_the_page_reports():
    """Five saves, each 5 s after the previous one on the server's clock, claiming 4 s of
    visible time each: 20 s credited (the claim is within the elapsed time)."""
    study = study_make(n_items=1)
    p = annotator_start(study, "honest")
    a = assignment_next(participation=p)
    assert a is not None and a.first_served_at is not None
    Assignment.objects.filter(pk=a.pk).update(first_served_at=a.first_served_at - timedelta(seconds=30))
    for _ in range(5):
        Assignment.objects.filter(pk=a.pk).update(last_activity_at=timezone.now() - timedelta(seconds=5))
        assignment_save(participation=p, public_id=a.public_id, active_ms=4000)
    a.refresh_from_db()
    assert a.active_seconds == pytest.approx(20.0, abs=0.01)


def test_a_claim_beyond_the_elapsed_time_is_credited_the_elapsed_time_only():
    study = study_make(n_items=1)
    p = annotator_start(study, "claimer")
    a = assignment_next(participation=p)
    assert a is not None and a.first_served_at is not None
    Assignment.objects.filter(pk=a.pk).update(
        first_served_at=a.first_served_at - timedelta(seconds=60),
        last_activity_at=timezone.now() - timedelta(seconds=10),
    )
    assignment_save(participation=p, public_id=a.public_id, active_ms=50_000)
    a.refresh_from_db()
    assert 10.0 <= a.active_seconds < 11.0  # 10 s elapsed (plus the test's own run time), not 50


def test_the_stored_annotation_never_has_more_active_than_wall_seconds():
    study = study_make(n_items=1)
    p = annotator_start(study, "stored")
    a = assignment_next(participation=p)
    assert a is not None
    read_everything(p, a)
    for _ in range(20):
        assignment_save(participation=p, public_id=a.public_id, active_ms=5000)
    annotation_submit(participation=p, public_id=a.public_id, answer=NO_FAILURE)
    annotation = Annotation.objects.get()
    assert annotation.active_seconds <= annotation.wall_seconds
