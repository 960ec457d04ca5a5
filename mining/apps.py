from django.apps import AppConfig
from django.db.models.signals import post_migrate


class MiningConfig(AppConfig):
    name = "mining"
    verbose_name = "Mining: topics, procedures, corpora"

    def ready(self) -> None:
        post_migrate.connect(_ensure_topics, sender=self, dispatch_uid="mining.topics_ensure")
        # The Batch API jobs of a mining run are driven through the run.
        from llm.run_lifecycle import job_owner, job_owner_register
        from mining import run_selectors, run_services
        from mining.models import MiningRun

        job_owner_register(
            job_owner(
                "mining-run:",
                MiningRun,
                noun="mining run",
                resume=lambda run: run_services.mining_run_resume(run=run),
                retry_failed=lambda run: run_services.mining_run_retry_failures(run=run),
                pause=lambda run: run_services.mining_run_pause(run=run),
                cancel=lambda run: run_services.mining_run_cancel(run=run),
                held=lambda run: run_selectors.mining_run_held(run),
            )
        )


def _ensure_topics(sender, **kwargs) -> None:
    """The 14 topics are reference data the product assumes: a migration seeds them, and an
    emptied database (``manage.py flush``, a transactional test's teardown) gets them back."""
    from mining.procedure_services import topics_ensure

    topics_ensure()
