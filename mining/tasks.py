"""Celery tasks of the mining app: ids in, one service call, early return when there is nothing to do."""
from celery import shared_task


def _mark_failed(self, exc, task_id, args, kwargs, einfo) -> None:
    from django.utils import timezone

    from mining.models import CorpusImport, CorpusImportStatus

    corpus_import_id = args[0] if args else kwargs.get("corpus_import_id")
    CorpusImport.objects.filter(pk=corpus_import_id).exclude(status=CorpusImportStatus.DONE).update(
        status=CorpusImportStatus.FAILED, error=f"{exc.__class__.__name__}: {exc}", finished_at=timezone.now()
    )


@shared_task(bind=True, name="mining.corpus_import_run", on_failure=_mark_failed)
def corpus_import_run_task(self, corpus_import_id: int) -> str:
    from mining.models import CorpusImport, CorpusImportStatus
    from mining.services import corpus_import_run

    job = CorpusImport.objects.filter(pk=corpus_import_id).first()
    if job is None:
        return "gone"
    if job.status != CorpusImportStatus.QUEUED:
        return f"already {job.status}"
    return corpus_import_run(corpus_import_id=job.pk).status
