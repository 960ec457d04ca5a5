from celery import shared_task


def _mark_failed(self, exc, task_id, args, kwargs, einfo) -> None:
    from goalstep.models import TaskEvaluation

    TaskEvaluation.objects.filter(pk=args[0] if args else kwargs.get("evaluation_id")).exclude(
        status__in=["done", "done_with_failures", "cancelled"]
    ).update(status="failed", error=f"{exc.__class__.__name__}: {exc}")


# celery-types' shared_task lists no on_failure option; Celery sets it on the task class.
@shared_task(bind=True, name="goalstep.task_evaluation_execute", on_failure=_mark_failed)  # type: ignore[call-overload]
def task_evaluation_execute_task(self, evaluation_id: int) -> str:
    from goalstep.services import task_evaluation_execute
    from llm.services import poll_countdown

    outcome = task_evaluation_execute(evaluation_id=evaluation_id)
    countdown = poll_countdown(outcome)
    if countdown is not None:  # Batch API, or another task holds the job: come back later
        self.apply_async(args=[evaluation_id], countdown=countdown)
    return outcome
