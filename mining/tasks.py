"""Celery tasks of the mining app: ids in, one service call, early return when there is nothing to do."""

from __future__ import annotations

from typing import Any, ClassVar

from celery import shared_task
from django.utils import timezone

from core.row_tasks import RowTask
from llm.tasks import RunTask


class CorpusImportTask(RowTask):
    """A corpus import's task: a failure marks the import failed and finished, unless it was done."""

    row_model = "mining.CorpusImport"
    row_argument = "corpus_import_id"
    settled: ClassVar[tuple[str, ...]] = ("done",)

    def failed_fields(self, exc: BaseException) -> dict[str, Any]:
        return {**super().failed_fields(exc), "finished_at": timezone.now()}


class MiningRunTask(RunTask):
    row_model = "mining.MiningRun"


@shared_task(bind=True, base=CorpusImportTask, name="mining.corpus_import_run")
def corpus_import_run_task(self: CorpusImportTask, corpus_import_id: int) -> str:
    from mining.corpus_services import corpus_import_run
    from mining.models import CorpusImport, CorpusImportStatus

    job = CorpusImport.objects.filter(pk=corpus_import_id).first()
    if job is None:
        return "gone"
    if job.status != CorpusImportStatus.QUEUED:
        return f"already {job.status}"
    return corpus_import_run(corpus_import_id=job.pk).status


@shared_task(bind=True, base=MiningRunTask, name="mining.run_execute")
def mining_run_execute_task(self: MiningRunTask, run_id: int) -> str:
    """One worker's share of a mining run (ids only; the run row holds the work). A Batch
    API run that waits for its batches comes back after LLM_BATCH_POLL_SECONDS."""
    from django.conf import settings

    from mining.runner import mining_run_execute

    outcome = mining_run_execute(run_id=run_id)
    if outcome.startswith("waiting") and outcome != "waiting for other workers":
        self.apply_async(args=(run_id,), countdown=settings.LLM_BATCH_POLL_SECONDS)
    return outcome
