"""Celery tasks of the annotate app: ids in, one service call, early return when there is nothing to do."""

from celery import shared_task


def _mark_failed(self, exc, task_id, args, kwargs, einfo) -> None:
    from django.utils import timezone

    from annotate.models import StudyImport
    from mining.models import CorpusImportStatus as ImportStatus

    study_import_id = args[0] if args else kwargs.get("study_import_id")
    StudyImport.objects.filter(pk=study_import_id).exclude(status=ImportStatus.DONE).update(
        status=ImportStatus.FAILED, error=f"The import stopped: {exc.__class__.__name__}.", finished_at=timezone.now()
    )


# celery-types' shared_task lists no on_failure option; Celery sets it on the task class.
@shared_task(bind=True, name="annotate.study_import_run", on_failure=_mark_failed)  # type: ignore[call-overload]
def study_import_run_task(self, study_import_id: int) -> str:
    from annotate.models import StudyImport
    from annotate.studies.imports import study_import_run
    from mining.models import CorpusImportStatus as ImportStatus

    job = StudyImport.objects.filter(pk=study_import_id).first()
    if job is None:
        return "gone"
    if job.status != ImportStatus.QUEUED:
        return f"already {job.status}"
    return study_import_run(study_import_id=job.pk).status
