"""A study that reaches its target interval width (annotate/participation/allocation_services.py)
stops paying for places on Prolific: its linked Prolific study gets the STOP transition.

Prolific lets a published study's ``total_available_places`` be raised, never lowered, so the
places cannot simply be cut back; STOP closes the study to new participants, and places nobody
took are not paid for. Participants already working finish and are reviewed as usual. The
annotate side calls ``prolific_target_reached`` after the commit that stopped the study; it
queues ``prolific.stop_for_target``, and the scheduled sync calls the same service for a study
whose stop did not get through (a failure is kept on the link and shown on the study page)."""

from __future__ import annotations

from typing import Any

from annotate.models import Study
from prolific import constants as C
from prolific.client import ProlificError
from prolific.models import ProlificStudyLink

# Prolific statuses of a study that takes no new participants (STOP leads to AWAITING REVIEW).
CLOSED_STATUSES = (C.AWAITING_REVIEW, C.STUDY_COMPLETED)
ACTION_STOP = "STOP"


def _stoppable_link(study: Study) -> ProlificStudyLink | None:
    """The published Prolific study of ``study`` that still takes participants, if any."""
    link = ProlificStudyLink.objects.filter(study=study).exclude(prolific_id="").first()
    if link is None or link.published_at is None or link.status in CLOSED_STATUSES:
        return None
    return link


def prolific_study_stop_for_target(*, study: Study, user: Any = None) -> str:
    """Send STOP for the Prolific study of ``study`` once ``study`` has reached its target
    width. Returns what happened (``stopped``, or why nothing was sent); a failure is stored on
    the link (``last_error``) and raised, and the next sync tries again."""
    from prolific.token_services import prolific_client

    if study.target_reached_at is None:
        return "target not reached"
    link = _stoppable_link(study)
    if link is None:
        return "no open Prolific study"
    try:
        answer = prolific_client(study, user if user is not None else link.created_by).study_transition(
            link.prolific_id, ACTION_STOP
        )
    except ProlificError as exc:
        ProlificStudyLink.objects.filter(pk=link.pk).update(
            last_error=f"Stopping the study at its target width failed: {exc}"[:1000]
        )
        raise
    link.status = str(answer.get("status") or C.AWAITING_REVIEW)[:40]
    link.last_error = ""
    link.save(update_fields=["status", "last_error"])
    return "stopped"


def prolific_target_reached(study: Study) -> None:
    """The hook annotate calls after a study reached its target: queue the STOP when the study
    has a Prolific study that still takes participants."""
    if _stoppable_link(study) is None:
        return
    from prolific.tasks import prolific_stop_for_target_task

    prolific_stop_for_target_task.delay(study.pk)
