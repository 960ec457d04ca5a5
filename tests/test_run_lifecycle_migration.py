"""The run lifecycle's data migration: runs that kept their pause reason in ``error`` while
paused (generation runs, goal-step evaluations, CoScript runs) get it in ``pause_reason``,
every other stored value stays where it was, and migrating back restores them all."""

from __future__ import annotations

import pytest

BEFORE = [
    ("judging", "0007_run_reference_settings"),
    ("goalstep", "0003_ambiguous_answers"),
    ("coscript", "0002_run_states"),
]
AFTER = [("judging", "0008_run_lifecycle"), ("goalstep", "0004_run_lifecycle"), ("coscript", "0003_run_lifecycle")]


def _migrate(target):
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(target)
    return executor.loader.project_state(target).apps


def _rows(apps) -> dict[str, list[tuple[str, ...]]]:
    """Per run model: (name, status, error[, pause_reason]) of every row, by id."""
    found = {}
    for label in ("judging.GenerationRun", "goalstep.TaskEvaluation", "coscript.CoScriptRun"):
        model = apps.get_model(label)
        fields = ["status", "error"] + (
            ["pause_reason"] if any(f.name == "pause_reason" for f in model._meta.fields) else []
        )
        found[label] = [tuple(row) for row in model.objects.order_by("pk").values_list(*fields)]
    return found


def _populate(apps) -> None:
    LanguageModel = apps.get_model("judging", "LanguageModel")
    model = LanguageModel.objects.create(name="migration-model")
    TaskSet = apps.get_model("goalstep", "TaskSet")
    task_set = TaskSet.objects.create(task="step_inference", split="bench")
    states = [
        ("paused", "paused by a user"),
        ("paused", "circuit breaker: http://gpu-1:8000/v1 failed 20 times since 10:02 — HTTP 500"),
        ("failed", "RuntimeError: the worker died"),
        ("done", ""),
        ("cancelled", ""),
    ]
    for i, (status, error) in enumerate(states):
        apps.get_model("judging", "GenerationRun").objects.create(
            name=f"gen-{i}", language_model=model, prompt_file="p.txt", prompt_hash="h", status=status, error=error
        )
        apps.get_model("goalstep", "TaskEvaluation").objects.create(
            task_set=task_set, language_model=model, prompt_file="p.txt", prompt_hash="h", status=status, error=error
        )
        apps.get_model("coscript", "CoScriptRun").objects.create(
            name=f"cos-{i}", language_model=model, status=status, error=error
        )


@pytest.mark.sqlite  # a migration: on the embedded default too
def test_the_pause_reason_moves_out_of_error_and_back_keeping_every_value(transactional_db):
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    try:
        _populate(_migrate(BEFORE))
        before = _rows(_migrate(BEFORE))
        after = _rows(_migrate(AFTER))
        for label, rows in before.items():
            expected = [(status, "", error) if status == "paused" else (status, error, "") for status, error in rows]
            assert after[label] == expected, label
        # Backwards: every pause reason is in error again, as it was.
        assert _rows(_migrate(BEFORE)) == before
    finally:
        _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())


@pytest.mark.sqlite
def test_migrating_back_keeps_a_pause_reason_beside_an_error(transactional_db):
    """A row holding both (a run that failed while it was paused, after the migration) keeps
    both in ``error`` when migrated back: nothing stored is dropped with the field."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    try:
        _migrate(BEFORE)
        apps = _migrate(AFTER)
        model = apps.get_model("judging", "LanguageModel").objects.create(name="both")
        apps.get_model("judging", "GenerationRun").objects.create(
            name="both",
            language_model=model,
            prompt_file="p",
            prompt_hash="h",
            status="failed",
            pause_reason="paused by a user",
            error="RuntimeError: boom",
        )
        [(status, error)] = (
            _migrate(BEFORE).get_model("judging", "GenerationRun").objects.values_list("status", "error")
        )
        assert (status, error) == ("failed", "paused by a user; RuntimeError: boom")
    finally:
        _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
