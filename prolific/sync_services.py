"""What Prolific says of a study, stored: syncing its status and submissions
(``prolific_submissions_sync``), the one way a submission's status is stored whoever learnt it,
the poll or a webhook event (``submission_status_apply``: an older status never overwrites a
newer one; a participant who returned or timed out has their reserved slots released), and the
studies the scheduled sync visits (``prolific_links_to_sync``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db.models import Q
from django.utils import timezone

from annotate.errors import ReleaseRefused
from annotate.models import Participation, ParticipationState, Study
from annotate.studies.services import participation_release
from prolific import constants as C
from prolific.client import ProlificError
from prolific.models import ProlificStudyLink, ProlificSubmission
from prolific.publish_services import _link_required
from prolific.token_services import _note_error, prolific_client


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


def prolific_links_to_sync() -> list[int]:
    """Ids of studies linked to a published Prolific study that is not over."""
    return list(
        ProlificStudyLink.objects.exclude(prolific_id="")
        .filter(published_at__isnull=False)
        .exclude(status=C.STUDY_COMPLETED)
        .values_list("study_id", flat=True)
    )
