"""The one Celery task base class for work on one stored row (a run, an LLM job, an import).

A task deriving from ``RowTask`` takes the row's id as its first argument (or the keyword
``row_argument``); when it fails with an exception nothing retried, ``on_failure`` marks its
row failed with the error (``failed_fields``), unless the row had already settled (a status
in ``settled``: a finished or cancelled run stays what it is). A kind of row says once how
it is marked (``llm.tasks.RunTask`` for every run; ``mining.tasks.CorpusImportTask``), and
each task names its model: ``@shared_task(bind=True, base=GenerationRunTask, ...)``."""

from __future__ import annotations

from typing import Any, ClassVar

from billiard.einfo import ExceptionInfo
from celery import Task
from django.apps import apps


def error_text(exc: BaseException) -> str:
    """What a failed row's ``error`` says: the exception's class and message."""
    return f"{exc.__class__.__name__}: {exc}"


class RowTask(Task[Any, Any]):
    """A task over one row of ``row_model`` (``app_label.ModelName``) that marks it failed
    when the task fails."""

    row_model: ClassVar[str] = ""
    row_argument: ClassVar[str] = "run_id"
    settled: ClassVar[tuple[str, ...]] = ()
    failed_status: ClassVar[str] = "failed"

    def failed_fields(self, exc: BaseException) -> dict[str, Any]:
        """The fields a failed row gets (a subclass adds its own, such as a claim released)."""
        return {"status": self.failed_status, "error": error_text(exc)}

    def on_failure(
        self, exc: Exception, task_id: str, args: tuple[Any, ...], kwargs: dict[str, Any], einfo: ExceptionInfo
    ) -> None:
        row_id = args[0] if args else kwargs.get(self.row_argument)
        model = apps.get_model(self.row_model)
        model._default_manager.filter(pk=row_id).exclude(status__in=self.settled).update(**self.failed_fields(exc))
