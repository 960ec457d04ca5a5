"""The Prolific integration against a scripted Prolific API server on 127.0.0.1: publishing a
draft and then the study, syncing submissions (slots of those who left released), reviewing
(bulk approve, the screened-out policy both ways, never twice), bonuses (preview, pay, never
twice), every error Prolific may answer and what the researcher is told, the token never
stored or shown in clear, the scheduled sync, and the panel on the study page."""

from __future__ import annotations

import logging
import threading
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection
from django.urls import reverse

from annotate.models import Assignment, AssignmentStatus, Participation, ParticipationState
from annotate.participation.reservations import assignment_next
from annotate.participation.services import participation_consent, participation_enter
from annotate.testing import annotate_next, study_make
from prolific import constants as C
from prolific.bonus_services import prolific_bonus_pay, prolific_bonus_preview
from prolific.client import ProlificError, retry_after_seconds
from prolific.errors import ProlificConflict, ProlificInvalid
from prolific.models import (
    BonusState,
    ProlificBonusBatch,
    ProlificCredential,
    ProlificRequest,
    ProlificStudyLink,
    ProlificSubmission,
)
from prolific.publish_services import prolific_study_publish, prolific_study_publish_now
from prolific.review_services import prolific_review
from prolific.sync_services import prolific_submissions_sync
from prolific.token_services import prolific_token_save
from tests.scripted_prolific import ScriptedProlific

pytestmark = pytest.mark.django_db


@pytest.fixture
def prolific(settings):
    server = ScriptedProlific().start()
    settings.PROLIFIC_API_URL = server.base_url
    settings.PROLIFIC_API_TOKEN = ""
    settings.PROLIFIC_RETRY_BASE_SECONDS = 0.01
    settings.PROLIFIC_RETRY_MAX_SECONDS = 0.5
    settings.PROLIFIC_MAX_ATTEMPTS = 4
    settings.PROLIFIC_SITE_URL = "https://studio.example.org"
    yield server
    server.stop()


@pytest.fixture
def token_saved(prolific, researcher):
    prolific_token_save(user=researcher, token=prolific.token)
    return prolific.token


def _study(**kw):
    defaults: dict[str, Any] = dict(
        n_items=10, annotators_per_item=3, max_items_per_annotator=4, payment_per_item=Decimal("0.20"), min_seconds=0
    )
    defaults.update(kw)
    return study_make(**defaults)


def _published(study, researcher):
    prolific_study_publish(study=study, user=researcher)
    prolific_study_publish_now(study=study, user=researcher)
    study.refresh_from_db()
    return study.prolific_link


def _arrive(study, link, pid: str) -> Participation:
    p = participation_enter(study=study, pid=pid, prolific_study_id=link.prolific_id, session_id=f"sess-{pid}")
    return participation_consent(participation=p)


def _complete(study, link, pid: str) -> Participation:
    p = _arrive(study, link, pid)
    while annotate_next(p) is not None:
        pass
    p.refresh_from_db()
    assert p.state == ParticipationState.COMPLETED
    return p


# --------------------------------------------------------------------------- publishing


def test_publish_creates_a_draft_with_the_studys_numbers_and_placeholders_then_publishes_on_request(
    prolific, researcher, token_saved
):
    study = _study(min_seconds=60)
    link = prolific_study_publish(study=study, user=researcher)
    remote = prolific.studies[link.prolific_id]
    # places = ceil(10 items × k 3 ÷ 4 items per annotator) = 8
    assert remote["total_available_places"] == 8 == link.places
    # the consent page's time (study_terms): 4 items × max(60 s, the kind's typical 90 s) = 6 minutes
    assert remote["estimated_completion_time"] == 6
    assert remote["reward"] == 80  # 4 items × 0.20, in cents
    url = remote["external_study_url"]
    assert url.startswith(f"https://studio.example.org/a/{study.slug}/?")
    for placeholder in ("PROLIFIC_PID={{%PROLIFIC_PID%}}", "STUDY_ID={{%STUDY_ID%}}", "SESSION_ID={{%SESSION_ID%}}"):
        assert placeholder in url
    codes = {c["code_type"]: c for c in remote["completion_codes"]}
    assert codes["COMPLETED"]["code"] == study.completion_code
    assert codes["SCREENED_OUT"]["code"] == study.screened_out_code
    assert remote["prolific_id_option"] == "url_parameters"
    assert remote["status"] == "UNPUBLISHED" and link.published_at is None
    assert not prolific.calls("POST", "/transition/")
    study.refresh_from_db()
    assert study.prolific_study_id == link.prolific_id  # the entry now checks STUDY_ID

    link = prolific_study_publish_now(study=study, user=researcher)
    transition = prolific.calls("POST", f"studies/{link.prolific_id}/transition/")
    assert [c["body"] for c in transition] == [{"action": "PUBLISH"}]
    assert link.status == "ACTIVE" and link.published_at is not None
    with pytest.raises(ProlificConflict):
        prolific_study_publish_now(study=study, user=researcher)
    with pytest.raises(ProlificConflict):
        prolific_study_publish(study=study, user=researcher)
    assert len(prolific.studies) == 1


def test_places_are_k_when_each_annotator_takes_every_item(prolific, researcher, token_saved):
    study = _study(n_items=5, annotators_per_item=3, max_items_per_annotator=None)
    link = prolific_study_publish(study=study, user=researcher)
    assert link.places == 3 and link.items_per_annotator == 5 and link.reward_cents == 100


def test_publishing_without_a_payment_per_item_is_refused_naming_the_setting(prolific, researcher, token_saved):
    study = _study(payment_per_item=None)
    with pytest.raises(ProlificInvalid) as exc:
        prolific_study_publish(study=study, user=researcher)
    assert exc.value.field == "payment_per_item"
    assert not prolific.requests and not ProlificStudyLink.objects.exists()


def test_a_study_gone_on_prolific_says_relink_and_can_be_relinked(prolific, researcher, token_saved):
    study = _study()
    link = _published(study, researcher)
    del prolific.studies[link.prolific_id]
    with pytest.raises(ProlificError) as exc:
        prolific_submissions_sync(study=study, user=researcher)
    assert exc.value.kind == "not_found" and "relink" in exc.value.what_to_do
    link.refresh_from_db()
    assert "relink" in link.last_error
    fresh = prolific_study_publish(study=study, user=researcher, relink=True)
    assert fresh.prolific_id != link.prolific_id and fresh.prolific_id in prolific.studies


def test_the_study_page_offers_to_relink_a_study_gone_on_prolific(prolific, researcher, researcher_client, token_saved):
    study = _study()
    link = _published(study, researcher)
    del prolific.studies[link.prolific_id]
    page = researcher_client.post(reverse("prolific:sync", args=[study.slug]), follow=True).content.decode()
    assert 'id="prolific-relink"' in page and "relink" in page
    researcher_client.post(reverse("prolific:publish", args=[study.slug]), {"relink": "yes"})
    fresh = ProlificStudyLink.objects.get(study=study)
    assert fresh.prolific_id != link.prolific_id and fresh.prolific_id in prolific.studies


# --------------------------------------------------------------------------- sync


def test_sync_stores_each_status_and_releases_the_slots_of_returned_and_timed_out_participants(
    prolific, researcher, token_saved
):
    study = _study(n_items=4, annotators_per_item=2, max_items_per_annotator=2)
    link = _published(study, researcher)
    done = _complete(study, link, "done")
    returned = _arrive(study, link, "returned")
    timed_out = _arrive(study, link, "timedout")
    working = _arrive(study, link, "working")
    for p in (returned, timed_out, working):
        assert assignment_next(participation=p) is not None  # each holds a reserved slot
    prolific.add_submission(link.prolific_id, "done", C.AWAITING_REVIEW)
    prolific.add_submission(link.prolific_id, "returned", C.RETURNED)
    prolific.add_submission(link.prolific_id, "timedout", C.TIMED_OUT)
    prolific.add_submission(link.prolific_id, "working", C.ACTIVE)
    prolific.add_submission(link.prolific_id, "paidalready", C.APPROVED)

    result = prolific_submissions_sync(study=study, user=researcher)
    assert (result.seen, result.new, result.released_participants, result.released_slots) == (5, 5, 2, 2)
    assert len(prolific.calls("GET", "/submissions/")) == 3  # pages of 2, followed by _links.next
    statuses = dict(ProlificSubmission.objects.values_list("participant_id", "status"))
    assert statuses == {
        "done": C.AWAITING_REVIEW,
        "returned": C.RETURNED,
        "timedout": C.TIMED_OUT,
        "working": C.ACTIVE,
        "paidalready": C.APPROVED,
    }
    for p in (returned, timed_out):
        p.refresh_from_db()
        assert p.state == ParticipationState.RETURNED
        assert not Assignment.objects.filter(participation=p, status=AssignmentStatus.RESERVED).exists()
        assert Assignment.objects.filter(participation=p, status=AssignmentStatus.RELEASED).count() == 1
    working.refresh_from_db()
    assert working.state == ParticipationState.ANNOTATING
    assert Assignment.objects.filter(participation=working, status=AssignmentStatus.RESERVED).count() == 1
    done.refresh_from_db()
    assert done.state == ParticipationState.COMPLETED
    linked = ProlificSubmission.objects.get(participant_id="done")
    assert linked.participation_id == done.pk
    assert ProlificSubmission.objects.get(participant_id="paidalready").reviewed_action == C.REVIEW_ON_PROLIFIC
    # A second sync releases nothing again.
    again = prolific_submissions_sync(study=study, user=researcher)
    assert (again.new, again.released_slots) == (0, 0)


def test_sync_skips_unreadable_rows_and_counts_them(prolific, researcher, token_saved):
    study = _study()
    link = _published(study, researcher)
    prolific.add_submission(link.prolific_id, "good", C.ACTIVE)
    prolific.submissions["bad"] = {"id": None, "study_id": link.prolific_id, "participant_id": ["x"], "status": 5}
    result = prolific_submissions_sync(study=study, user=researcher)
    assert (result.seen, result.skipped_malformed) == (1, 1)


# --------------------------------------------------------------------------- review


def _review_setup(prolific, researcher, *, gold=False):
    study = _study(
        n_items=2,
        annotators_per_item=3,
        max_items_per_annotator=None,
        **({"n_gold": 1, "gold_answers": [True], "qualification_pass": 1} if gold else {}),
    )
    link = _published(study, researcher)
    return study, link


def _screen_out_for_attention(p: Participation) -> None:
    """As annotate does after too many missed attention checks (the path itself is tested in
    annotate's own tests)."""
    Participation.objects.filter(pk=p.pk).update(
        state=ParticipationState.SCREENED_OUT,
        attention_failures=2,
        state_reason="failed 2 attention checks (allowed: 1)",
    )


def _fail_qualification(p: Participation) -> None:
    from annotate.participation.submissions import annotation_submit
    from annotate.testing import read_everything

    a = assignment_next(participation=p)
    assert a is not None
    read_everything(p, a)
    annotation_submit(
        participation=p, public_id=a.public_id, answer={"has_failure": False, "failures": [], "comments": ""}
    )
    p.refresh_from_db()
    assert p.state == ParticipationState.SCREENED_OUT and "qualification" in p.state_reason


def test_review_approves_the_completed_and_by_default_the_screened_out_in_bulk_and_never_twice(
    prolific, researcher, token_saved
):
    study, link = _review_setup(prolific, researcher)
    _complete(study, link, "alice")
    _complete(study, link, "bob")
    careless = _arrive(study, link, "careless")
    _screen_out_for_attention(careless)
    _arrive(study, link, "slow")  # still annotating: waits
    for pid in ("alice", "bob", "careless", "slow"):
        prolific.add_submission(link.prolific_id, pid, C.AWAITING_REVIEW)

    result = prolific_review(study=study, user=researcher)
    assert (result.approved, result.screened_out_approved, result.rejected, result.waiting) == (3, 1, 0, 1)
    bulk = prolific.calls("POST", "submissions/bulk-approve/")
    assert len(bulk) == 1 and len(bulk[0]["body"]["submission_ids"]) == 3
    assert bulk[0]["body"]["study_id"] == link.prolific_id
    assert {pid: prolific.status_of(pid) for pid in ("alice", "bob", "careless", "slow")} == {
        "alice": C.APPROVED,
        "bob": C.APPROVED,
        "careless": C.APPROVED,
        "slow": C.AWAITING_REVIEW,
    }

    again = prolific_review(study=study, user=researcher)
    assert (again.approved, again.rejected) == (0, 0)
    assert len(prolific.calls("POST", "submissions/bulk-approve/")) == 1


def test_reject_policy_rejects_failed_attention_checks_with_a_reason_but_approves_the_qualification_screened(
    prolific, researcher, token_saved
):
    study, link = _review_setup(prolific, researcher, gold=True)
    careless = _arrive(study, link, "careless")
    _screen_out_for_attention(careless)
    unqualified = _arrive(study, link, "unqualified")
    _fail_qualification(unqualified)
    for pid in ("careless", "unqualified"):
        prolific.add_submission(link.prolific_id, pid, C.AWAITING_REVIEW)

    with pytest.raises(ProlificInvalid) as exc:
        prolific_review(study=study, user=researcher, policy=C.POLICY_REJECT, message="too short")
    assert exc.value.field == "message"
    with pytest.raises(ProlificInvalid) as exc:
        prolific_review(study=study, user=researcher, policy="ban")
    assert exc.value.field == "policy"

    result = prolific_review(study=study, user=researcher, policy=C.POLICY_REJECT)
    assert (result.rejected, result.approved, result.not_rejectable) == (1, 1, 1)
    assert prolific.status_of("careless") == C.REJECTED
    assert prolific.status_of("unqualified") == C.APPROVED
    reject = [c for c in prolific.calls("POST", "/transition/") if c["body"].get("action") == "REJECT"]
    assert len(reject) == 1
    assert reject[0]["body"]["rejection_category"] == "FAILED_CHECK"
    assert len(reject[0]["body"]["message"]) >= 100
    assert ProlificSubmission.objects.get(participant_id="careless").reviewed_action == C.REVIEW_REJECT


def test_a_review_after_a_failure_sends_each_decision_once(prolific, researcher, token_saved):
    study, link = _review_setup(prolific, researcher)
    _complete(study, link, "alice")
    prolific.add_submission(link.prolific_id, "alice", C.AWAITING_REVIEW)
    for _ in range(4):
        prolific.then(503, {"error": {"detail": "down"}}, match="bulk-approve")
    with pytest.raises(ProlificError) as exc:
        prolific_review(study=study, user=researcher)
    assert exc.value.kind == "unavailable" and "try again later" in exc.value.what_to_do
    assert prolific.status_of("alice") == C.AWAITING_REVIEW
    # The claim was given back: the retry approves, once.
    assert prolific_review(study=study, user=researcher).approved == 1
    assert prolific_review(study=study, user=researcher).approved == 0
    assert prolific.status_of("alice") == C.APPROVED


def test_a_submission_claimed_by_another_click_is_not_sent_again(prolific, researcher, token_saved):
    study, link = _review_setup(prolific, researcher)
    _complete(study, link, "alice")
    _complete(study, link, "bob")
    for pid in ("alice", "bob"):
        prolific.add_submission(link.prolific_id, pid, C.AWAITING_REVIEW)
    prolific_submissions_sync(study=study, user=researcher)
    from django.utils import timezone

    # The other click's request is in flight for alice: it claimed her a moment ago.
    ProlificSubmission.objects.filter(participant_id="alice").update(review_claimed_at=timezone.now())
    result = prolific_review(study=study, user=researcher, sync=False)
    assert (result.approved, result.already_reviewed) == (1, 1)
    assert prolific.calls("POST", "bulk-approve")[0]["body"]["submission_ids"] == [
        ProlificSubmission.objects.get(participant_id="bob").submission_id
    ]


@pytest.mark.sqlite  # concurrent requests under SQLite's one writer
@pytest.mark.django_db(transaction=True)
def test_two_concurrent_reviews_approve_each_submission_once(prolific, researcher, token_saved):
    if connection.vendor == "sqlite":
        connection.close()
    study, link = _review_setup(prolific, researcher)
    for pid in ("alice", "bob", "carol"):
        _complete(study, link, pid)
        prolific.add_submission(link.prolific_id, pid, C.AWAITING_REVIEW)
    prolific_submissions_sync(study=study, user=researcher)
    results, errors = [], []
    barrier = threading.Barrier(2)

    def click():
        try:
            barrier.wait()
            results.append(prolific_review(study=study, user=researcher, sync=False))
        except Exception as exc:  # pragma: no cover - shown in the assert
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=click) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
    assert sum(r.approved for r in results) == 3
    sent = [sid for c in prolific.calls("POST", "bulk-approve") for sid in c["body"]["submission_ids"]]
    assert len(sent) == len(set(sent)) == 3


# --------------------------------------------------------------------------- bonuses


def test_bonus_preview_shows_who_and_the_total_then_pays_once(prolific, researcher, token_saved):
    study = _study(n_items=6, annotators_per_item=1, max_items_per_annotator=None)
    link = _published(study, researcher)
    late = _arrive(study, link, "late")  # in before the study filled (a new one would be turned away)
    _complete(study, link, "alice")  # takes all 6 items
    assignment_next(participation=late)  # nothing left for her: no completion for zero items
    late.refresh_from_db()
    for pid in ("alice", "late"):
        prolific.add_submission(link.prolific_id, pid, C.AWAITING_REVIEW)
    prolific_submissions_sync(study=study, user=researcher)

    with pytest.raises(ProlificInvalid) as exc:
        prolific_bonus_preview(study=study, user=researcher, per_item="0.001", quota=2)
    assert exc.value.field == "per_item"
    with pytest.raises(ProlificInvalid) as exc:
        prolific_bonus_preview(study=study, user=researcher, per_item="0.10", quota="-1")
    assert exc.value.field == "quota"

    batch = prolific_bonus_preview(study=study, user=researcher, per_item="0.10", quota=2)
    assert batch.n_participants == 1 and batch.total_cents == 40  # (6 - 2) items × 0.10
    assert batch.rows[0]["participant_id"] == "alice" and batch.rows[0]["items"] == 6
    assert not prolific.requests[-1]["path"].endswith("bonus-payments/")  # a preview asks Prolific nothing

    paid = prolific_bonus_pay(batch=batch, user=researcher)
    assert paid.state == BonusState.PAID and paid.prolific_total_cents == 40 + round(40 * 0.33)
    setup = prolific.calls("POST", "submissions/bonus-payments/")
    assert [c["body"] for c in setup] == [{"study_id": link.prolific_id, "csv_bonuses": "alice,0.40\n"}]
    assert prolific.pay_calls == [paid.prolific_bonus_id]
    assert ProlificSubmission.objects.get(participant_id="alice").bonus_paid_cents == 40

    with pytest.raises(ProlificConflict):
        prolific_bonus_pay(batch=batch, user=researcher)
    assert len(prolific.pay_calls) == 1
    # A new preview leaves out whoever was paid already.
    assert prolific_bonus_preview(study=study, user=researcher, per_item="0.10", quota=0).n_participants == 0


def test_a_payment_without_a_clear_answer_is_marked_uncertain_and_not_repeated(prolific, researcher, token_saved):
    study = _study(n_items=3, annotators_per_item=1, max_items_per_annotator=None)
    link = _published(study, researcher)
    _complete(study, link, "alice")
    prolific.add_submission(link.prolific_id, "alice", C.APPROVED)
    prolific_submissions_sync(study=study, user=researcher)
    batch = prolific_bonus_preview(study=study, user=researcher, per_item="0.50", quota=0)
    prolific.then(500, {"error": {"detail": "boom"}}, match="/pay/")
    with pytest.raises(ProlificError) as exc:
        prolific_bonus_pay(batch=batch, user=researcher)
    assert "before paying again" in exc.value.what_to_do
    assert len(prolific.calls("POST", "/pay/")) == 1  # never retried: Prolific's pay is not idempotent
    batch.refresh_from_db()
    assert batch.state == BonusState.UNCERTAIN
    with pytest.raises(ProlificConflict):
        prolific_bonus_pay(batch=batch, user=researcher)
    other = prolific_bonus_preview(study=study, user=researcher, per_item="0.50", quota=0)
    with pytest.raises(ProlificConflict):
        prolific_bonus_pay(batch=other, user=researcher)
    # Checked on Prolific: it was paid. Alice counts as paid; nobody is left to pay.
    from prolific.bonus_services import prolific_bonus_resolve

    settled = prolific_bonus_resolve(batch=batch, paid=True)
    assert settled.state == BonusState.PAID
    assert ProlificSubmission.objects.get(participant_id="alice").bonus_paid_cents == 150
    with pytest.raises(ProlificConflict):
        prolific_bonus_resolve(batch=settled, paid=False)
    assert prolific_bonus_preview(study=study, user=researcher, per_item="0.50", quota=0).n_participants == 0
    assert len(prolific.calls("POST", "/pay/")) == 1


def test_a_bonus_setup_without_an_id_pays_nothing_and_stays_payable(prolific, researcher, token_saved):
    study = _study(n_items=2, annotators_per_item=1, max_items_per_annotator=None)
    link = _published(study, researcher)
    _complete(study, link, "alice")
    prolific.add_submission(link.prolific_id, "alice", C.APPROVED)
    prolific_submissions_sync(study=study, user=researcher)
    batch = prolific_bonus_preview(study=study, user=researcher, per_item="0.50", quota=0)
    prolific.then(201, {"id": None, "total_amount": 100}, match="bonus-payments")
    with pytest.raises(ProlificError) as exc:
        prolific_bonus_pay(batch=batch, user=researcher)
    assert exc.value.kind == "malformed" and not prolific.calls("POST", "/pay/")
    batch.refresh_from_db()
    assert batch.state == BonusState.PREVIEW
    assert prolific_bonus_pay(batch=batch, user=researcher).state == BonusState.PAID


def test_an_uncertain_payment_found_unpaid_can_be_previewed_and_paid_again(
    prolific, researcher, researcher_client, token_saved
):
    study = _study(n_items=2, annotators_per_item=1, max_items_per_annotator=None)
    link = _published(study, researcher)
    _complete(study, link, "alice")
    prolific.add_submission(link.prolific_id, "alice", C.APPROVED)
    prolific_submissions_sync(study=study, user=researcher)
    batch = prolific_bonus_preview(study=study, user=researcher, per_item="0.50", quota=0)
    prolific.then(500, {}, match="/pay/")
    with pytest.raises(ProlificError):
        prolific_bonus_pay(batch=batch, user=researcher)
    page = researcher_client.get(reverse("annotate:study_detail", args=[study.slug])).content.decode()
    assert "it was not paid" in page
    url = reverse("prolific:bonus_resolve", args=[study.slug, batch.pk])
    assert researcher_client.post(url, {"paid": "no"}).status_code == 400  # no confirmation: nothing done
    researcher_client.post(url, {"paid": "no", "confirm": "yes"})
    batch.refresh_from_db()
    assert batch.state == BonusState.FAILED
    again = prolific_bonus_preview(study=study, user=researcher, per_item="0.50", quota=0)
    assert prolific_bonus_pay(batch=again, user=researcher).state == BonusState.PAID
    assert len(prolific.calls("POST", "/pay/")) == 2 and len(prolific.pay_calls) == 1  # the first one failed


# --------------------------------------------------------------------------- errors


def test_a_wrong_token_says_save_a_new_token(prolific, researcher):
    prolific_token_save(user=researcher, token="not-the-right-token-0000")
    with pytest.raises(ProlificError) as exc:
        prolific_study_publish(study=_study(), user=researcher)
    assert exc.value.kind == "auth" and exc.value.status_code == 401
    assert "save it again" in exc.value.what_to_do
    assert not ProlificStudyLink.objects.exists()  # nothing half-linked


def test_no_token_at_all_says_where_to_save_one(prolific, researcher):
    with pytest.raises(ProlificError) as exc:
        prolific_study_publish(study=_study(), user=researcher)
    assert exc.value.kind == "no_token" and "PROLIFIC_API_TOKEN" in exc.value.what_to_do


def test_the_environment_token_is_used_when_none_is_saved(prolific, researcher, settings):
    settings.PROLIFIC_API_TOKEN = prolific.token
    link = prolific_study_publish(study=_study(), user=researcher)
    assert link.prolific_id in prolific.studies


@pytest.mark.parametrize("retry_after", ["0", "-5", "soon", "1e999", "Wed, 21 Oct 2015 07:28:00 GMT"])
def test_429_with_an_odd_retry_after_is_retried_safely(prolific, researcher, token_saved, retry_after):
    prolific.then(429, {"error": {"detail": "slow down"}}, {"retry-after": retry_after}, match="studies/")
    link = prolific_study_publish(study=_study(), user=researcher)
    assert link.prolific_id in prolific.studies
    codes = list(ProlificRequest.objects.order_by("pk").values_list("status_code", flat=True))
    assert codes == [429, 201]


def test_a_429_asking_for_an_hour_stops_at_once_and_says_when_to_try(prolific, researcher, token_saved):
    prolific.then(429, {}, {"retry-after": "3600"}, match="studies/")
    with pytest.raises(ProlificError) as exc:
        prolific_study_publish(study=_study(), user=researcher)
    assert exc.value.kind == "rate_limited" and "60 minutes" in exc.value.message
    assert "60 minutes" in exc.value.what_to_do
    assert len(prolific.requests) == 1


def test_429_until_the_last_attempt_is_rate_limited(prolific, researcher, token_saved):
    for _ in range(4):
        prolific.then(429, {}, {"retry-after": "0"}, match="studies/")
    with pytest.raises(ProlificError) as exc:
        prolific_study_publish(study=_study(), user=researcher)
    assert exc.value.kind == "rate_limited" and len(prolific.requests) == 4


def test_500_then_recovery_succeeds_and_every_attempt_is_logged(prolific, researcher, token_saved):
    prolific.then(500, "<html>Internal Server Error</html>", match="studies/")
    prolific.then(502, "", match="studies/")
    link = prolific_study_publish(study=_study(), user=researcher)
    assert link.prolific_id
    log = list(ProlificRequest.objects.order_by("pk").values_list("status_code", "attempt"))
    assert log == [(500, 1), (502, 2), (201, 3)]


def test_5xx_every_time_says_prolific_is_failing(prolific, researcher, token_saved):
    for _ in range(4):
        prolific.then(500, {}, match="studies/")
    with pytest.raises(ProlificError) as exc:
        prolific_study_publish(study=_study(), user=researcher)
    assert exc.value.kind == "unavailable" and exc.value.what_to_do == "Prolific is failing; try again later."


@pytest.mark.parametrize("body", [b"{not json", b"[1, 2]", b'{"status": "UNPUBLISHED"}'])
def test_a_malformed_answer_is_a_clear_error(prolific, researcher, token_saved, body):
    prolific.then(201, body, match="studies/")
    with pytest.raises(ProlificError) as exc:
        prolific_study_publish(study=_study(), user=researcher)
    assert exc.value.kind == "malformed"
    assert not ProlificStudyLink.objects.exists()


def test_another_refusal_carries_prolifics_message(prolific, researcher, token_saved):
    prolific.then(400, {"error": {"detail": {"reward": ["Reward is below the minimum."]}}}, match="studies/")
    with pytest.raises(ProlificError) as exc:
        prolific_study_publish(study=_study(), user=researcher)
    assert exc.value.kind == "refused" and "below the minimum" in exc.value.message


def test_retry_after_reading():
    assert retry_after_seconds("2") == 2.0
    assert retry_after_seconds("-5") is None
    assert retry_after_seconds("soon") is None
    assert retry_after_seconds("nan") is None
    assert retry_after_seconds(None) is None
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT") is None  # in the past
    assert retry_after_seconds("Wed, 21 Oct 2015 07:28:10 GMT", now=1445412480.0) == pytest.approx(10.0)


# --------------------------------------------------------------------------- the token


def test_the_token_is_never_stored_logged_or_shown_in_clear(prolific, researcher, researcher_client, caplog):
    token = prolific.token
    researcher_client.post(reverse("prolific:token"), {"token": token})
    stored = ProlificCredential.objects.get(user=researcher)
    assert token not in stored.token_encrypted and stored.last4 == token[-4:]
    study = _study()
    with caplog.at_level(logging.DEBUG):
        link = _published(study, researcher)
        prolific.add_submission(link.prolific_id, "someone", C.ACTIVE)
        prolific_submissions_sync(study=study, user=researcher)
        prolific.then(401, {"error": {"detail": "Invalid token."}})
        with pytest.raises(ProlificError):
            prolific_submissions_sync(study=study, user=researcher)
    assert prolific.requests[0]["authorization"] == f"Token {token}"  # it was sent, to Prolific only
    with connection.cursor() as cursor:
        for table in (
            "prolific_prolificrequest",
            "prolific_prolificstudylink",
            "prolific_prolificsubmission",
            "prolific_prolificcredential",
        ):
            cursor.execute(f"SELECT * FROM {table}")
            assert token not in repr(cursor.fetchall()), table
        # Even a careless log line with the token in it is masked.
        logging.getLogger("prolific").warning("debugging with %s", token)
    assert token not in caplog.text and "debugging with ********" in caplog.text
    for url in (reverse("prolific:token"), reverse("annotate:study_detail", args=[study.slug])):
        page = researcher_client.get(url).content.decode()
        assert token not in page and f"…{token[-4:]}" in page


def test_log_lines_with_an_authorization_header_are_masked():
    from core.log_filters import SecretMaskingFilter

    record = logging.LogRecord(
        "x", logging.INFO, __file__, 1, "sent %s", ({"Authorization": "Token abc123secret"},), None
    )
    SecretMaskingFilter().filter(record)
    assert "abc123secret" not in record.getMessage() and "Token ********" in record.getMessage()


def test_a_token_saved_under_another_secret_key_asks_to_save_it_again(prolific, researcher, token_saved, settings):
    settings.SECRET_KEY = "another-secret-key-" + "x" * 40
    with pytest.raises(ProlificError) as exc:
        prolific_study_publish(study=_study(), user=researcher)
    assert exc.value.kind == "token_unreadable" and "save it again" in str(exc.value)


def test_the_token_page_refuses_a_bad_token_naming_the_field(researcher_client):
    response = researcher_client.post(reverse("prolific:token"), {"token": "has spaces in it"})
    assert response.status_code == 400 and b"token:" in response.content
    assert not ProlificCredential.objects.exists()


# --------------------------------------------------------------------------- the scheduler


def test_the_beat_schedule_syncs_every_linked_active_study(prolific, researcher, token_saved, settings):
    from config.celery import app
    from prolific.tasks import prolific_sync_all_task, prolific_sync_study_task

    entry = settings.CELERY_BEAT_SCHEDULE["prolific-sync"]
    assert entry["task"] == "prolific.sync_all"
    assert entry["schedule"].total_seconds() == settings.PROLIFIC_SYNC_SECONDS
    live = _study(name="Live")
    link = _published(live, researcher)
    p = _arrive(live, link, "leaver")
    assignment_next(participation=p)
    prolific.add_submission(link.prolific_id, "leaver", C.RETURNED)
    draft_only = _study(name="Draft only")
    prolific_study_publish(study=draft_only, user=researcher)
    app.conf.task_always_eager = True
    try:
        assert prolific_sync_all_task.apply().get() == 1  # the draft is not synced
    finally:
        app.conf.task_always_eager = False
    p.refresh_from_db()
    assert p.state == ParticipationState.RETURNED
    assert ProlificStudyLink.objects.get(study=live).last_synced_at is not None
    assert ProlificStudyLink.objects.get(study=draft_only).last_synced_at is None
    # Early returns: a study gone, a study not linked; a failure is kept on the link.
    assert prolific_sync_study_task.apply(args=(999999,)).get() == "gone"
    assert prolific_sync_study_task.apply(args=(_study(name="Unlinked").pk,)).get() == "not linked"
    prolific.then(401, {"error": {"detail": "Invalid token."}})
    assert prolific_sync_study_task.apply(args=(live.pk,)).get() == "failed: auth"
    assert "save it again" in ProlificStudyLink.objects.get(study=live).last_error


def test_serve_starts_the_scheduler_beside_the_worker(settings):
    from core.management.commands.serve import Command

    commands = Command.commands({"host": "127.0.0.1", "port": "8000", "concurrency": 1})
    assert set(commands) == {"web", "worker", "beat"}
    beat = commands["beat"]
    assert beat[1:6] == ["-m", "celery", "-A", "config", "beat"]
    schedule = beat[beat.index("--schedule") + 1]
    assert schedule.startswith(str(settings.VAR_DIR)) and (settings.VAR_DIR / "celery").is_dir()


# --------------------------------------------------------------------------- pages


def test_the_study_page_shows_the_prolific_panel_from_draft_to_participants(
    prolific, researcher, researcher_client, token_saved
):
    study = _study()
    url = reverse("annotate:study_detail", args=[study.slug])
    page = researcher_client.get(url).content.decode()
    assert 'id="prolific"' in page and 'id="draft-places">8<' in page and "Create the Prolific draft" in page
    assert "ending in …" in page

    response = researcher_client.post(reverse("prolific:publish", args=[study.slug]))
    assert response.status_code == 302
    link = ProlificStudyLink.objects.get(study=study)
    page = researcher_client.get(url).content.decode()
    assert link.prolific_id in page and "draft, not published" in page

    # Publishing asks for confirmation; without it nothing happens.
    assert researcher_client.post(reverse("prolific:publish_now", args=[study.slug])).status_code == 400
    assert not prolific.calls("POST", "/transition/")
    researcher_client.post(reverse("prolific:publish_now", args=[study.slug]), {"confirm": "yes"})
    assert prolific.studies[link.prolific_id]["status"] == "ACTIVE"

    _complete(study, link, "alice")
    prolific.add_submission(link.prolific_id, "alice", C.AWAITING_REVIEW)
    prolific.add_submission(link.prolific_id, "ghost", C.RETURNED)
    researcher_client.post(reverse("prolific:sync", args=[study.slug]))
    page = researcher_client.get(url).content.decode()
    assert 'id="prolific-participants"' in page and "AWAITING REVIEW" in page and "never arrived" in page
    assert "1 completed" in page and 'id="prolific-log"' in page

    researcher_client.post(reverse("prolific:review", args=[study.slug]), {"policy": "approve", "confirm": "yes"})
    assert prolific.status_of("alice") == C.APPROVED
    response = researcher_client.post(
        reverse("prolific:bonus_preview", args=[study.slug]), {"per_item": "0.05", "quota": "1"}
    )
    assert response.status_code == 302
    page = researcher_client.get(url).content.decode()
    assert 'id="prolific-bonus-batches"' in page and "Previewed, not paid" in page
    assert (
        researcher_client.post(
            reverse("prolific:bonus_preview", args=[study.slug]), {"per_item": "lots", "quota": "1"}
        ).status_code
        == 400
    )


def test_a_prolific_failure_is_shown_on_the_study_page_with_what_to_do(
    prolific, researcher, researcher_client, token_saved
):
    study = _study()
    _published(study, researcher)
    for _ in range(4):
        prolific.then(500, {})
    response = researcher_client.post(reverse("prolific:sync", args=[study.slug]), follow=True)
    page = response.content.decode()
    assert "Prolific is failing; try again later." in page and 'id="prolific-error"' in page


def test_prolific_pages_need_the_researcher_role(client, prolific, django_user_model):
    study = _study()
    assert client.get(reverse("prolific:token")).status_code == 302
    assert client.post(reverse("prolific:sync", args=[study.slug])).status_code == 302
    nobody = django_user_model.objects.create_user(username="nobody", password="nobody-Password-1")
    client.force_login(nobody)
    assert client.get(reverse("prolific:token")).status_code == 403
    assert client.post(reverse("prolific:sync", args=[study.slug])).status_code == 403


# --------------------------------------------------------------------------- the command


def test_the_command_publishes_syncs_reviews_and_pays(prolific, researcher, token_saved):
    from io import StringIO

    from django.core.management import CommandError, call_command

    study = _study(n_items=3, annotators_per_item=1, max_items_per_annotator=None)

    def run(*args):
        out = StringIO()
        call_command("prolific", *args, stdout=out, stderr=StringIO())
        return out.getvalue()

    assert "3 places" not in run("publish", study.slug, "--dry-run") and not prolific.requests
    out = run("publish", study.slug, "--user", researcher.username)
    link = ProlificStudyLink.objects.get(study=study)
    assert link.prolific_id in out and "1 places" in out
    with pytest.raises(CommandError, match="--yes"):
        run("publish-now", study.slug, "--user", researcher.username)
    run("publish-now", study.slug, "--user", researcher.username, "--yes")
    _complete(study, link, "alice")
    prolific.add_submission(link.prolific_id, "alice", C.AWAITING_REVIEW)
    assert "Synced 1 submissions" in run("sync", study.slug, "--user", researcher.username)
    assert "Approved 1" in run("review", study.slug, "--user", researcher.username, "--yes")
    out = run("bonus", study.slug, "--user", researcher.username, "--per-item", "0.05")
    batch_id = ProlificBonusBatch.objects.get().pk
    assert "alice\t3 items\t0.15" in out
    assert "Paid 1" in run("bonus", study.slug, "--user", researcher.username, "--pay", str(batch_id), "--yes")
    with pytest.raises(CommandError, match="cannot be paid"):
        run("bonus", study.slug, "--user", researcher.username, "--pay", str(batch_id), "--yes")
    # Without --user a linked study is synced with the token of whoever linked it (as the
    # scheduler does); publishing with no saved or environment token says where to save one.
    assert "Synced 1 submissions" in run("sync", study.slug)
    with pytest.raises(CommandError, match="PROLIFIC_API_TOKEN"):
        run("publish", _study(name="Another").slug)
    with pytest.raises(CommandError, match="per_item"):
        run("bonus", study.slug, "--user", researcher.username, "--per-item", "lots")


def test_annotate_never_imports_prolific():
    """Layering: prolific → annotate; annotate shows the panel through its registry only."""
    import re
    from pathlib import Path

    from django.conf import settings

    pattern = re.compile(r"^\s*(from|import)\s+prolific\b", re.MULTILINE)
    offenders = [
        str(path)
        for path in (Path(settings.BASE_DIR) / "annotate").rglob("*.py")
        if pattern.search(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []
