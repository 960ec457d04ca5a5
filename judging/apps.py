from django.apps import AppConfig


class JudgingConfig(AppConfig):
    name = "judging"
    verbose_name = "Judging: generations, How2Score judgments, leaderboards"

    def ready(self) -> None:
        from judging.panels import generations_panel
        from mining.panels import procedure_panel_register

        procedure_panel_register(generations_panel)

        # Jobs of generation, judge and components runs are driven through their run.
        from judging import score_services, services
        from judging.models import ComponentsRun, GenerationRun, JudgeRun
        from llm.run_lifecycle import job_owner, job_owner_register

        for prefix, model, noun in (
            ("generation-run:", GenerationRun, "generation run"),
            ("judge-run:", JudgeRun, "judge run"),
        ):
            job_owner_register(
                job_owner(
                    prefix,
                    model,
                    noun=noun,
                    resume=lambda run: services.run_resume(run=run),
                    retry_failed=lambda run: services.run_retry_failed(run=run),
                    pause=lambda run: services.run_pause(run=run),
                    cancel=lambda run: services.run_cancel(run=run),
                )
            )
        job_owner_register(
            job_owner(
                "components-run:",
                ComponentsRun,
                noun="components run",
                resume=lambda run: score_services.components_run_resume(run=run),
                retry_failed=lambda run: score_services.components_run_retry_failed(run=run),
                pause=lambda run: services.run_pause(run=run),
                cancel=lambda run: services.run_cancel(run=run),
            )
        )
