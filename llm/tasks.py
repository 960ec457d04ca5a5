from celery import shared_task

from llm.models import LLMJob


def _mark_failed(self, exc, task_id, args, kwargs, einfo) -> None:
    job_id = args[0] if args else kwargs.get("job_id")
    from llm.models import FINISHED

    LLMJob.objects.filter(pk=job_id).exclude(status__in=[*FINISHED, LLMJob.Status.CANCELLED]).update(
        status=LLMJob.Status.FAILED, error=f"{exc.__class__.__name__}: {exc}", claimed_by="", claim_expires=None
    )


# celery-types' shared_task lists no on_failure option; Celery sets it on the task class.
@shared_task(bind=True, name="llm.job_execute", on_failure=_mark_failed)  # type: ignore[call-overload]
def llm_job_execute_task(self, job_id: int) -> str:
    """Execute one LLM job (ids only; the job row holds the work). A Batch API job that is
    still waiting for its batches comes back after LLM_BATCH_POLL_SECONDS."""
    from llm.services import llm_job_execute, poll_countdown

    outcome = llm_job_execute(job_id=job_id)
    countdown = poll_countdown(outcome)
    if countdown is not None:
        self.apply_async(args=[job_id], countdown=countdown)
    return outcome
