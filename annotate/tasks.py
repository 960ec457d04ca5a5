"""Celery tasks of the annotate app: ids in, one service call, early return when there is nothing to do."""

from __future__ import annotations

from typing import Any, ClassVar

from celery import shared_task
from django.utils import timezone

from core.row_tasks import RowTask
from mining.models import CorpusImportStatus as ImportStatus


class StudyImportTask(RowTask):
    """A study import's task: a failure marks the import failed and finished, unless it was
    done. Its error names the exception's class only, as the import's own handling of an
    unexpected error does (annotate/studies/imports.py: the server log has the details)."""

    row_model = "annotate.StudyImport"
    row_argument = "study_import_id"
    settled: ClassVar[tuple[str, ...]] = (ImportStatus.DONE,)
    failed_status: ClassVar[str] = ImportStatus.FAILED

    def failed_fields(self, exc: BaseException) -> dict[str, Any]:
        return {
            "status": self.failed_status,
            "error": f"The import stopped: {exc.__class__.__name__}.",
            "finished_at": timezone.now(),
        }


@shared_task(bind=True, base=StudyImportTask, name="annotate.study_import_run")
def study_import_run_task(self: StudyImportTask, study_import_id: int) -> str:
    from annotate.models import StudyImport
    from annotate.studies.imports import study_import_run

    job = StudyImport.objects.filter(pk=study_import_id).first()
    if job is None:
        return "gone"
    if job.status != ImportStatus.QUEUED:
        return f"already {job.status}"
    return study_import_run(study_import_id=job.pk).status
