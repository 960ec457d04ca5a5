"""Reviewing a study's submissions on Prolific (``prolific_review``): approve, in bulk, those whose
participant completed the study; the screened out by the researcher's policy (approved, or
rejected where Prolific allows it); and reject a participant whose annotation a researcher's
review rejected. Each submission is claimed by a conditional update before its request
(``_claim``), so a retry or a concurrent click finds nothing left to do."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db.models import Q
from django.utils import timezone

from annotate.models import Participation, ParticipationState, Study
from annotate.review.selectors import participant_rejections
from prolific import constants as C
from prolific.client import ProlificClient, ProlificError
from prolific.errors import ProlificInvalid
from prolific.models import ProlificStudyLink, ProlificSubmission
from prolific.publish_services import _link_required
from prolific.sync_services import prolific_submissions_sync
from prolific.token_services import _clear_error, _note_error, prolific_client


@dataclass
class ReviewResult:
    approved: int = 0
    rejected: int = 0
    screened_out_approved: int = 0
    not_rejectable: int = 0
    waiting: int = 0  # awaiting review on Prolific but not finished in the product
    already_reviewed: int = 0
    rejected_in_review: int = 0  # of ``rejected``: a researcher rejected one of their annotations


def participation_rejectable(p: Participation) -> bool:
    """Prolific allows rejecting a participant who failed attention checks, not one screened
    out by the qualification test (they did what was asked)."""
    return p.state == ParticipationState.SCREENED_OUT and "attention" in (p.state_reason or "")


def _claim(submission_ids: list[int]) -> list[int]:
    """Claim submissions for review: only rows no one reviewed and no live request claimed."""
    now = timezone.now()
    stale = now - timedelta(seconds=C.CLAIM_STALE_SECONDS)
    claimed = []
    for pk in submission_ids:
        n = ProlificSubmission.objects.filter(
            Q(review_claimed_at__isnull=True) | Q(review_claimed_at__lt=stale),
            pk=pk,
            reviewed_action="",
        ).update(review_claimed_at=now)
        if n:
            claimed.append(pk)
    return claimed


def _unclaim(pks: list[int]) -> None:
    ProlificSubmission.objects.filter(pk__in=pks, reviewed_action="").update(review_claimed_at=None)


def prolific_review(
    *, study: Study, user: Any, policy: Any = C.POLICY_APPROVE, message: Any = None, sync: bool = True
) -> ReviewResult:
    """Approve, in bulk, every submission awaiting review whose participant completed the
    study; screened-out participants by ``policy``: approved (the default), or rejected with
    ``message`` (at least 100 characters) where Prolific allows it (failed attention checks;
    those screened out by the qualification are approved either way). A submission is
    reviewed once: each is claimed before the request, so a retry or a concurrent click finds
    nothing left to do. Submissions whose participant has not finished in the product wait.

    A participant with an annotation whose latest review decision is a rejection
    (annotate/review/) is rejected whatever the policy, with that review's message and
    category (the latest such review); one screened out by the qualification has no main
    annotations to reject."""
    message = _review_message(policy, message)
    link = _link_required(study)
    user = user if user is not None else link.created_by
    if sync:
        prolific_submissions_sync(study=study, user=user)
    result = ReviewResult()
    rejections = participant_rejections(study)  # participation id -> (message, category)
    approve, reject = _review_sorted(link, policy, rejections, result)
    by_pk = {s.pk: s for s in approve + reject}
    claimed = set(_claim(list(by_pk)))
    result.already_reviewed += len(by_pk) - len(claimed)
    approve = [s for s in approve if s.pk in claimed]
    reject = [s for s in reject if s.pk in claimed]
    client = prolific_client(study, user)
    if approve:
        _review_approve(client, link, approve, reject, policy, result)
    _review_reject(client, link, reject, rejections, message, result)
    _clear_error(link)
    return result


def _review_message(policy: Any, message: Any) -> Any:
    """The policy checked, and the rejection message it needs (the default when none is given)."""
    if policy not in C.POLICIES:
        raise ProlificInvalid("policy", f"choose one of {', '.join(C.POLICIES)}")
    if policy == C.POLICY_REJECT:
        message = C.DEFAULT_REJECT_MESSAGE if message in (None, "") else message
        if not isinstance(message, str):
            raise ProlificInvalid("message", "must be text")
        message = message.strip()
        if not (C.REJECT_MESSAGE_MIN_LENGTH <= len(message) <= C.REJECT_MESSAGE_MAX_LENGTH):
            raise ProlificInvalid(
                "message",
                f"Prolific needs a rejection message of {C.REJECT_MESSAGE_MIN_LENGTH} to "
                f"{C.REJECT_MESSAGE_MAX_LENGTH} characters (got {len(message)})",
            )
    return message


def _review_sorted(
    link: ProlificStudyLink, policy: Any, rejections: dict[int, tuple[str, str]], result: ReviewResult
) -> tuple[list[ProlificSubmission], list[ProlificSubmission]]:
    """The submissions awaiting review, sorted into those to approve and those to reject; the
    ones reviewed already and those whose participant has not finished are counted."""
    approve: list[ProlificSubmission] = []
    reject: list[ProlificSubmission] = []
    awaiting = link.submissions.filter(status=C.AWAITING_REVIEW).select_related("participation")
    for sub in awaiting:
        if sub.reviewed_action:
            result.already_reviewed += 1
            continue
        p = sub.participation
        if p is None or p.state not in (ParticipationState.COMPLETED, ParticipationState.SCREENED_OUT):
            result.waiting += 1
            continue
        if p.pk in rejections:
            reject.append(sub)
        elif p.state == ParticipationState.SCREENED_OUT and policy == C.POLICY_REJECT and participation_rejectable(p):
            reject.append(sub)
        else:
            approve.append(sub)
    return approve, reject


def _review_approve(
    client: ProlificClient,
    link: ProlificStudyLink,
    approve: list[ProlificSubmission],
    reject: list[ProlificSubmission],
    policy: Any,
    result: ReviewResult,
) -> None:
    """One bulk approval; on failure every claimed submission is given back."""
    try:
        client.submissions_bulk_approve(link.prolific_id, [s.submission_id for s in approve])
    except ProlificError as exc:
        _unclaim([s.pk for s in approve + reject])
        _note_error(link, exc)
        raise
    now = timezone.now()
    for s in approve:
        # Every submission to approve has a participation here (checked when sorted above).
        screened = s.participation is not None and s.participation.state == ParticipationState.SCREENED_OUT
        note = "screened out; approved by policy" if screened else "completed"
        if screened and policy == C.POLICY_REJECT:
            note = "screened out by the qualification: Prolific does not allow rejecting it, so approved"
            result.not_rejectable += 1
        ProlificSubmission.objects.filter(pk=s.pk).update(
            reviewed_action=C.REVIEW_APPROVE, reviewed_at=now, status=C.APPROVED, status_at=now, review_note=note
        )
        result.screened_out_approved += int(screened)
        result.approved += 1


def _review_reject(
    client: ProlificClient,
    link: ProlificStudyLink,
    reject: list[ProlificSubmission],
    rejections: dict[int, tuple[str, str]],
    message: Any,
    result: ReviewResult,
) -> None:
    """One rejection per submission, with its review's message and category (or the policy's);
    on failure the ones not yet rejected are given back."""
    for i, s in enumerate(reject):
        reviewed = rejections.get(s.participation_id) if s.participation_id is not None else None
        reject_message, category = reviewed or (message, C.REJECTION_CATEGORY_FAILED_CHECK)
        note = "screened out for failed attention checks; rejected by policy"
        if reviewed:
            note = f"an annotation rejected in review ({category})"
        try:
            client.submission_transition(
                s.submission_id,
                {"action": "REJECT", "message": reject_message, "rejection_category": category},
            )
        except ProlificError as exc:
            _unclaim([r.pk for r in reject[i:]])
            _note_error(link, exc)
            raise
        ProlificSubmission.objects.filter(pk=s.pk).update(
            reviewed_action=C.REVIEW_REJECT,
            reviewed_at=timezone.now(),
            status=C.REJECTED,
            status_at=timezone.now(),
            review_note=note,
        )
        result.rejected += 1
        result.rejected_in_review += int(bool(reviewed))
