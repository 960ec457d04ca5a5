from django.apps import AppConfig


class GoalstepConfig(AppConfig):
    name = "goalstep"
    verbose_name = "Goal-step tasks: step inference, goal inference, step ordering"

    def ready(self) -> None:
        # A goal-step evaluation's job is driven through the evaluation.
        from goalstep import services
        from goalstep.models import TaskEvaluation
        from llm.run_lifecycle import job_owner, job_owner_register, owned_run_cancel, owned_run_pause

        job_owner_register(
            job_owner(
                "goalstep-evaluation:",
                TaskEvaluation,
                noun="goal-step evaluation",
                resume=lambda evaluation: services.task_evaluation_resume(evaluation=evaluation),
                retry_failed=lambda evaluation: services.task_evaluation_retry_failed(evaluation=evaluation),
                pause=owned_run_pause,
                cancel=owned_run_cancel,
            )
        )
