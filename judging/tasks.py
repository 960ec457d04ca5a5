from __future__ import annotations

from collections.abc import Callable

from celery import shared_task

from llm.tasks import RunTask


class GenerationRunTask(RunTask):
    row_model = "judging.GenerationRun"


class JudgeRunTask(RunTask):
    row_model = "judging.JudgeRun"


class ComponentsRunTask(RunTask):
    row_model = "judging.ComponentsRun"


def _execute(task: RunTask, execute: Callable[..., str], run_id: int) -> str:
    """Run a run's service; a Batch API job that is still waiting is polled again later."""
    from llm.services import poll_countdown

    outcome = execute(run_id=run_id)
    countdown = poll_countdown(outcome)
    if countdown is not None:
        task.apply_async(args=(run_id,), countdown=countdown)
    return outcome


@shared_task(bind=True, base=GenerationRunTask, name="judging.generation_run_execute")
def generation_run_execute_task(self: GenerationRunTask, run_id: int) -> str:
    from judging.services import generation_run_execute

    return _execute(self, generation_run_execute, run_id)


@shared_task(bind=True, base=JudgeRunTask, name="judging.judge_run_execute")
def judge_run_execute_task(self: JudgeRunTask, run_id: int) -> str:
    from judging.services import judge_run_execute

    return _execute(self, judge_run_execute, run_id)


@shared_task(bind=True, base=ComponentsRunTask, name="judging.components_run_execute")
def components_run_execute_task(self: ComponentsRunTask, run_id: int) -> str:
    from judging.score_services import components_run_execute

    return _execute(self, components_run_execute, run_id)
