"""The Prolific workflows: save a token, publish a study (draft, then PUBLISH), sync its
submissions (releasing the slots of those who left), review (approve the completed, the
screened out by the researcher's policy), and pay bonuses by a rule after a preview.

Requests to Prolific are never made inside a database transaction: each exchange is logged on
the study as it happens (``ProlificRequest``), and what must happen once (a review, a payment)
is claimed by a conditional update first, so a retry or a second click finds it taken."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from annotate.errors import ReleaseRefused
from annotate.links import default_base_url, prolific_entry_url
from annotate.models import Annotation, ItemRole, Participation, ParticipationState, Study, StudyItem
from annotate.participation.allocation import is_dynamic
from annotate.participation.selectors import study_terms
from annotate.review.selectors import participant_rejections
from annotate.studies.services import participation_release, study_update
from core.app_errors import Conflict, InvalidInput
from core.secret_masking import secret_register
from prolific import constants as C
from prolific.client import Exchange, ProlificClient, ProlificError
from prolific.crypto import TokenUnreadable, token_decrypt, token_encrypt
from prolific.models import (
    BonusState,
    ProlificBonusBatch,
    ProlificBonusPayIntent,
    ProlificCredential,
    ProlificRequest,
    ProlificStudyLink,
    ProlificSubmission,
)


class ProlificInvalid(InvalidInput):
    """A value the product refuses; ``field`` names it, ``problem`` says what is wrong (400)."""

    def __init__(self, field: str, problem: str):
        super().__init__(fields={field: problem})
        self.field = field
        self.problem = problem


class ProlificConflict(Conflict):
    """The study is not in a state for this (not published, already paid, ...): a 409."""

    code = "prolific_state"


class ProlificNotReady(ProlificInvalid):
    """A well-formed request that the state of the study or of this server refuses (no main
    items, no payment per item yet, no public https address for webhooks): a 409 naming the
    setting to change first."""

    status = 409
    code = "prolific_not_ready"


# --------------------------------------------------------------------------- tokens


def prolific_token_save(*, user: Any, token: Any) -> ProlificCredential:
    """Save (or replace) ``user``'s token, encrypted; only its last four characters are kept
    in the clear, to say which token is saved."""
    if not isinstance(token, str):
        raise ProlificInvalid("token", "must be text")
    token = token.strip()
    if not token:
        raise ProlificInvalid("token", "paste the API token created in Prolific's settings")
    if len(token) > C.TOKEN_MAX_LENGTH or any(ch.isspace() or ord(ch) < 33 or ord(ch) > 126 for ch in token):
        raise ProlificInvalid(
            "token", f"a Prolific token is at most {C.TOKEN_MAX_LENGTH} printable characters without spaces"
        )
    secret_register(token)  # masked by value in every log line and error report from now on
    credential, _ = ProlificCredential.objects.update_or_create(
        user=user, defaults={"token_encrypted": token_encrypt(token), "last4": token[-4:], "saved_at": timezone.now()}
    )
    return credential


def prolific_token_clear(*, user: Any) -> bool:
    deleted, _ = ProlificCredential.objects.filter(user=user).delete()
    return bool(deleted)


def prolific_token_for(user: Any) -> str:
    """The token a request on ``user``'s behalf uses: theirs, else PROLIFIC_API_TOKEN."""
    credential = ProlificCredential.objects.filter(user=user).first() if user is not None and user.pk else None
    if credential is not None:
        try:
            token = token_decrypt(credential.token_encrypted)
        except TokenUnreadable as exc:
            raise ProlificError("token_unreadable", str(exc)) from None
        secret_register(token)
        return token
    if settings.PROLIFIC_API_TOKEN:
        return settings.PROLIFIC_API_TOKEN
    raise ProlificError("no_token", "No Prolific API token is saved.")


def prolific_client(study: Study | None, user: Any) -> ProlificClient:
    """A client with ``user``'s token (theirs, else PROLIFIC_API_TOKEN); every exchange is
    logged on ``study`` when there is one (the workspace's webhook set-up has none)."""

    def log(exchange: Exchange) -> None:
        if study is None:
            return
        ProlificRequest.objects.create(
            study=study,
            method=exchange.method,
            path=exchange.path,
            attempt=exchange.attempt,
            status_code=exchange.status_code,
            request_excerpt=exchange.request_excerpt,
            response_excerpt=exchange.response_excerpt,
            error=exchange.error,
            seconds=exchange.seconds,
        )

    return ProlificClient(
        token=prolific_token_for(user),
        base_url=settings.PROLIFIC_API_URL,
        timeout=settings.PROLIFIC_TIMEOUT_SECONDS,
        max_attempts=settings.PROLIFIC_MAX_ATTEMPTS,
        retry_base=settings.PROLIFIC_RETRY_BASE_SECONDS,
        retry_max=settings.PROLIFIC_RETRY_MAX_SECONDS,
        on_exchange=log,
    )


def _note_error(link: ProlificStudyLink | None, exc: ProlificError) -> None:
    if link is not None and link.pk:
        ProlificStudyLink.objects.filter(pk=link.pk).update(last_error=str(exc)[:1000])


def _clear_error(link: ProlificStudyLink) -> None:
    if link.last_error:
        ProlificStudyLink.objects.filter(pk=link.pk).update(last_error="")
        link.last_error = ""


# --------------------------------------------------------------------------- publishing


@dataclass
class Draft:
    """The numbers of a Prolific draft for a study, and the body sent to Prolific."""

    main_items: int
    k: int
    items_per_annotator: int
    places: int
    estimated_minutes: int
    reward_cents: int
    external_study_url: str
    body: dict[str, Any]
    warnings: list[str] = field(default_factory=list)

    @property
    def reward(self) -> str:
        return f"{self.reward_cents / 100:.2f}"


def prolific_draft(*, study: Study, base_url: str | None = None) -> Draft:
    """What publishing would send. The estimated time and the reward are the study's terms
    (``annotate.participation.selectors.study_terms``), the very numbers the consent page states: N items (main
    items and the attention checks a participant may meet) and the qualification items at the
    longer of the minimum seconds and the kind's typical time, plus the training examples; the
    reward = payment per item × N. Places = ceil(main items × k ÷ main items per annotator) (k:
    the most annotators per item under dynamic k and active selection),
    where main items per annotator is the fewest a participant is given in full
    (N − the most checks among them), so the places are enough to reach k. The entry URL carries
    Prolific's placeholders. Refuses (naming the setting) a study that has no main items or no
    payment per item."""
    main_items = StudyItem.objects.filter(study=study, role=ItemRole.MAIN).count()
    if main_items == 0:
        raise ProlificNotReady("items", "the study has no main items to annotate")
    if study.payment_per_item is None or study.payment_per_item <= 0:
        raise ProlificNotReady(
            "payment_per_item", "set a payment per item in the study's settings first (it gives the reward)"
        )
    terms = study_terms(study)
    # Dynamic k and active selection: places for the most annotators an item may get; places
    # nobody takes are not paid for once the Prolific study is stopped (by the product at a
    # target width: prolific/allocation.py; otherwise by the researcher on Prolific).
    k = (
        study.max_annotators_per_item
        if is_dynamic(study.allocation_policy) and study.max_annotators_per_item
        else study.annotators_per_item
    )
    per_annotator = max(1, min(terms["n_items"] - terms["n_checks"], main_items))
    places = math.ceil(main_items * k / per_annotator)
    minutes = terms["expected_minutes"]
    reward_cents = terms["pay_cents"]
    base = (base_url or settings.PROLIFIC_SITE_URL or default_base_url()).rstrip("/")
    url = prolific_entry_url(base, study.slug)
    warnings = []
    if "://127.0.0.1" in base or "://localhost" in base:
        warnings.append(
            f"The study URL points at {base}, which participants cannot reach: set PROLIFIC_SITE_URL "
            "or open this page at the server's public address."
        )
    body = {
        "name": study.name[:120],
        "internal_name": f"{study.slug} (round {study.round})"[:120],
        "description": (
            f"Read short how-to procedures and judge them ({terms['n_items']} item{'s' if terms['n_items'] != 1 else ''}, "
            f"at least {study.min_seconds} seconds each). You will read the guidelines first"
            f"{', practise on examples' if study.training_enabled else ''}"
            f"{' and pass a short qualification test' if study.qualification_enabled else ''}."
        ),
        "external_study_url": url,
        "prolific_id_option": "url_parameters",
        "completion_codes": [
            {
                "code": study.completion_code,
                "code_type": C.CODE_COMPLETED,
                "actions": [{"action": C.ACTION_MANUALLY_REVIEW}],
            },
            {
                "code": study.screened_out_code,
                "code_type": C.CODE_SCREENED_OUT,
                "actions": [{"action": C.ACTION_MANUALLY_REVIEW}],
            },
        ],
        "total_available_places": places,
        "estimated_completion_time": minutes,
        "reward": reward_cents,
        "device_compatibility": ["desktop"],
    }
    return Draft(main_items, k, per_annotator, places, minutes, reward_cents, url, body, warnings)


def _link_required(study: Study) -> ProlificStudyLink:
    link = ProlificStudyLink.objects.filter(study=study).exclude(prolific_id="").first()
    if link is None:
        raise ProlificConflict("This study has no Prolific draft yet: publish it first.")
    return link


def prolific_study_publish(
    *, study: Study, user: Any, base_url: str | None = None, relink: bool = False
) -> ProlificStudyLink:
    """Create the Prolific draft of ``study`` (not yet published: ``prolific_study_publish_now``
    does that on request) and link it: the study's Prolific id is set, so the entry checks
    STUDY_ID. A study already linked is refused unless ``relink`` (its draft is gone on
    Prolific); two concurrent publishes create one draft."""
    draft = prolific_draft(study=study, base_url=base_url)
    existing = ProlificStudyLink.objects.filter(study=study).first()
    if existing is not None:
        if existing.prolific_id and not relink:
            raise ProlificConflict(f"This study is already linked to Prolific study {existing.prolific_id}.")
        in_flight = not existing.prolific_id and existing.created_at > timezone.now() - timedelta(
            seconds=C.CLAIM_STALE_SECONDS
        )
        if in_flight:
            raise ProlificConflict("A draft for this study is being created right now.")
        if existing.bonus_batches.filter(state__in=[BonusState.PAID, BonusState.UNCERTAIN, BonusState.PAYING]).exists():
            raise ProlificConflict("This study's Prolific link has bonus payments on record; it cannot be relinked.")
        existing.delete()
    try:
        with transaction.atomic():
            link = ProlificStudyLink.objects.create(
                study=study,
                name=draft.body["name"],
                external_study_url=draft.external_study_url,
                places=draft.places,
                reward_cents=draft.reward_cents,
                estimated_minutes=draft.estimated_minutes,
                items_per_annotator=draft.items_per_annotator,
                created_by=user if user is not None and user.pk else None,
            )
    except IntegrityError:
        raise ProlificConflict("A draft for this study is being created right now.") from None
    try:
        answer = prolific_client(study, user).study_create(draft.body)
        prolific_id = answer.get("id")
        if not isinstance(prolific_id, str) or not prolific_id:
            raise ProlificError("malformed", "Prolific's new study has no id.")
    except ProlificError:
        link.delete()
        raise
    link.prolific_id = prolific_id[:100]
    link.status = str(answer.get("status") or C.STUDY_UNPUBLISHED)[:40]
    link.save(update_fields=["prolific_id", "status"])
    study_update(study=study, prolific_study_id=link.prolific_id)
    return link


def prolific_study_publish_now(*, study: Study, user: Any) -> ProlificStudyLink:
    """The PUBLISH transition of the linked draft: participants can start. Sent once: the
    link is claimed first (``published_at`` set, status ``PUBLISHING``) by a conditional update,
    so a second click while the first one's request is in flight is refused; a failure gives the
    claim back. A claim left by a process that died mid-request is taken over after
    CLAIM_STALE_SECONDS when Prolific (or the link) still says the study is not published."""
    link = _link_required(study)
    user = user if user is not None else link.created_by
    now = timezone.now()
    stale = now - timedelta(seconds=C.CLAIM_STALE_SECONDS)
    claimable = Q(published_at__isnull=True) | Q(
        status__in=[C.STUDY_PUBLISHING, C.STUDY_UNPUBLISHED], published_at__lt=stale
    )
    claimed = ProlificStudyLink.objects.filter(claimable, pk=link.pk).update(
        published_at=now, status=C.STUDY_PUBLISHING
    )
    if not claimed:
        link.refresh_from_db()
        if link.status == C.STUDY_PUBLISHING:
            raise ProlificConflict("This study is being published on Prolific right now.")
        raise ProlificConflict(
            f"This study was already published on Prolific ({link.published_at:%Y-%m-%d %H:%M} UTC)."
        )
    previous_status = link.status
    try:
        answer = prolific_client(study, user).study_transition(link.prolific_id, "PUBLISH")
    except ProlificError as exc:
        ProlificStudyLink.objects.filter(pk=link.pk, published_at=now).update(published_at=None, status=previous_status)
        link.refresh_from_db()
        _note_error(link, exc)
        raise
    link.published_at = now
    link.status = str(answer.get("status") or C.STUDY_ACTIVE)[:40]
    link.last_error = ""
    link.save(update_fields=["published_at", "status", "last_error"])
    return link


# --------------------------------------------------------------------------- sync


@dataclass
class SyncResult:
    seen: int = 0
    new: int = 0
    changed: int = 0
    released_participants: int = 0
    released_slots: int = 0
    skipped_malformed: int = 0
    study_status: str = ""


def _text(value: Any, limit: int = 100) -> str | None:
    if not isinstance(value, str) or not value or len(value) > limit:
        return None
    return value


def prolific_submissions_sync(*, study: Study, user: Any = None) -> SyncResult:
    """Read the study's status and every submission from Prolific, store each one's status
    beside the product's participant, and release the reserved slots of participants who
    returned the study or timed out. ``user`` is whose token to use (the link's creator when
    None, as the scheduler does)."""
    link = _link_required(study)
    user = user if user is not None else link.created_by
    result = SyncResult()
    read_at = timezone.now()  # what is read below held at least since now: older news never wins
    try:
        client = prolific_client(study, user)
        remote = client.study_get(link.prolific_id)
        rows = client.study_submissions(link.prolific_id, max_pages=C.SUBMISSION_PAGES_MAX)
    except ProlificError as exc:
        _note_error(link, exc)
        raise
    result.study_status = str(remote.get("status") or link.status)[:40]
    known = {s.submission_id: s for s in link.submissions.all()}
    participations = {
        p.annotator.pid.lower(): p for p in Participation.objects.filter(study=study).select_related("annotator")
    }
    for row in rows:
        submission_id = _text(row.get("id"))
        participant_id = _text(row.get("participant_id") or row.get("participant"))
        status = _text(row.get("status"), 40)
        if submission_id is None or participant_id is None or status is None:
            result.skipped_malformed += 1
            continue
        result.seen += 1
        participation = participations.get(participant_id.lower())
        sub = known.get(submission_id)
        if sub is None:
            sub, created = ProlificSubmission.objects.get_or_create(
                link=link,
                submission_id=submission_id,
                defaults={
                    "participant_id": participant_id,
                    "status": status,
                    "status_at": read_at,
                    "participation": participation,
                    "started_at": _text(row.get("started_at"), 40) or "",
                },
            )
            result.new += int(created)
            if created:
                left, released = _submission_status_follow_up(sub, LEARNT_BY_SYNC)
                result.released_participants += int(left)
                result.released_slots += released
                continue
        if participation is not None and sub.participation_id != participation.pk:
            ProlificSubmission.objects.filter(pk=sub.pk).update(participation=participation)
            sub.participation = participation
        applied = submission_status_apply(submission=sub, status=status, at=read_at, learnt_by=LEARNT_BY_SYNC)
        result.changed += int(applied.changed)
        result.released_participants += int(applied.left)
        result.released_slots += applied.released_slots
    link_status_apply(link=link, status=result.study_status, at=read_at)
    link.refresh_from_db(fields=["status"])
    result.study_status = link.status
    link.last_synced_at = timezone.now()
    link.last_error = ""
    link.save(update_fields=["last_synced_at", "last_error"])
    return result


def _status_newer(status: str, at: Any) -> Q:
    """Rows whose known status is older than ``status`` at ``at``: none known yet, an earlier
    time, or the same time and a status no further along (SUBMISSION_STATUS_RANK)."""
    rank = C.SUBMISSION_STATUS_RANK.get(status, 0)
    not_further = [s for s, r in C.SUBMISSION_STATUS_RANK.items() if r <= rank]
    return Q(status_at__isnull=True) | Q(status_at__lt=at) | Q(status_at=at, status__in=not_further)


def link_status_apply(*, link: ProlificStudyLink, status: str, at: Any) -> bool:
    """The study's status as of ``at``, unless a newer one is known (one conditional update)."""
    if not status:
        return False
    return bool(
        ProlificStudyLink.objects.filter(_status_newer(status, at), pk=link.pk).update(status=status, status_at=at)
    )


# Who learnt a submission's status, as a released participant's reason says.
LEARNT_BY_SYNC = "the sync with Prolific"
LEARNT_BY_WEBHOOK = "Prolific's webhook event"


@dataclass
class StatusApplied:
    stored: bool = False  # the status was newer than the one known, and is stored
    changed: bool = False  # ... and differs from it
    left: bool = False  # the participant left (returned, timed out) and was released here
    released_slots: int = 0


def submission_status_apply(*, submission: ProlificSubmission, status: str, at: Any, learnt_by: str) -> StatusApplied:
    """The one way a submission's Prolific status is stored, whoever learnt it (``learnt_by``,
    said in a released participant's reason: the poll, as of the time its read began; a
    webhook event, as of the event's time): by a conditional update
    that never lets an older status overwrite a newer one. What follows a new status is done
    at once: a status decided on Prolific is never reviewed here, and a participant who
    returned or timed out has their reserved slots released."""
    previous = submission.status
    updated = ProlificSubmission.objects.filter(_status_newer(status, at), pk=submission.pk).update(
        status=status, status_at=at, updated_at=timezone.now()
    )
    if not updated:
        return StatusApplied()
    submission.status, submission.status_at = status, at
    left, released = _submission_status_follow_up(submission, learnt_by)
    return StatusApplied(stored=True, changed=previous != status, left=left, released_slots=released)


def _submission_status_follow_up(sub: ProlificSubmission, learnt_by: str) -> tuple[bool, int]:
    """What a submission's status asks of the product; returns whether its participant was
    released here (they left) and how many reserved slots that freed."""
    status = sub.status
    if status in C.DECIDED_STATUSES and not sub.reviewed_action:
        ProlificSubmission.objects.filter(pk=sub.pk, reviewed_action="").update(
            reviewed_action=C.REVIEW_ON_PROLIFIC,
            reviewed_at=timezone.now(),
            review_note=f"{status} on Prolific"[:300],
        )
    participation = sub.participation
    if status not in C.LEFT_STATUSES or participation is None:
        return False, 0
    participation.refresh_from_db(fields=["state"])
    if participation.state in (
        ParticipationState.COMPLETED,
        ParticipationState.SCREENED_OUT,
        ParticipationState.RETURNED,
    ):
        return False, 0
    how = "timed out" if status == C.TIMED_OUT else "returned"
    try:
        released = participation_release(
            participation=participation, reason=f"{how} on Prolific; slots released by {learnt_by}"
        )
    except ReleaseRefused:  # released (or finished) since it was read: nothing left to release
        return False, 0
    ProlificSubmission.objects.filter(pk=sub.pk).update(slots_released=sub.slots_released + released)
    return True, released


# --------------------------------------------------------------------------- review


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
    link = _link_required(study)
    user = user if user is not None else link.created_by
    if sync:
        prolific_submissions_sync(study=study, user=user)
    result = ReviewResult()
    approve: list[ProlificSubmission] = []
    reject: list[ProlificSubmission] = []
    rejections = participant_rejections(study)  # participation id -> (message, category)
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
    by_pk = {s.pk: s for s in approve + reject}
    claimed = set(_claim(list(by_pk)))
    result.already_reviewed += len(by_pk) - len(claimed)
    approve = [s for s in approve if s.pk in claimed]
    reject = [s for s in reject if s.pk in claimed]
    client = prolific_client(study, user)
    if approve:
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
    _clear_error(link)
    return result


# --------------------------------------------------------------------------- bonuses


def _money(value: Any, field_name: str) -> Decimal:
    problem = ProlificInvalid(field_name, "an amount such as 0.10 (at most two decimals)")
    if isinstance(value, bool) or not isinstance(value, (str, int, Decimal)) or len(str(value)) > 20:
        raise problem
    try:
        amount = Decimal(str(value).strip())
        if not amount.is_finite() or amount != amount.quantize(Decimal("0.01")):
            raise problem
    except (InvalidOperation, ValueError, ArithmeticError):
        raise problem from None
    if not (Decimal("0.01") <= amount <= Decimal(C.BONUS_MAX_PER_PARTICIPANT)):
        raise ProlificInvalid(field_name, f"between 0.01 and {C.BONUS_MAX_PER_PARTICIPANT}")
    return amount


def _count(value: Any, field_name: str, maximum: int = 1_000_000) -> int:
    if isinstance(value, bool):
        raise ProlificInvalid(field_name, "a whole number")
    try:
        number = int(str(value).strip()) if isinstance(value, (str, int)) and len(str(value)) <= 9 else None
    except ValueError:
        number = None
    if number is None or not (0 <= number <= maximum):
        raise ProlificInvalid(field_name, f"a whole number from 0 to {maximum}")
    return number


def prolific_bonus_preview(*, study: Study, user: Any, per_item: Any, quota: Any = 0) -> ProlificBonusBatch:
    """A bonus batch by the rule "``per_item`` for every main item annotated beyond ``quota``"
    for each participant who completed the study and has no paid bonus yet: who gets how
    much and the total, stored, not paid. A preview that pays no one is returned unsaved (its
    ``pk`` None): there is nothing to pay, and repeated previews leave no empty batches behind."""
    amount = _money(per_item, "per_item")
    quota_n = _count(quota, "quota")
    link = _link_required(study)
    rows = []
    subs = (
        link.submissions.filter(participation__state=ParticipationState.COMPLETED, bonus_paid_cents=0)
        .exclude(status__in=[C.RETURNED, C.TIMED_OUT, C.REJECTED])
        .select_related("participation")
    )
    for s in subs:
        items = Annotation.objects.filter(participation=s.participation, source=ItemRole.MAIN, excluded=False).count()
        beyond = max(0, items - quota_n)
        cents = int(min(amount * beyond, Decimal(C.BONUS_MAX_PER_PARTICIPANT)) * 100)
        if cents > 0:
            rows.append(
                {
                    "participant_id": s.participant_id,
                    "submission_id": s.submission_id,
                    "items": items,
                    "amount_cents": cents,
                }
            )
    batch = ProlificBonusBatch(
        link=link,
        rule={"per_item": str(amount), "quota": quota_n},
        rows=rows,
        n_participants=len(rows),
        total_cents=sum(r["amount_cents"] for r in rows),
        created_by=user if user is not None and user.pk else None,
    )
    if rows:
        batch.save()
    return batch


def prolific_bonus_pay(*, batch: ProlificBonusBatch, user: Any) -> ProlificBonusBatch:
    """Pay a previewed batch once. Prolific's pay call is not idempotent (a second call pays
    everyone again), so it is made at most once per batch, by a state machine and a row:

    1. the batch is claimed (``preview`` → ``paying``, a conditional update: a second click or a
       concurrent request is refused);
    2. the payment is set up on Prolific (its id stored, unique across batches) and each
       participant's bonuses as Prolific lists them are read;
    3. the intent (``ProlificBonusPayIntent``, one per batch) is committed with those lists;
    4. the pay call is made once. 2xx: ``paid``. No connection, or a clear refusal: nothing was
       paid, the batch is ``failed`` (preview again). No answer (a timeout) or a 5xx:
       ``uncertain``, settled by ``prolific_bonus_reconcile`` reading Prolific, never by paying
       again; every further payment of the study waits for it.

    A failure before step 3 gives the batch back (``preview``): nothing was paid."""
    now = timezone.now()
    claimed = ProlificBonusBatch.objects.filter(pk=batch.pk, state=BonusState.PREVIEW).update(
        state=BonusState.PAYING, claimed_at=now
    )
    batch.refresh_from_db()
    if not claimed:
        raise ProlificConflict(f"This bonus batch cannot be paid: it is {batch.get_state_display().lower()}.")
    link = batch.link
    study = link.study
    user = user if user is not None else link.created_by
    if not batch.rows:
        ProlificBonusBatch.objects.filter(pk=batch.pk).update(state=BonusState.PREVIEW)
        raise ProlificConflict("This bonus batch pays no one (no participant is beyond the quota).")
    ids = [r["submission_id"] for r in batch.rows]
    already = link.submissions.filter(submission_id__in=ids, bonus_paid_cents__gt=0).count()
    if link.bonus_batches.filter(state=BonusState.PAYING).exclude(pk=batch.pk).exists():
        ProlificBonusBatch.objects.filter(pk=batch.pk).update(state=BonusState.PREVIEW)
        raise ProlificConflict("Another bonus payment of this study is being made right now: wait for it.")
    if already or link.bonus_batches.filter(state=BonusState.UNCERTAIN).exists():
        ProlificBonusBatch.objects.filter(pk=batch.pk).update(
            state=BonusState.FAILED,
            error=(
                f"{already} of these participants were paid a bonus since this preview"
                if already
                else "another batch's payment is uncertain: check Prolific first"
            )
            + "; preview again.",
        )
        raise ProlificConflict(
            "Some of these participants were paid a bonus already (or a payment is uncertain): "
            "preview the bonuses again."
        )
    csv_bonuses = "".join(f"{r['participant_id']},{Decimal(r['amount_cents']) / 100:.2f}\n" for r in batch.rows)

    def give_back(exc: ProlificError) -> None:  # nothing was paid: the batch may be paid again
        ProlificBonusBatch.objects.filter(pk=batch.pk).update(
            state=BonusState.PREVIEW, prolific_bonus_id="", error=str(exc)[:1000]
        )
        _note_error(link, exc)

    try:
        client = prolific_client(study, user)
        setup = client.bonus_setup(link.prolific_id, csv_bonuses)
    except ProlificError as exc:
        give_back(exc)
        raise
    bonus_id = setup.get("id")
    if not isinstance(bonus_id, str) or not bonus_id or len(bonus_id) > 100:
        malformed = ProlificError("malformed", "Prolific's bonus payment has no usable id; nothing was paid.")
        give_back(malformed)
        raise malformed
    total = setup.get("total_amount")
    try:
        ProlificBonusBatch.objects.filter(pk=batch.pk).update(
            prolific_bonus_id=bonus_id,
            prolific_total_cents=int(total) if isinstance(total, (int, float)) and math.isfinite(total) else None,
        )
    except IntegrityError:  # that payment belongs to another batch already: never paid twice
        clash = ProlificError("malformed", f"Prolific answered a bonus payment id ({bonus_id}) used by another batch.")
        give_back(clash)
        raise clash from None
    # Each participant's bonuses as Prolific shows them now: after a payment without a clear
    # answer, what was added since says whether it was made.
    try:
        baseline = {r["submission_id"]: _bonus_amounts(client.submission_get(r["submission_id"])) for r in batch.rows}
    except ProlificError as exc:
        give_back(exc)
        raise
    # The intent, committed before the call: one row per batch, so the call is made at most once.
    try:
        intent = ProlificBonusPayIntent.objects.create(batch=batch, prolific_bonus_id=bonus_id, baseline=baseline)
    except IntegrityError:
        raise ProlificConflict(
            "This bonus batch's payment was already sent to Prolific; it is never sent again."
        ) from None
    try:
        client.bonus_pay(bonus_id)
    except ProlificError as exc:
        answered_2xx = exc.status_code is not None and 200 <= exc.status_code < 300
        if answered_2xx:  # Prolific took it (its answer's body aside)
            return _bonus_paid(batch, intent, exc.status_code, "")
        # Nothing reached Prolific (no connection) or it refused outright: not paid, and this
        # batch's one call is spent, so the researcher previews again.
        refused = exc.kind in ("unreachable", "auth", "not_found", "refused", "rate_limited", "wrong_url")
        ProlificBonusPayIntent.objects.filter(pk=intent.pk).update(
            answered_status=exc.status_code, outcome="refused" if refused else "unknown"
        )
        ProlificBonusBatch.objects.filter(pk=batch.pk).update(
            state=BonusState.FAILED if refused else BonusState.UNCERTAIN,
            error=(str(exc) + (" Nothing was paid; preview again." if refused else ""))[:1000],
        )
        _note_error(link, exc)
        raise
    return _bonus_paid(batch, intent, 200, "")


def _bonus_amounts(submission: dict[str, Any]) -> list[int]:
    """The bonus amounts (cents) Prolific lists on a submission (``bonus_payments``)."""
    amounts = submission.get("bonus_payments")
    if amounts is None:
        return []
    if not isinstance(amounts, list):
        raise ProlificError("malformed", "Prolific's submission has bonus_payments that are not a list.")
    out = []
    for a in amounts:
        value = a.get("amount") if isinstance(a, dict) else a
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ProlificError("malformed", "Prolific's submission lists a bonus that is not an amount.")
        out.append(int(round(value)))
    return out


def _bonus_paid(
    batch: ProlificBonusBatch, intent: ProlificBonusPayIntent, status_code: int | None, note: str
) -> ProlificBonusBatch:
    with transaction.atomic():
        ProlificBonusPayIntent.objects.filter(pk=intent.pk).update(
            answered_status=status_code if status_code is not None else intent.answered_status,
            outcome="paid",
            reconcile_note=note[:300],
        )
        ProlificBonusBatch.objects.filter(pk=batch.pk).update(state=BonusState.PAID, paid_at=timezone.now(), error="")
        for r in batch.rows:
            ProlificSubmission.objects.filter(link=batch.link, submission_id=r["submission_id"]).update(
                bonus_paid_cents=r["amount_cents"]
            )
    _clear_error(batch.link)
    batch.refresh_from_db()
    return batch


@dataclass
class ReconcileResult:
    batch: ProlificBonusBatch
    shown: int = 0  # participants whose bonus Prolific now shows
    of: int = 0
    note: str = ""


def prolific_bonus_reconcile(*, batch: ProlificBonusBatch, user: Any = None) -> ReconcileResult:
    """Settle a payment whose answer never came by reading Prolific, never by paying again:
    every participant of the batch is read (``GET submissions/<id>/``) and the bonuses Prolific
    lists now are compared with those it listed just before the one pay call. All shown: the
    batch is paid. None or some: it stays uncertain, saying so (Prolific pays within minutes, so
    a later check may find them; the researcher may also settle it by hand). A batch claimed by
    a process that died before its pay call (no intent) goes back to its preview; one that died
    after it is treated as uncertain."""
    batch.refresh_from_db()
    stale = batch.claimed_at is not None and batch.claimed_at < timezone.now() - timedelta(
        seconds=C.CLAIM_STALE_SECONDS
    )
    intent = ProlificBonusPayIntent.objects.filter(batch=batch).first()
    if batch.state == BonusState.PAYING and stale and intent is None:
        ProlificBonusBatch.objects.filter(pk=batch.pk, state=BonusState.PAYING).update(
            state=BonusState.PREVIEW, prolific_bonus_id="", error="the payment was never sent; pay again"
        )
        batch.refresh_from_db()
        return ReconcileResult(batch=batch, note="The payment was never sent to Prolific: the batch can be paid.")
    if not (batch.state == BonusState.UNCERTAIN or (batch.state == BonusState.PAYING and stale)) or intent is None:
        raise ProlificConflict(
            f"Only a payment without a clear answer is checked on Prolific; this batch is "
            f"{batch.get_state_display().lower()}."
        )
    link = batch.link
    user = user if user is not None else link.created_by
    client = prolific_client(link.study, user)
    shown = 0
    try:
        for r in batch.rows:
            before = Counter(intent.baseline.get(r["submission_id"], []))
            now_listed = Counter(_bonus_amounts(client.submission_get(r["submission_id"])))
            shown += int((now_listed - before)[r["amount_cents"]] > 0)
    except ProlificError as exc:
        _note_error(link, exc)
        raise
    of = len(batch.rows)
    checked = timezone.now()
    if shown == of:
        note = f"Prolific shows all {of} bonuses of this payment (checked {checked:%Y-%m-%d %H:%M} UTC)."
        ProlificBonusPayIntent.objects.filter(pk=intent.pk).update(reconciled_at=checked)
        return ReconcileResult(batch=_bonus_paid(batch, intent, None, note), shown=shown, of=of, note=note)
    note = f"Prolific shows {shown} of the {of} bonuses of this payment (checked {checked:%Y-%m-%d %H:%M} UTC). " + (
        "Prolific pays within minutes of the request: check again later, or settle it by hand after "
        "checking its bonus payments."
        if shown == 0
        else "Some were paid: settle it by hand after checking Prolific's bonus payments."
    )
    ProlificBonusPayIntent.objects.filter(pk=intent.pk).update(reconciled_at=checked, reconcile_note=note[:300])
    ProlificBonusBatch.objects.filter(pk=batch.pk).update(state=BonusState.UNCERTAIN, error=note[:1000])
    batch.refresh_from_db()
    return ReconcileResult(batch=batch, shown=shown, of=of, note=note)


def prolific_bonus_reconcile_pending(*, study: Study) -> int:
    """Check on Prolific every payment of the study still without a clear answer (the
    scheduled sync does this after each sync); returns how many were found paid."""
    found = 0
    stale = timezone.now() - timedelta(seconds=C.CLAIM_STALE_SECONDS)
    pending = ProlificBonusBatch.objects.filter(link__study=study).filter(
        Q(state=BonusState.UNCERTAIN) | Q(state=BonusState.PAYING, claimed_at__lt=stale)
    )
    for batch in pending:
        try:
            result = prolific_bonus_reconcile(batch=batch)
        except (ProlificError, ProlificConflict):
            continue
        found += int(result.batch.state == BonusState.PAID)
    return found


def prolific_bonus_resolve(*, batch: ProlificBonusBatch, paid: bool) -> ProlificBonusBatch:
    """Settle an uncertain payment after the researcher checked Prolific's bonus page: paid
    (its participants count as paid) or not paid (the batch stays unpaid; preview again)."""
    with transaction.atomic():
        locked = ProlificBonusBatch.objects.select_for_update().get(pk=batch.pk)
        if locked.state != BonusState.UNCERTAIN:
            raise ProlificConflict(
                f"Only an uncertain payment can be settled; this batch is {locked.get_state_display().lower()}."
            )
        if paid:
            locked.state, locked.paid_at, locked.error = BonusState.PAID, timezone.now(), ""
            for r in locked.rows:
                ProlificSubmission.objects.filter(link=locked.link, submission_id=r["submission_id"]).update(
                    bonus_paid_cents=r["amount_cents"]
                )
        else:
            locked.state, locked.error = BonusState.FAILED, "not paid, as checked on Prolific; preview again"
        locked.save(update_fields=["state", "paid_at", "error"])
    return locked


# --------------------------------------------------------------------------- the scheduler


def prolific_links_to_sync() -> list[int]:
    """Ids of studies linked to a published Prolific study that is not over."""
    return list(
        ProlificStudyLink.objects.exclude(prolific_id="")
        .filter(published_at__isnull=False)
        .exclude(status=C.STUDY_COMPLETED)
        .values_list("study_id", flat=True)
    )
