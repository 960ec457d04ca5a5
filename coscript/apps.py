from django.apps import AppConfig


class CoscriptConfig(AppConfig):
    name = "coscript"
    verbose_name = "CoScript: constrained goals and over-generate-then-filter scripts"

    def ready(self) -> None:
        # The jobs of a CoScript run's phases are driven through the run.
        from coscript import run_services
        from coscript.models import CoScriptRun
        from llm.run_lifecycle import job_owner, job_owner_register

        job_owner_register(
            job_owner(
                "coscript:",
                CoScriptRun,
                noun="CoScript run",
                resume=lambda run: run_services.coscript_run_resume(run=run),
                retry_failed=lambda run: run_services.coscript_run_retry_failed(run=run),
                pause=lambda run: run_services.coscript_run_pause(run=run),
                cancel=lambda run: run_services.coscript_run_cancel(run=run),
            )
        )
