"""Reads of the Prolific integration: a researcher's token state, a study's link, its
submissions beside the product's participants, its log, its bonus batches."""

from __future__ import annotations

from collections import Counter
from typing import Any

from django.conf import settings
from django.db.models import QuerySet

from annotate.models import ParticipationState, Study
from prolific import constants as C
from prolific.errors import ProlificInvalid
from prolific.models import (
    ProlificBonusBatch,
    ProlificCredential,
    ProlificRequest,
    ProlificStudyLink,
    ProlificSubmission,
    ProlificWebhookEvent,
    ProlificWebhookSubscription,
)
from prolific.publish_services import prolific_draft
from prolific.review_services import participation_rejectable


def prolific_token_state(user: Any) -> dict[str, Any]:
    """Whether a token is saved (and its last four characters), and whether
    PROLIFIC_API_TOKEN is set as the fallback. Never the token."""
    credential = ProlificCredential.objects.filter(user=user).first() if user is not None and user.pk else None
    return {
        "saved": credential is not None,
        "last4": credential.last4 if credential else "",
        "saved_at": credential.saved_at if credential else None,
        "from_env": bool(settings.PROLIFIC_API_TOKEN),
        "usable": credential is not None or bool(settings.PROLIFIC_API_TOKEN),
    }


def prolific_link_get(study: Study) -> ProlificStudyLink | None:
    return ProlificStudyLink.objects.filter(study=study).first()


def prolific_submission_list(study: Study) -> QuerySet[ProlificSubmission]:
    return (
        ProlificSubmission.objects.filter(link__study=study)
        .select_related("participation")
        .order_by("first_seen_at", "pk")
    )


def prolific_request_list(study: Study) -> QuerySet[ProlificRequest]:
    return ProlificRequest.objects.filter(study=study).order_by("-at", "-pk")


def prolific_bonus_batch_list(study: Study) -> QuerySet[ProlificBonusBatch]:
    return ProlificBonusBatch.objects.filter(link__study=study).order_by("-created_at", "-pk")


def prolific_submission_row(s: ProlificSubmission) -> dict[str, Any]:
    p = s.participation
    return {
        "submission_id": s.submission_id,
        "participant_id": s.participant_id,
        "prolific_status": s.status,
        "product_state": p.state if p is not None else "",
        "product_state_reason": p.state_reason if p is not None else "",
        "slots_released": s.slots_released,
        "reviewed_action": s.reviewed_action,
        "reviewed_at": s.reviewed_at,
        "review_note": s.review_note,
        "bonus_paid_cents": s.bonus_paid_cents,
    }


def prolific_review_counts(study: Study) -> dict[str, int]:
    """What a review would do now (from the last sync): completed to approve, screened out
    (and of them, rejectable under the reject policy), waiting for the product."""
    counts: Counter[str] = Counter()
    for s in prolific_submission_list(study).filter(status=C.AWAITING_REVIEW, reviewed_action=""):
        p = s.participation
        if p is None or p.state not in (ParticipationState.COMPLETED, ParticipationState.SCREENED_OUT):
            counts["waiting"] += 1
        elif p.state == ParticipationState.COMPLETED:
            counts["completed"] += 1
        else:
            counts["screened_out"] += 1
            counts["rejectable"] += int(participation_rejectable(p))
    return {k: counts[k] for k in ("completed", "screened_out", "rejectable", "waiting")}


def prolific_panel(
    study: Study, user: Any, *, base_url: str | None = None, rows: int = 200, log_rows: int = 30
) -> dict[str, Any]:
    link = prolific_link_get(study)
    draft, draft_problem = None, ""
    if link is None or not link.prolific_id:
        try:
            draft = prolific_draft(study=study, base_url=base_url)
        except ProlificInvalid as exc:
            draft_problem = exc.message
    submissions = list(prolific_submission_list(study)[:rows])
    status_counts = Counter(ProlificSubmission.objects.filter(link__study=study).values_list("status", flat=True))
    return {
        "link": link if link is not None and link.prolific_id else None,
        "token": prolific_token_state(user),
        "draft": draft,
        "draft_problem": draft_problem,
        "submissions": [prolific_submission_row(s) for s in submissions],
        "submissions_total": sum(status_counts.values()),
        "status_counts": sorted(status_counts.items()),
        "review": prolific_review_counts(study),
        "batches": list(prolific_bonus_batch_list(study)[:10]),
        "log": list(prolific_request_list(study)[:log_rows]),
        "policies": C.POLICIES,
        "default_message": C.DEFAULT_REJECT_MESSAGE,
    }


def prolific_webhook_state(*, base_url: str | None = None) -> dict[str, Any]:
    """This server's webhook address, the subscriptions made from the product, and how many
    events were received, by what became of them."""
    from prolific.webhooks import webhook_target_url

    subscriptions = list(ProlificWebhookSubscription.objects.all())
    return {
        "target_url": webhook_target_url(base_url),
        "subscriptions": [
            {
                "workspace_id": s.workspace_id,
                "event_type": s.event_type,
                "subscription_id": s.subscription_id,
                "target_url": s.target_url,
                "confirmed_at": s.confirmed_at,
                "created_at": s.created_at,
            }
            for s in subscriptions
        ],
        "events": dict(Counter(ProlificWebhookEvent.objects.values_list("outcome", flat=True))),
    }
