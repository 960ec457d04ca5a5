from __future__ import annotations

from celery import shared_task

from llm.tasks import RunTask


class TaskEvaluationTask(RunTask):
    row_model = "goalstep.TaskEvaluation"
    row_argument = "evaluation_id"


@shared_task(bind=True, base=TaskEvaluationTask, name="goalstep.task_evaluation_execute")
def task_evaluation_execute_task(self: TaskEvaluationTask, evaluation_id: int) -> str:
    from goalstep.services import task_evaluation_execute
    from llm.services import poll_countdown

    outcome = task_evaluation_execute(evaluation_id=evaluation_id)
    countdown = poll_countdown(outcome)
    if countdown is not None:  # Batch API, or another task holds the job: come back later
        self.apply_async(args=(evaluation_id,), countdown=countdown)
    return outcome
