"""Launching a goal-step evaluation from a YAML configuration's text: one service for
``goalstep_evaluate --config`` and the REST API.

A configuration names the task set (its id, as ``goalstep_build`` prints it) and a registered
model, and may set the prompt file, the executor, the concurrency and a budget::

    task_set: 3
    model: qwen3-8b
    executor: online        # or batch
    concurrency: 16
"""

from __future__ import annotations

from typing import Any

from django.db import transaction

from core.run_configs import RunConfigError, config_parse
from goalstep.models import TaskEvaluation, TaskSet
from goalstep.services import task_evaluation_create
from judging.models import LanguageModel
from llm.constants import EXECUTORS

EVALUATION_KEYS = {"task_set", "model", "prompt_file", "executor", "concurrency", "budget_usd"}
MAX_CONCURRENCY = 1024


def _whole(data: dict[str, Any], key: str, source: str, *, low: int, high: int) -> None:
    value = data.get(key)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high):
        raise RunConfigError(f"{source}: {key} must be a whole number from {low} to {high}, got {value!r}")


def task_evaluation_config_parse(text: str, *, source: str) -> dict[str, Any]:
    """The configuration, checked key by key (errors name the source and the key)."""
    data = config_parse(text, source=source, allowed=EVALUATION_KEYS, required={"task_set", "model"})
    for key in [key for key, value in data.items() if value is None]:
        if key in {"task_set", "model"}:
            raise RunConfigError(f"{source}: {key} must be given a value")
        del data[key]  # written as null: the default
    _whole(data, "task_set", source, low=1, high=2**63 - 1)
    _whole(data, "concurrency", source, low=1, high=MAX_CONCURRENCY)
    if not isinstance(data["model"], str) or not data["model"].strip():
        raise RunConfigError(f"{source}: model must be a registered model's name, got {data['model']!r}")
    if data.get("prompt_file") is not None and not isinstance(data["prompt_file"], str):
        raise RunConfigError(f"{source}: prompt_file must be text, got {data['prompt_file']!r}")
    if data.get("executor", "online") not in EXECUTORS:
        raise RunConfigError(f"{source}: executor must be one of {', '.join(EXECUTORS)}, got {data['executor']!r}")
    return data


@transaction.atomic
def task_evaluation_launch(*, config_text: str, source: str, start: bool = True) -> TaskEvaluation:
    """An evaluation from a configuration; a refusal stores nothing. ``start``: enqueue its
    Celery task once the transaction commits."""
    config = task_evaluation_config_parse(config_text, source=source)
    task_set = TaskSet.objects.filter(pk=config["task_set"]).first()
    if task_set is None:
        raise RunConfigError(f"{source}: task_set: no task set {config['task_set']}")
    language_model = LanguageModel.objects.filter(name=config["model"]).first()
    if language_model is None:
        raise RunConfigError(f"{source}: model: no registered model {config['model']!r}")
    return task_evaluation_create(
        task_set=task_set,
        language_model=language_model,
        prompt_file=config.get("prompt_file") or None,
        executor=config.get("executor", "online"),
        concurrency=config.get("concurrency", 16),
        budget_usd=config.get("budget_usd"),
        start=start,
    )
