"""Celery tasks of the Prolific integration: the scheduler's sync of every linked, active
study (celery beat, every PROLIFIC_SYNC_SECONDS), one task per study. The poll stays the
reconciler beside the webhooks: whatever an event missed, the next sync brings in; and it checks
on Prolific any bonus payment left without a clear answer."""

from __future__ import annotations

import logging

from celery import shared_task

logger = logging.getLogger(__name__)


@shared_task(name="prolific.sync_all")
def prolific_sync_all_task() -> int:
    """Queue a sync of every study linked to a published Prolific study that is not over."""
    from prolific.sync_services import prolific_links_to_sync

    study_ids = prolific_links_to_sync()
    for study_id in study_ids:
        prolific_sync_study_task.delay(study_id)
    return len(study_ids)


@shared_task(name="prolific.sync_study")
def prolific_sync_study_task(study_id: int) -> str:
    """Sync one study with the token of whoever linked it. Returns early when the study or its
    link is gone; a failure is stored on the link (shown on the study page), not retried here:
    the next scheduled sync tries again."""
    from annotate.models import Study
    from prolific.bonus_services import prolific_bonus_reconcile_pending
    from prolific.client import ProlificError
    from prolific.models import ProlificStudyLink
    from prolific.sync_services import prolific_submissions_sync

    study = Study.objects.filter(pk=study_id).first()
    if study is None:
        return "gone"
    if not ProlificStudyLink.objects.filter(study=study).exclude(prolific_id="").exists():
        return "not linked"
    try:
        result = prolific_submissions_sync(study=study)
    except ProlificError as exc:
        logger.warning("Prolific sync of study %s failed: %s", study.slug, exc)
        return f"failed: {exc.kind}"
    # Payments without a clear answer are checked on Prolific (read, never paid again).
    settled = prolific_bonus_reconcile_pending(study=study)
    stop = _stop_for_target(study)
    return (
        f"synced {result.seen} submissions, released {result.released_slots} slots"
        + (f", {settled} uncertain payments found paid" if settled else "")
        + (", stopped at the target width" if stop == "stopped" else "")
    )


def _stop_for_target(study) -> str:
    """The sync as the reconciler of a stop at the target width that did not get through."""
    from prolific.allocation import prolific_study_stop_for_target
    from prolific.client import ProlificError

    try:
        return prolific_study_stop_for_target(study=study)
    except ProlificError as exc:
        logger.warning("Stopping Prolific study of %s at its target width failed: %s", study.slug, exc)
        return f"failed: {exc.kind}"


@shared_task(name="prolific.stop_for_target")
def prolific_stop_for_target_task(study_id: int) -> str:
    """Close the linked Prolific study of a study that reached its target interval width
    (prolific/allocation.py). Returns early when the study is gone; a failure is stored on the
    link and the next scheduled sync tries again."""
    from annotate.models import Study

    study = Study.objects.filter(pk=study_id).first()
    if study is None:
        return "gone"
    return _stop_for_target(study)
