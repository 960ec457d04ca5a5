from celery import shared_task


def _mark_failed(model_name: str):
    def on_failure(self, exc, task_id, args, kwargs, einfo) -> None:
        from django.apps import apps

        model = apps.get_model("judging", model_name)
        model.objects.filter(pk=args[0] if args else kwargs.get("run_id")).exclude(
            status__in=["done", "done_with_failures", "cancelled"]
        ).update(status="failed", error=f"{exc.__class__.__name__}: {exc}")

    return on_failure


def _execute(task, execute, run_id: int) -> str:
    """Run a run's service; a Batch API job that is still waiting is polled again later."""
    from llm.services import poll_countdown

    outcome = execute(run_id=run_id)
    countdown = poll_countdown(outcome)
    if countdown is not None:
        task.apply_async(args=[run_id], countdown=countdown)
    return outcome


# celery-types' shared_task lists no on_failure option; Celery sets it on the task class.
@shared_task(bind=True, name="judging.generation_run_execute", on_failure=_mark_failed("GenerationRun"))  # type: ignore[call-overload]
def generation_run_execute_task(self, run_id: int) -> str:
    from judging.services import generation_run_execute

    return _execute(self, generation_run_execute, run_id)


@shared_task(bind=True, name="judging.judge_run_execute", on_failure=_mark_failed("JudgeRun"))  # type: ignore[call-overload]
def judge_run_execute_task(self, run_id: int) -> str:
    from judging.services import judge_run_execute

    return _execute(self, judge_run_execute, run_id)


@shared_task(bind=True, name="judging.components_run_execute", on_failure=_mark_failed("ComponentsRun"))  # type: ignore[call-overload]
def components_run_execute_task(self, run_id: int) -> str:
    from judging.score_services import components_run_execute

    return _execute(self, components_run_execute, run_id)
