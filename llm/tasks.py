"""Celery tasks of the LLM layer, and ``RunTask``: the base of every run's task, which marks
the run failed when its task fails (core/row_tasks.py)."""

from __future__ import annotations

from typing import Any, ClassVar

from celery import shared_task

from core.row_tasks import RowTask
from llm.run_models import SETTLED, RunStatus


class RunTask(RowTask):
    """The task of a run (any model deriving from ``llm.run_models.Run``): a failure marks
    the run ``failed`` with the error, unless it had finished or was cancelled; a pause it
    had is over."""

    settled: ClassVar[tuple[str, ...]] = SETTLED
    failed_status: ClassVar[str] = RunStatus.FAILED

    def failed_fields(self, exc: BaseException) -> dict[str, Any]:
        return {**super().failed_fields(exc), "pause_reason": ""}


class LLMJobTask(RunTask):
    """An LLM job's task: a failed job's claim is released too (no worker holds it)."""

    row_model = "llm.LLMJob"
    row_argument = "job_id"

    def failed_fields(self, exc: BaseException) -> dict[str, Any]:
        return {**super().failed_fields(exc), "claimed_by": "", "claim_expires": None}


@shared_task(bind=True, base=LLMJobTask, name="llm.job_execute")
def llm_job_execute_task(self: LLMJobTask, job_id: int) -> str:
    """Execute one LLM job (ids only; the job row holds the work). A Batch API job that is
    still waiting for its batches comes back after LLM_BATCH_POLL_SECONDS."""
    from llm.services import llm_job_execute, poll_countdown

    outcome = llm_job_execute(job_id=job_id)
    countdown = poll_countdown(outcome)
    if countdown is not None:
        self.apply_async(args=(job_id,), countdown=countdown)
    return outcome
