"""Celery tasks of the mining app: ids in, one service call, early return when there is nothing to do."""

from celery import shared_task


def _mark_failed(self, exc, task_id, args, kwargs, einfo) -> None:
    from django.utils import timezone

    from mining.models import CorpusImport, CorpusImportStatus

    corpus_import_id = args[0] if args else kwargs.get("corpus_import_id")
    CorpusImport.objects.filter(pk=corpus_import_id).exclude(status=CorpusImportStatus.DONE).update(
        status=CorpusImportStatus.FAILED, error=f"{exc.__class__.__name__}: {exc}", finished_at=timezone.now()
    )


# celery-types' shared_task lists no on_failure option; Celery sets it on the task class.
@shared_task(bind=True, name="mining.corpus_import_run", on_failure=_mark_failed)  # type: ignore[call-overload]
def corpus_import_run_task(self, corpus_import_id: int) -> str:
    from mining.corpus_services import corpus_import_run
    from mining.models import CorpusImport, CorpusImportStatus

    job = CorpusImport.objects.filter(pk=corpus_import_id).first()
    if job is None:
        return "gone"
    if job.status != CorpusImportStatus.QUEUED:
        return f"already {job.status}"
    return corpus_import_run(corpus_import_id=job.pk).status


def _mark_run_failed(self, exc, task_id, args, kwargs, einfo) -> None:
    from mining.models import MiningRun, MiningRunStatus

    run_id = args[0] if args else kwargs.get("run_id")
    MiningRun.objects.filter(pk=run_id).exclude(
        status__in=[MiningRunStatus.DONE, MiningRunStatus.DONE_WITH_FAILURES, MiningRunStatus.CANCELLED]
    ).update(status=MiningRunStatus.FAILED, error=f"{exc.__class__.__name__}: {exc}")


# celery-types' shared_task lists no on_failure option; Celery sets it on the task class.
@shared_task(bind=True, name="mining.run_execute", on_failure=_mark_run_failed)  # type: ignore[call-overload]
def mining_run_execute_task(self, run_id: int) -> str:
    """One worker's share of a mining run (ids only; the run row holds the work). A Batch
    API run that waits for its batches comes back after LLM_BATCH_POLL_SECONDS."""
    from django.conf import settings

    from mining.runner import mining_run_execute

    outcome = mining_run_execute(run_id=run_id)
    if outcome.startswith("waiting") and outcome != "waiting for other workers":
        self.apply_async(args=[run_id], countdown=settings.LLM_BATCH_POLL_SECONDS)
    return outcome
