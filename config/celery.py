"""The Celery application. Configuration comes from Django settings (CELERY_* names)."""

import os

from celery import Celery
from celery.signals import after_setup_logger, after_setup_task_logger, worker_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.django.base")

app = Celery("how2everything")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@after_setup_logger.connect
@after_setup_task_logger.connect
def mask_secrets_in_worker_logs(logger=None, **kwargs) -> None:
    """Celery replaces the root logger's handlers in a worker: give its handlers the same
    secret-masking filter as the web server's (core/log_filters.py)."""
    from core.log_filters import SecretMaskingFilter

    for handler in getattr(logger, "handlers", []):
        if not any(isinstance(existing, SecretMaskingFilter) for existing in handler.filters):
            handler.addFilter(SecretMaskingFilter())


@worker_init.connect
def load_the_llm_executors(**kwargs) -> None:
    """A worker loads the LLM executors (the HTTP client, the openai package: about half a
    second) when it starts, before its first task, as the web server's WSGI module loads the
    client: the URL configuration and commands leave them to their first use so that they
    start fast, and a job's first requests should not wait for an import (issue 29). Then
    what it loaded is frozen (core/gc_freeze.py), before a prefork pool forks: no full
    garbage collection of it stalls a job's event loop."""
    import llm.executors  # noqa: F401
    from core.gc_freeze import freeze_loaded_objects

    freeze_loaded_objects()
