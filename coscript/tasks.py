from celery import shared_task


def _mark_failed(self, exc, task_id, args, kwargs, einfo) -> None:
    from coscript.models import CoScriptRun

    CoScriptRun.objects.filter(pk=args[0] if args else kwargs.get("run_id")).exclude(
        status__in=["done", "done_with_failures", "cancelled"]
    ).update(status="failed", error=f"{exc.__class__.__name__}: {exc}")


# celery-types' shared_task lists no on_failure option; Celery sets it on the task class.
@shared_task(bind=True, name="coscript.run_execute", on_failure=_mark_failed)  # type: ignore[call-overload]
def coscript_run_execute_task(self, run_id: int) -> str:
    """Advance a CoScript run; a Batch API job that is still waiting is polled again later."""
    from coscript.phase_services import coscript_run_execute
    from llm.services import poll_countdown

    outcome = coscript_run_execute(run_id=run_id)
    countdown = poll_countdown(outcome)
    if countdown is not None:
        self.apply_async(args=[run_id], countdown=countdown)
    return outcome
