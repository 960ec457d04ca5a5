"""Prolific exactly once, against the scripted Prolific server: webhook subscriptions made from
the product; events signed as Prolific signs them, checked before anything is parsed, each
applied once and in order (duplicates, reversed order and redeliveries change nothing), with the
poll still the reconciler; hostile requests refused with a 4xx naming the header or field and
nothing stored; a bonus payment's pay call made at most once per batch, a timeout settled by
reading Prolific; a wrong API address or token said as such."""

from __future__ import annotations

import socket
import time
from decimal import Decimal
from typing import Any

import pytest
from django.db import IntegrityError, transaction
from django.urls import reverse

from annotate.models import Participation, ParticipationState
from annotate.participation.reservations import assignment_next
from annotate.participation.services import participation_consent, participation_enter
from annotate.testing import annotate_next, study_make
from prolific import constants as C
from prolific.bonus_services import prolific_bonus_pay, prolific_bonus_preview, prolific_bonus_reconcile
from prolific.client import ProlificError
from prolific.errors import ProlificConflict, ProlificInvalid
from prolific.models import (
    BonusState,
    ProlificBonusBatch,
    ProlificBonusPayIntent,
    ProlificStudyLink,
    ProlificSubmission,
    ProlificWebhookEvent,
    ProlificWebhookSecret,
    ProlificWebhookSubscription,
)
from prolific.publish_services import prolific_study_publish, prolific_study_publish_now
from prolific.review_services import prolific_review
from prolific.sync_services import prolific_submissions_sync
from prolific.token_services import prolific_token_save
from prolific.webhooks import prolific_webhooks_subscribe
from tests.scripted_prolific import WORKSPACE_ID, Event, ScriptedProlific
from tests.test_prolific import prolific, token_saved  # noqa: F401  (fixtures)

pytestmark = pytest.mark.django_db

WEBHOOK = "/api/prolific/webhook/"


@pytest.fixture
def subscribed(prolific, researcher, token_saved):
    prolific_webhooks_subscribe(user=researcher)
    return prolific


def _post(client):
    """Prolific's delivery through the test client: the status answered."""

    def post(headers: dict[str, str], body: bytes) -> int:
        headers = {k: v for k, v in headers.items() if k != "Content-Type"}
        return client.post(WEBHOOK, data=body, content_type="application/json", headers=headers).status_code

    return post


def _study(**kw):
    defaults: dict[str, Any] = dict(
        n_items=4, annotators_per_item=2, max_items_per_annotator=2, payment_per_item=Decimal("0.20"), min_seconds=0
    )
    defaults.update(kw)
    return study_make(**defaults)


def _published(study, researcher):
    prolific_study_publish(study=study, user=researcher)
    prolific_study_publish_now(study=study, user=researcher)
    study.refresh_from_db()
    return study.prolific_link


def _arrive(study, link, pid: str, session: str) -> Participation:
    p = participation_enter(study=study, pid=pid, prolific_study_id=link.prolific_id, session_id=session)
    return participation_consent(participation=p)


def _submission(prolific, link, pid: str, status: str = C.ACTIVE) -> str:
    """A submission on Prolific whose id the participant brings here as SESSION_ID."""
    return prolific.add_submission(link.prolific_id, pid, status)


def _event(prolific, sid: str, pid: str, status: str) -> Event:
    prolific.submissions[sid]["status"] = status
    event = prolific.emit("submission.status.change", sid, participant_id=pid, status=status)
    assert event is not None
    return event


# --------------------------------------------------------------------------- subscribing


def test_subscribing_creates_a_secret_and_confirms_one_subscription_per_event_type(prolific, researcher, token_saved):
    done = prolific_webhooks_subscribe(user=researcher)
    assert done.workspace_id == WORKSPACE_ID and done.target_url == "https://studio.example.org" + WEBHOOK
    assert sorted(done.created) == sorted(C.WEBHOOK_EVENT_TYPES)
    assert sorted(s["event_type"] for s in prolific.subscriptions.values() if s["confirmed"]) == sorted(
        C.WEBHOOK_EVENT_TYPES
    )
    assert {s["target_url"] for s in prolific.subscriptions.values()} == {done.target_url}
    assert ProlificWebhookSubscription.objects.filter(confirmed_at__isnull=False).count() == 2
    secret_row = ProlificWebhookSecret.objects.get(workspace_id=WORKSPACE_ID)
    assert prolific.hook_secret not in secret_row.secret_encrypted  # stored encrypted
    again = prolific_webhooks_subscribe(user=researcher)
    assert again.created == [] and sorted(again.kept) == sorted(C.WEBHOOK_EVENT_TYPES)
    assert len(prolific.subscriptions) == 2 and len(prolific.calls("POST", "hooks/secrets/")) == 1


def test_subscribing_needs_a_public_https_address_naming_target_url(prolific, researcher, token_saved, settings):
    settings.PROLIFIC_SITE_URL = "http://127.0.0.1:8000"
    with pytest.raises(ProlificInvalid) as exc:
        prolific_webhooks_subscribe(user=researcher)
    assert exc.value.field == "target_url" and "PROLIFIC_SITE_URL" in exc.value.message
    assert not prolific.requests


def test_subscribing_by_the_api_then_reading_the_state(prolific, researcher, researcher_client, token_saved):
    url = reverse("api-prolific-webhooks")
    refused = researcher_client.post(url, {}, content_type="application/json")
    assert refused.status_code == 400 and "confirm" in refused.json()
    answer = researcher_client.post(url, {"confirm": "yes"}, content_type="application/json")
    assert answer.status_code == 201, answer.content
    assert sorted(answer.json()["created"]) == sorted(C.WEBHOOK_EVENT_TYPES)
    state = researcher_client.get(url).json()
    assert len(state["subscriptions"]) == 2 and state["events"] == {}
    bad = researcher_client.post(url, {"confirm": "yes", "workspace_id": "../x"}, content_type="application/json")
    assert bad.status_code == 400 and "workspace_id" in bad.json()


# --------------------------------------------------------------------------- events, once and in order


def test_a_signed_event_of_a_returned_participant_releases_their_slots_at_once(
    prolific, researcher, client, subscribed
):
    study = _study()
    link = _published(study, researcher)
    sid = _submission(prolific, link, "leaver")
    p = _arrive(study, link, "leaver", sid)
    assert assignment_next(participation=p) is not None
    _event(prolific, sid, "leaver", C.RETURNED)
    assert prolific.deliver(_post(client)) == [200]
    p.refresh_from_db()
    assert p.state == ParticipationState.RETURNED
    assert p.state_reason == "returned on Prolific; slots released by Prolific's webhook event"
    sub = ProlificSubmission.objects.get(submission_id=sid)  # matched by SESSION_ID, without a sync
    assert sub.status == C.RETURNED and sub.slots_released == 1 and sub.participation_id == p.pk
    event = ProlificWebhookEvent.objects.get()
    assert event.outcome == C.EVENT_APPLIED and event.link_id == link.pk


def test_duplicates_and_redeliveries_are_answered_2xx_and_applied_once(prolific, researcher, client, subscribed):
    study = _study()
    link = _published(study, researcher)
    sid = _submission(prolific, link, "twice")
    p = _arrive(study, link, "twice", sid)
    assignment_next(participation=p)
    _event(prolific, sid, "twice", C.TIMED_OUT)
    post = _post(client)
    lost: list[int] = []

    def answer_lost_once(headers, body):  # our answer never reached Prolific: it delivers again
        code = post(headers, body)
        if not lost:
            lost.append(code)
            return 504
        return code

    assert prolific.deliver(answer_lost_once, duplicate=True) == [504, 200, 200]
    assert ProlificWebhookEvent.objects.count() == 1
    sub = ProlificSubmission.objects.get(submission_id=sid)
    assert sub.status == C.TIMED_OUT and sub.slots_released == 1


def test_events_out_of_order_never_let_an_older_status_overwrite_a_newer_one(prolific, researcher, client, subscribed):
    study = _study()
    link = _published(study, researcher)
    sid = _submission(prolific, link, "late")
    _arrive(study, link, "late", sid)
    _event(prolific, sid, "late", C.AWAITING_REVIEW)
    _event(prolific, sid, "late", C.APPROVED)
    assert prolific.deliver(_post(client), reverse=True) == [200, 200]  # the newest first
    sub = ProlificSubmission.objects.get(submission_id=sid)
    assert sub.status == C.APPROVED and sub.reviewed_action == C.REVIEW_ON_PROLIFIC
    outcomes = dict(ProlificWebhookEvent.objects.values_list("status", "outcome"))
    assert outcomes == {C.APPROVED: C.EVENT_APPLIED, C.AWAITING_REVIEW: C.EVENT_STALE}


def test_an_event_older_than_the_products_own_review_is_stale(prolific, researcher, client, subscribed):
    study = _study(n_items=2, max_items_per_annotator=None)
    link = _published(study, researcher)
    sid = _submission(prolific, link, "done", C.AWAITING_REVIEW)
    p = _arrive(study, link, "done", sid)
    while annotate_next(p) is not None:
        pass
    late = _event(prolific, sid, "done", C.AWAITING_REVIEW)  # sent (an hour ago) before the review below
    prolific_review(study=study, user=researcher)
    prolific.outbox = [late]
    prolific.deliver(_post(client))
    assert ProlificSubmission.objects.get(submission_id=sid).status == C.APPROVED
    assert ProlificWebhookEvent.objects.get().outcome == C.EVENT_STALE


def test_the_poll_reconciles_what_no_event_brought_and_an_unmatched_event_is_kept(
    prolific, researcher, client, subscribed
):
    study = _study()
    link = _published(study, researcher)
    stranger = _submission(prolific, link, "stranger", C.AWAITING_REVIEW)  # never arrived here
    _event(prolific, stranger, "stranger", C.RETURNED)
    prolific.deliver(_post(client))
    assert ProlificWebhookEvent.objects.get().outcome == C.EVENT_UNMATCHED
    assert not ProlificSubmission.objects.exists()
    prolific_submissions_sync(study=study, user=researcher)
    assert ProlificSubmission.objects.get(submission_id=stranger).status == C.RETURNED


def test_a_study_status_event_updates_the_link_and_other_types_are_kept_unapplied(
    prolific, researcher, client, subscribed
):
    study = _study()
    link = _published(study, researcher)
    prolific.emit("study.status.change", link.prolific_id, status="AWAITING REVIEW", metadata={})
    prolific.deliver(_post(client))
    assert ProlificStudyLink.objects.get(pk=link.pk).status == "AWAITING REVIEW"
    other = Event("evt-other", {"resource_id": link.prolific_id, "event_type": "study.progress.change"}, 1)
    headers, body = prolific.signed(other)
    assert _post(client)(headers, body) == 200
    assert ProlificWebhookEvent.objects.get(event_id="evt-other").outcome == C.EVENT_IGNORED


# --------------------------------------------------------------------------- hostile requests


def _hostile(client, headers, body, content_type="application/json"):
    headers = {k: v for k, v in headers.items() if k != "Content-Type"}
    return client.post(WEBHOOK, data=body, content_type=content_type, headers=headers)


def test_a_multipart_form_is_refused_naming_the_content_type_and_nothing_is_stored(prolific, client, subscribed):
    """The crawler's hostile form posts: a form's parts are parsed from the stream, so the raw
    bytes the signature covers are gone; a 415 naming Content-Type, never a 500."""
    answer = client.post(WEBHOOK, data={"event_type": "submission.status.change", "resource_id": "x"})
    assert answer.status_code == 415 and answer.json()["code"] == "webhook_refused" and "Content-Type" in answer.json()
    assert not ProlificWebhookEvent.objects.exists()


@pytest.mark.parametrize(
    "change, status, named",
    [
        (
            lambda h, b: ({**h, "X-Prolific-Request-Signature": "AAAA" + h["X-Prolific-Request-Signature"][4:]}, b),
            403,
            "X-Prolific-Request-Signature",
        ),
        (lambda h, b: (h, b.replace(b"RETURNED", b"APPROVED")), 403, "X-Prolific-Request-Signature"),
        (
            lambda h, b: ({k: v for k, v in h.items() if k != "X-Prolific-Request-Signature"}, b),
            400,
            "X-Prolific-Request-Signature",
        ),
        (lambda h, b: ({**h, "X-Prolific-Request-Signature": "\u00e9t\u00e9"}, b), 403, "X-Prolific-Request-Signature"),
        (
            lambda h, b: ({k: v for k, v in h.items() if k != "X-Prolific-Request-Timestamp"}, b),
            400,
            "X-Prolific-Request-Timestamp",
        ),
        (lambda h, b: ({k: v for k, v in h.items() if k != "X-Event-ID"}, b), 400, "X-Event-ID"),
        (lambda h, b: ({**h, "X-Timestamp": "soon"}, b), 400, "X-Timestamp"),
    ],
)
def test_a_tampered_or_incomplete_request_is_refused_naming_the_header_and_nothing_is_stored(
    prolific, researcher, client, subscribed, change, status, named
):
    study = _study()
    link = _published(study, researcher)
    sid = _submission(prolific, link, "target")
    _arrive(study, link, "target", sid)
    headers, body = prolific.signed(_event(prolific, sid, "target", C.RETURNED))
    answer = _hostile(client, *change(headers, body))
    assert answer.status_code == status, answer.content
    assert named in answer.json()["detail"]
    assert not ProlificWebhookEvent.objects.exists() and not ProlificSubmission.objects.exists()


def test_a_stale_timestamp_is_refused_even_with_a_valid_signature(prolific, researcher, client, subscribed, settings):
    study = _study()
    link = _published(study, researcher)
    sid = _submission(prolific, link, "replay")
    event = _event(prolific, sid, "replay", C.RETURNED)
    old = time.time() - settings.PROLIFIC_WEBHOOK_TOLERANCE_SECONDS - 60
    answer = _hostile(client, *prolific.signed(event, request_time=old))
    assert answer.status_code == 400
    problems = answer.json()["X-Prolific-Request-Timestamp"]
    assert "PROLIFIC_WEBHOOK_TOLERANCE_SECONDS" in problems[0] and answer.json()["code"] == "webhook_refused"
    ahead = _hostile(client, *prolific.signed(event, request_time=time.time() + 3600))
    assert ahead.status_code == 400 and not ProlificWebhookEvent.objects.exists()


@pytest.mark.parametrize(
    "body, named",
    [
        (b"{not json", "body"),
        (b"\xff\xfe\x00", "body"),
        (b"[1, 2]", "body"),
        (b'{"resource_id": "abc"}', "event_type"),
        (b'{"event_type": "submission.status.change", "resource_id": "abc"}', "status"),
        (b'{"event_type": "submission.status.change", "status": "RETURNED"}', "resource_id"),
        (b'{"event_type": "submission.status.change", "resource_id": {"$gt": ""}, "status": "X"}', "resource_id"),
        (b'{"event_type": "submission.status.change", "resource_id": "a", "status": "' + b"X" * 41 + b'"}', "status"),
    ],
)
def test_a_signed_body_that_is_not_an_event_is_refused_naming_the_field(prolific, client, subscribed, body, named):
    headers, raw = prolific.signed(Event("evt-bad", {}, int(time.time())), body=body)
    answer = _hostile(client, headers, raw)
    assert answer.status_code == 400 and list(answer.json()) == ["code", "detail", named]
    assert not ProlificWebhookEvent.objects.exists()


def test_a_body_over_the_limit_is_refused_unread_naming_the_body(prolific, client, subscribed, settings):
    settings.PROLIFIC_WEBHOOK_MAX_BYTES = 1024
    payload = {"event_type": "submission.status.change", "resource_id": "a", "status": "RETURNED", "pad": "x" * 5000}
    headers, raw = prolific.signed(Event("evt-huge", payload, int(time.time())))
    answer = _hostile(client, headers, raw)
    assert answer.status_code == 400
    assert "body" in answer.json()["detail"] and "PROLIFIC_WEBHOOK_MAX_BYTES" in answer.json()["detail"]
    assert not ProlificWebhookEvent.objects.exists()


def test_without_a_saved_secret_every_event_is_refused_and_only_post_is_taken(prolific, client):
    event = Event("evt-1", {"event_type": "study.status.change", "resource_id": "a", "status": "ACTIVE"}, 1)
    prolific.hook_secret = "a-secret-this-server-never-saw"
    answer = _hostile(client, *prolific.signed(event))
    assert answer.status_code == 403 and "subscribe" in answer.json()["detail"]
    assert client.get(WEBHOOK).status_code == 405
    assert not ProlificWebhookEvent.objects.exists()


# --------------------------------------------------------------------------- bonuses, paid at most once


def _completed_with_bonus(prolific, researcher, study_kw=None):
    study = _study(n_items=3, annotators_per_item=1, max_items_per_annotator=None, **(study_kw or {}))
    link = _published(study, researcher)
    sid = prolific.add_submission(link.prolific_id, "alice", C.AWAITING_REVIEW)
    p = participation_consent(
        participation=participation_enter(study=study, pid="alice", prolific_study_id=link.prolific_id, session_id=sid)
    )
    while annotate_next(p) is not None:
        pass
    prolific_submissions_sync(study=study, user=researcher)
    return study, link, sid


def test_a_pay_call_that_times_out_is_made_once_and_settled_by_reading_prolific(
    prolific, researcher, token_saved, settings
):
    study, link, sid = _completed_with_bonus(prolific, researcher)
    settings.PROLIFIC_TIMEOUT_SECONDS = 1
    prolific.pay_latency = 2.5  # Prolific pays, but answers after the client gave up
    batch = prolific_bonus_preview(study=study, user=researcher, per_item="0.50", quota=0)
    with pytest.raises(ProlificError) as exc:
        prolific_bonus_pay(batch=batch, user=researcher)
    assert exc.value.kind == "unavailable"
    batch.refresh_from_db()
    assert batch.state == BonusState.UNCERTAIN and prolific.pay_calls == [batch.prolific_bonus_id]
    intent = ProlificBonusPayIntent.objects.get(batch=batch)
    assert intent.baseline == {sid: []} and intent.outcome == "unknown"
    prolific.pay_latency = 0
    for _ in range(2):  # a second click, a retry: refused, and never sent
        with pytest.raises(ProlificConflict):
            prolific_bonus_pay(batch=batch, user=researcher)
    result = prolific_bonus_reconcile(batch=batch, user=researcher)
    assert (result.shown, result.of, result.batch.state) == (1, 1, BonusState.PAID)
    assert len(prolific.pay_calls) == 1 and len(prolific.calls("POST", "/pay/")) == 1
    assert ProlificSubmission.objects.get(submission_id=sid).bonus_paid_cents == 150
    assert prolific_bonus_preview(study=study, user=researcher, per_item="0.50", quota=0).n_participants == 0


def test_an_asynchronous_payment_stays_uncertain_until_prolific_shows_it(prolific, researcher, token_saved, settings):
    study, link, sid = _completed_with_bonus(prolific, researcher)
    prolific.submissions[sid]["bonus_payments"] = [150]  # the same amount paid earlier, on Prolific's own pages
    prolific.pay_async = True  # Prolific pays minutes after taking the request
    settings.PROLIFIC_TIMEOUT_SECONDS = 1
    prolific.pay_latency = 2.5
    batch = prolific_bonus_preview(study=study, user=researcher, per_item="0.50", quota=0)
    with pytest.raises(ProlificError):
        prolific_bonus_pay(batch=batch, user=researcher)
    prolific.pay_latency = 0
    assert ProlificBonusPayIntent.objects.get(batch=batch).baseline == {sid: [150]}
    first = prolific_bonus_reconcile(batch=batch, user=researcher)
    assert first.batch.state == BonusState.UNCERTAIN and first.shown == 0 and "check again later" in first.note
    prolific.settle_payments()
    second = prolific_bonus_reconcile(batch=batch, user=researcher)
    assert second.batch.state == BonusState.PAID and second.shown == 1
    assert len(prolific.calls("POST", "/pay/")) == 1


def test_a_refused_pay_call_is_spent_so_the_batch_fails_and_a_new_preview_pays(prolific, researcher, token_saved):
    study, link, sid = _completed_with_bonus(prolific, researcher)
    batch = prolific_bonus_preview(study=study, user=researcher, per_item="0.50", quota=0)
    prolific.then(400, {"error": {"detail": "Insufficient funds."}}, match="/pay/")
    with pytest.raises(ProlificError) as exc:
        prolific_bonus_pay(batch=batch, user=researcher)
    assert exc.value.kind == "refused" and "Insufficient funds" in exc.value.message
    batch.refresh_from_db()
    assert batch.state == BonusState.FAILED and "preview again" in batch.error
    with pytest.raises(ProlificConflict):
        prolific_bonus_pay(batch=batch, user=researcher)
    again = prolific_bonus_preview(study=study, user=researcher, per_item="0.50", quota=0)
    assert prolific_bonus_pay(batch=again, user=researcher).state == BonusState.PAID
    assert prolific.pay_calls == [ProlificBonusBatch.objects.get(pk=again.pk).prolific_bonus_id]
    assert len(prolific.calls("POST", "/pay/")) == 2  # one per batch


def test_the_pay_intent_is_one_row_per_batch_so_a_batch_put_back_cannot_pay_twice(prolific, researcher, token_saved):
    study, link, sid = _completed_with_bonus(prolific, researcher)
    batch = prolific_bonus_preview(study=study, user=researcher, per_item="0.50", quota=0)
    prolific_bonus_pay(batch=batch, user=researcher)
    with pytest.raises(IntegrityError), transaction.atomic():
        ProlificBonusPayIntent.objects.create(batch=batch, prolific_bonus_id="another")
    # Even a batch forced back to its preview (a bug, a hand edit) is never sent twice.
    ProlificBonusBatch.objects.filter(pk=batch.pk).update(state=BonusState.PREVIEW)
    ProlificSubmission.objects.update(bonus_paid_cents=0)
    with pytest.raises(ProlificConflict):
        prolific_bonus_pay(batch=batch, user=researcher)
    assert len(prolific.calls("POST", "/pay/")) == 1


def test_reconciling_by_the_api_and_the_scheduled_sync(prolific, researcher, researcher_client, token_saved, settings):
    from prolific.tasks import prolific_sync_study_task

    study, link, sid = _completed_with_bonus(prolific, researcher)
    settings.PROLIFIC_TIMEOUT_SECONDS = 1
    prolific.pay_latency = 2.5
    batch = prolific_bonus_preview(study=study, user=researcher, per_item="0.50", quota=0)
    with pytest.raises(ProlificError):
        prolific_bonus_pay(batch=batch, user=researcher)
    prolific.pay_latency = 0
    url = reverse("api-prolific-bonus-reconcile", args=[study.slug, batch.pk])
    paid_batch = ProlificBonusBatch.objects.get(pk=batch.pk)
    assert paid_batch.state == BonusState.UNCERTAIN
    assert "uncertain payments found paid" in prolific_sync_study_task.apply(args=(study.pk,)).get()
    assert ProlificBonusBatch.objects.get(pk=batch.pk).state == BonusState.PAID
    answer = researcher_client.post(url, {}, content_type="application/json")
    assert answer.status_code == 409  # only an uncertain payment is checked
    assert len(prolific.calls("POST", "/pay/")) == 1


# --------------------------------------------------------------------------- a wrong address or token


def test_a_wrong_api_url_says_so_instead_of_prolific_is_failing(prolific, researcher, token_saved, settings):
    study = _study()
    settings.PROLIFIC_API_URL = prolific.base_url.replace("/api/v1/", "/wrong/")
    with pytest.raises(ProlificError) as exc:
        prolific_study_publish(study=study, user=researcher)
    assert exc.value.kind == "wrong_url"
    assert "PROLIFIC_API_URL" in exc.value.message and "PROLIFIC_API_URL" in exc.value.what_to_do
    assert "failing" not in str(exc.value)


def test_an_address_nothing_answers_at_names_the_setting(prolific, researcher, token_saved, settings):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    settings.PROLIFIC_API_URL = f"http://127.0.0.1:{port}/api/v1/"
    settings.PROLIFIC_MAX_ATTEMPTS = 2
    with pytest.raises(ProlificError) as exc:
        prolific_study_publish(study=_study(), user=researcher)
    assert exc.value.kind == "unreachable"
    assert f"127.0.0.1:{port}" in exc.value.message and "PROLIFIC_API_URL" in exc.value.message
    assert "failing" not in exc.value.message


def test_a_wrong_token_or_address_says_so_and_the_api_answers_409_settings_to_fix(
    prolific, researcher, researcher_client, settings
):
    prolific_token_save(user=researcher, token="not-the-token")
    study = _study()
    answer = researcher_client.post(
        reverse("api-prolific-publish", args=[study.slug]), {}, content_type="application/json"
    )
    assert answer.status_code == 409 and answer.json()["code"] == "prolific_auth"  # settings to fix, not a wait
    assert "token" in answer.json()["detail"] and "failing" not in answer.json()["what_to_do"]
    settings.PROLIFIC_API_URL = prolific.base_url.replace("/api/v1/", "/elsewhere/")
    prolific_token_save(user=researcher, token=prolific.token)
    wrong = researcher_client.post(
        reverse("api-prolific-publish", args=[study.slug]), {}, content_type="application/json"
    )
    assert wrong.status_code == 409 and wrong.json()["code"] == "prolific_wrong_url"


def test_the_poll_and_an_event_agree_whichever_comes_first(prolific, researcher, client, subscribed):
    study = _study()
    link = _published(study, researcher)
    sid = _submission(prolific, link, "both")
    p = _arrive(study, link, "both", sid)
    assignment_next(participation=p)
    _event(prolific, sid, "both", C.RETURNED)
    prolific_submissions_sync(study=study, user=researcher)  # the poll sees it first
    assert prolific.deliver(_post(client)) == [200]  # the event's older time: nothing newer to apply
    sub = ProlificSubmission.objects.get(submission_id=sid)
    assert sub.status == C.RETURNED and sub.slots_released == 1
    assert ProlificWebhookEvent.objects.get().outcome == C.EVENT_STALE


def test_the_pages_subscribe_and_check_an_uncertain_payment(
    prolific, researcher, researcher_client, token_saved, settings
):
    page = researcher_client.get(reverse("prolific:token")).content.decode()
    assert 'id="prolific-webhooks"' in page and "https://studio.example.org/api/prolific/webhook/" in page
    researcher_client.post(reverse("prolific:webhooks_subscribe"), {"confirm": "yes"})
    page = researcher_client.get(reverse("prolific:token")).content.decode()
    assert "submission.status.change" in page and ProlificWebhookSubscription.objects.count() == 2

    study, link, sid = _completed_with_bonus(prolific, researcher)
    settings.PROLIFIC_TIMEOUT_SECONDS = 1
    prolific.pay_latency = 2.5
    batch = prolific_bonus_preview(study=study, user=researcher, per_item="0.50", quota=0)
    with pytest.raises(ProlificError):
        prolific_bonus_pay(batch=batch, user=researcher)
    prolific.pay_latency = 0
    detail = researcher_client.get(reverse("annotate:study_detail", args=[study.slug])).content.decode()
    assert 'id="prolific-reconcile"' in detail
    researcher_client.post(reverse("prolific:bonus_reconcile", args=[study.slug, batch.pk]))
    assert ProlificBonusBatch.objects.get(pk=batch.pk).state == BonusState.PAID
    assert len(prolific.calls("POST", "/pay/")) == 1
