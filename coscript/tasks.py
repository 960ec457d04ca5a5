from __future__ import annotations

from celery import shared_task

from llm.tasks import RunTask


class CoScriptRunTask(RunTask):
    row_model = "coscript.CoScriptRun"


@shared_task(bind=True, base=CoScriptRunTask, name="coscript.run_execute")
def coscript_run_execute_task(self: CoScriptRunTask, run_id: int) -> str:
    """Advance a CoScript run; a Batch API job that is still waiting is polled again later."""
    from coscript.phase_services import coscript_run_execute
    from llm.services import poll_countdown

    outcome = coscript_run_execute(run_id=run_id)
    countdown = poll_countdown(outcome)
    if countdown is not None:
        self.apply_async(args=(run_id,), countdown=countdown)
    return outcome
