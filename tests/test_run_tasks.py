"""One Celery task base marks a failed task's row failed (core/row_tasks.py, llm/tasks.py):
every run's task derives from ``RunTask`` and names its model and argument, a failure marks
the row failed with the error (a run's pause is over, an LLM job's claim released), and a row
that had settled stays as it was."""

from __future__ import annotations

import inspect

import pytest
from billiard.einfo import ExceptionInfo
from django.apps import apps

from annotate.models import StudyImport
from annotate.tasks import study_import_run_task
from core.row_tasks import RowTask
from coscript.tasks import coscript_run_execute_task
from goalstep.tasks import task_evaluation_execute_task
from judging.tasks import components_run_execute_task, generation_run_execute_task, judge_run_execute_task
from llm.models import LLMJob
from llm.run_models import Run
from llm.tasks import RunTask, llm_job_execute_task
from mining.models import CorpusImport
from mining.tasks import corpus_import_run_task, mining_run_execute_task


def _einfo(exc: Exception) -> ExceptionInfo:
    """The exception as Celery hands it to ``on_failure``."""
    try:
        raise exc
    except Exception:
        return ExceptionInfo()


RUN_TASKS = [
    llm_job_execute_task,
    generation_run_execute_task,
    judge_run_execute_task,
    components_run_execute_task,
    task_evaluation_execute_task,
    coscript_run_execute_task,
    mining_run_execute_task,
]


@pytest.mark.parametrize("task", RUN_TASKS, ids=lambda task: task.name)
def test_every_runs_task_marks_its_run_failed_through_the_one_base(task):
    assert isinstance(task, RunTask)
    assert issubclass(apps.get_model(task.row_model), Run)
    # The id the failure handler reads is the task's own argument.
    assert list(inspect.signature(task.run).parameters) == [task.row_argument]


def test_corpus_and_study_imports_use_the_same_base():
    for task, model in ((corpus_import_run_task, CorpusImport), (study_import_run_task, StudyImport)):
        assert isinstance(task, RowTask) and not isinstance(task, RunTask)
        assert apps.get_model(task.row_model) is model
        assert list(inspect.signature(task.run).parameters) == [task.row_argument]


@pytest.mark.sqlite
@pytest.mark.django_db
def test_a_failed_task_marks_its_job_failed_and_releases_the_claim_but_leaves_a_settled_one():
    running = LLMJob.objects.create(
        run="x:1", role="generate", requests=[], status="paused", pause_reason="budget", claimed_by="t"
    )
    done = LLMJob.objects.create(run="x:2", role="generate", requests=[], status="done")
    cancelled = LLMJob.objects.create(run="x:3", role="generate", requests=[], status="cancelled")
    for job in (running, done, cancelled):
        llm_job_execute_task.on_failure(RuntimeError("a bug"), "task-id", (job.pk,), {}, _einfo(RuntimeError("a bug")))
    running.refresh_from_db()
    assert (running.status, running.error, running.pause_reason, running.claimed_by) == (
        "failed",
        "RuntimeError: a bug",
        "",
        "",
    )
    assert LLMJob.objects.get(pk=done.pk).status == "done" and LLMJob.objects.get(pk=done.pk).error == ""
    assert LLMJob.objects.get(pk=cancelled.pk).status == "cancelled"


@pytest.mark.sqlite
@pytest.mark.django_db
def test_celery_calls_the_base_when_a_task_raises_and_the_keyword_names_the_row():
    """The base as Celery calls it: an eager task whose body raises, given its id by keyword."""
    from config.celery import app

    class FailingJobTask(RunTask):
        row_model = "llm.LLMJob"
        row_argument = "job_id"

    @app.task(bind=True, base=FailingJobTask, name="tests.failing_job")
    def failing(self, job_id: int) -> str:
        raise ValueError(f"job {job_id} cannot go on")

    job = LLMJob.objects.create(run="x:4", role="generate", requests=[])
    result = failing.apply(kwargs={"job_id": job.pk})
    assert result.failed()
    job.refresh_from_db()
    assert (job.status, job.error) == ("failed", f"ValueError: job {job.pk} cannot go on")


@pytest.mark.sqlite
@pytest.mark.django_db
def test_a_failed_corpus_import_is_marked_failed_and_finished_unless_it_was_done():
    queued = CorpusImport.objects.create(corpus_name="c", file_name="f", original_name="f.jsonl")
    done = CorpusImport.objects.create(corpus_name="c", file_name="g", original_name="g.jsonl", status="done")
    for row in (queued, done):
        corpus_import_run_task.on_failure(
            OSError("disk full"), "task-id", (), {"corpus_import_id": row.pk}, _einfo(OSError("disk full"))
        )
    queued.refresh_from_db()
    assert (queued.status, queued.error) == ("failed", "OSError: disk full") and queued.finished_at is not None
    assert CorpusImport.objects.get(pk=done.pk).status == "done"


@pytest.mark.sqlite
@pytest.mark.django_db
def test_a_failed_study_import_is_marked_failed_and_finished_naming_only_the_errors_class():
    def study_import(status: str) -> StudyImport:
        return StudyImport.objects.create(
            study_name="s", kind="critical_failure", file_name="f", original_name="items.jsonl", status=status
        )

    queued, done = study_import("queued"), study_import("done")
    for row in (queued, done):
        study_import_run_task.on_failure(
            OSError("no space left for items.jsonl"),
            "task-id",
            (row.pk,),
            {},
            _einfo(OSError("no space left for items.jsonl")),
        )
    queued.refresh_from_db()
    assert (queued.status, queued.error) == ("failed", "The import stopped: OSError.")
    assert queued.finished_at is not None
    done.refresh_from_db()
    assert (done.status, done.error, done.finished_at) == ("done", "", None)
