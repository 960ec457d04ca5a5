"""Writes of the goal-step app: building task sets (Zhang et al. 2020, §3) and evaluating
registered models on them through the LLM layer (§4)."""

from __future__ import annotations

import json
from collections.abc import Callable
from decimal import Decimal
from functools import partial
from pathlib import Path

import numpy as np
from django.conf import settings
from django.db import transaction

from core.app_errors import InvalidInput
from core.record_output import atomic_output
from goalstep.answers import OK, candidate_list, letter_list, read_choice
from goalstep.constants import STEP_ORDERING, TASKS, USABLE_OUTCOMES
from goalstep.item_pool import PoolProcedure
from goalstep.items import BuildResult, FilterSettings, build_items
from goalstep.models import TaskEvaluation, TaskItem, TaskPrediction, TaskSet
from judging.models import LanguageModel, PromptStyle
from judging.prompts import Prompt, prompt_load
from judging.run_requests import decoding_params
from llm.request import LLMRequest
from llm.run_lifecycle import owned_run_execute, owned_run_job_attach, owned_run_resume, owned_run_retry_failed
from llm.selectors import llm_job_results
from llm.shards import llm_job_tasks
from mining.embeddings import configured_model_name, embed_texts
from mining.models import Procedure, Split

SPLITS = (Split.BENCH, Split.TRAIN)
PROMPTS_DIR = Path(__file__).with_name("prompts")
# The kind of prompt a goal-step evaluation renders, and the placeholders its files are
# checked for (passed to judging.prompts.prompt_load, which knows only judging's kinds).
PROMPT_KIND = "goalstep_answer"
PROMPT_PLACEHOLDERS = frozenset({"prompt", "candidates", "letters"})


def procedure_pool(split: str) -> list[PoolProcedure]:
    """The procedures of a split, in id order, as the construction's pool."""
    rows = Procedure.objects.filter(split=split).order_by("id").values_list("id", "topic__name", "goal", "steps")
    return [PoolProcedure(id=pk, topic=topic, goal=goal, steps=tuple(steps)) for pk, topic, goal, steps in rows]


def reserved_texts_for(split: str) -> list[str]:
    """Leakage guard (§3.4: training examples whose prompt or candidates appear in the test set
    are removed): a training set keeps away from every goal and step of every How2Bench
    procedure, a superset of any test set's prompts and candidates."""
    if split != Split.TRAIN:
        return []
    texts: list[str] = []
    for goal, steps in Procedure.objects.filter(split=Split.BENCH).values_list("goal", "steps"):
        texts.append(goal)
        texts.extend(steps)
    return texts


def task_set_build(
    *,
    task: str,
    split: str,
    output: str | Path,
    seed: int = 0,
    limit: int | None = None,
    filters: FilterSettings = FilterSettings(),
    embedding_model: str | None = None,
    embed: Callable[[list[str]], np.ndarray] | None = None,
) -> tuple[TaskSet, BuildResult]:
    """Build a task set from a split, store it and write it as JSONL (atomically: the file
    appears complete or not at all, and a failed write stores nothing)."""
    if task not in TASKS:
        raise InvalidInput(f"unknown task {task!r}; one of {', '.join(TASKS)}")
    if split not in SPLITS:
        raise InvalidInput(f"split must be one of {', '.join(SPLITS)}")
    pool = procedure_pool(split)
    if not pool:
        raise InvalidInput(f"no procedures in split {split!r}; run split_procedures first")
    model_name = (
        ""
        if task == STEP_ORDERING
        else configured_model_name(embedding_model or getattr(settings, "EMBEDDING_MODEL", ""))
    )
    if embed is None:
        embed = partial(embed_texts, model=model_name)
    result = build_items(
        task=task,
        procedures=pool,
        embed=embed,
        seed=seed,
        limit=limit,
        filters=filters,
        reserved_texts=reserved_texts_for(split),
    )
    with transaction.atomic():
        task_set = TaskSet.objects.create(
            task=task,
            split=split,
            seed=seed,
            limit=limit,
            filters=filters.as_dict(),
            embedding_model=model_name,
            report=result.report,
            n_items=len(result.items),
            output_file=str(output),
        )
        TaskItem.objects.bulk_create(
            [
                TaskItem(
                    task_set=task_set,
                    item_id=item.id,
                    position=n,
                    prompt=item.prompt,
                    candidates=item.candidates,
                    label=item.label,
                    topic=item.topic,
                    source_procedure_ids=item.source_procedure_ids,
                )
                for n, item in enumerate(result.items)
            ],
            batch_size=2000,
        )
        with atomic_output(output) as handle:
            for item in result.items:
                handle.write((json.dumps(item.as_record(), ensure_ascii=False) + "\n").encode("utf-8"))
    return task_set, result


# ----------------------------------------------------------------------------- evaluation


def evaluation_prompt(task: str, prompt_file: str | None = None) -> Prompt:
    return prompt_load(
        prompt_file or str(PROMPTS_DIR / f"{task}.txt"), kind=PROMPT_KIND, placeholders=PROMPT_PLACEHOLDERS
    )


def evaluation_request(item: TaskItem, language_model: LanguageModel, prompt: Prompt) -> LLMRequest:
    text = prompt.render(
        prompt=item.prompt, candidates=candidate_list(item.candidates), letters=letter_list(len(item.candidates))
    )
    params = decoding_params(language_model)
    if language_model.prompt_style == PromptStyle.BASE:
        return LLMRequest(stage=PROMPT_KIND, messages=[], prompt=text + "\nAnswer:", params=params)
    return LLMRequest(stage=PROMPT_KIND, messages=[{"role": "user", "content": text}], params=params)


@transaction.atomic
def task_evaluation_create(
    *,
    task_set: TaskSet,
    language_model: LanguageModel,
    prompt_file: str | None = None,
    executor: str = "online",
    concurrency: int = 16,
    budget_usd: Decimal | None = None,
    start: bool = True,
) -> TaskEvaluation:
    """One request per item of the task set, through the LLM layer (ledger, retries, limits)."""
    prompt = evaluation_prompt(task_set.task, prompt_file)
    items = list(task_set.items.order_by("position"))
    if not items:
        raise InvalidInput(f"task set {task_set.pk} has no items")
    evaluation = TaskEvaluation.objects.create(
        task_set=task_set,
        language_model=language_model,
        prompt_file=prompt.path,
        prompt_hash=prompt.sha256,
        executor=executor,
        concurrency=concurrency,
        budget_usd=budget_usd,
        item_ids=[item.pk for item in items],
    )
    requests = [evaluation_request(item, language_model, prompt) for item in items]
    owned_run_job_attach(
        evaluation,
        label="goalstep-evaluation",
        role=language_model.role,
        requests=requests,
        executor=executor,
        concurrency=concurrency,
        budget_usd=budget_usd,
        endpoint_overrides=language_model.endpoint_overrides(),
    )
    if start:
        _evaluation_enqueue(evaluation)()
    return evaluation


def task_evaluation_execute(*, evaluation_id: int) -> str:
    evaluation = TaskEvaluation.objects.select_related("llm_job", "task_set").filter(pk=evaluation_id).first()
    return (
        "gone"
        if evaluation is None
        else owned_run_execute(evaluation, collect=task_evaluation_collect, unusable=task_evaluation_unusable)
    )


def task_evaluation_unusable(evaluation: TaskEvaluation) -> int:
    """Stored predictions whose call had no usable answer (truncated, refused, ...). An
    answer naming several candidates (``ambiguous``) or none (``unparseable``) is the
    model's answer: not asked again, counted, left out of accuracy."""
    return evaluation.predictions.exclude(outcome__in=USABLE_OUTCOMES).count()


def _evaluation_enqueue(evaluation: TaskEvaluation):
    from goalstep.tasks import task_evaluation_execute_task

    # One task per shard of the evaluation's job still to execute (llm/shards.py).
    return lambda: transaction.on_commit(
        lambda: [task_evaluation_execute_task.delay(evaluation.pk) for _ in range(llm_job_tasks(evaluation.llm_job_id))]
    )


def task_evaluation_retry_failed(*, evaluation: TaskEvaluation, start: bool = True) -> int:
    """*Retry failed* of a goal-step evaluation: exactly its requests without an ``ok`` answer.
    ``start``: hand it to a Celery worker (else the caller executes it, as the command does)."""
    return owned_run_retry_failed(
        evaluation,
        enqueue=_evaluation_enqueue(evaluation) if start else (lambda: None),
        discard_unusable=lambda e: e.predictions.exclude(outcome__in=USABLE_OUTCOMES).delete()[0],
    )


def task_evaluation_resume(*, evaluation: TaskEvaluation) -> None:
    owned_run_resume(evaluation, enqueue=_evaluation_enqueue(evaluation))


def task_evaluation_collect(evaluation: TaskEvaluation) -> int:
    """Store a prediction for every finished request (idempotent). A completion is read by
    ``goalstep.answers.read_choice``: one that names two or more candidates is stored as
    ``ambiguous``, one that names none as ``unparseable``, both with no choice and neither
    right nor wrong; calls that returned no completion keep their outcome (truncated,
    refused, ...). Returns how many were new."""
    if evaluation.llm_job is None:  # not launched: nothing has finished
        return 0
    items = TaskItem.objects.in_bulk(evaluation.item_ids)
    stored = set(evaluation.predictions.values_list("item_id", flat=True))
    new = []
    for item_pk, result in zip(evaluation.item_ids, llm_job_results(evaluation.llm_job)):
        if result is None or item_pk in stored or result.outcome == "api_error":
            continue
        item = items[item_pk]
        reading = read_choice(result.text, item.candidates) if result.ok else None
        choice = reading.choice if reading is not None else None
        outcome = result.outcome if reading is None else reading.outcome
        new.append(
            TaskPrediction(
                evaluation=evaluation,
                item=item,
                outcome=outcome,
                choice=choice,
                correct=choice == item.label if outcome == OK and choice is not None else None,
                completion=result.text,
                provenance={"prompt_hash": evaluation.prompt_hash, "ledger_key": result.key},
            )
        )
    TaskPrediction.objects.bulk_create(new, ignore_conflicts=True)
    return len(new)
