"""Reads of the goal-step app: task sets, evaluation accuracy, leaderboards per task."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from core.app_errors import InvalidInput
from goalstep.answers import AccuracyTally
from goalstep.constants import PAPER_HUMAN_ACCURACY, PAPER_ROBERTA_ACCURACY, TASKS, USABLE_OUTCOMES
from goalstep.models import TaskEvaluation, TaskSet
from goalstep.validation import human_accuracy
from llm.runs import owned_run_state


def task_set_list(*, task: str | None = None) -> QuerySet[TaskSet]:
    sets = TaskSet.objects.order_by("-id")
    return sets.filter(task=task) if task else sets


def task_evaluation_accuracy(evaluation: TaskEvaluation) -> dict[str, Any]:
    """Accuracy overall and per topic with n (readable answers) and the 95 % Wilson interval
    (denominators in goalstep.answers.AccuracyTally), and what is left out: answers naming
    several candidates (``ambiguous``) or none (``unparseable``), calls that returned no
    usable completion (``n_unusable``, by outcome in ``unusable``) and items without a
    stored answer (``n_unanswered``: not asked yet, or an api_error). The one selector of
    the leaderboard page, the APIs and goalstep_evaluate."""
    tally = AccuracyTally()
    outcomes: dict[str, int] = {}
    for outcome, correct, topic in evaluation.predictions.values_list("outcome", "correct", "item__topic"):
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        if outcome in USABLE_OUTCOMES:
            tally.add(topic, outcome, correct)
        else:
            tally.add_unusable(outcome)
    result = tally.result()
    result["outcomes"] = outcomes
    result["n_items"] = len(evaluation.item_ids)
    result["n_unanswered"] = max(result["n_items"] - sum(outcomes.values()), 0)
    return result


def task_evaluation_state(evaluation: TaskEvaluation, *, live: bool = True) -> dict[str, Any]:
    """The evaluation's state as every run shows it (llm/runs.py): status, requests per
    outcome, top errors, why it stopped. ``live=False`` (lists): the counts its LLM job stored
    when it last stopped, without error messages."""
    return owned_run_state(evaluation, live=live, id=f"evaluation-{evaluation.pk}")


def leaderboard(task: str, *, task_set_id: int | None = None) -> dict[str, Any]:
    """The evaluations of one task set of ``task`` (the chosen one, else the newest with an
    evaluation, else the newest), best first, with the paper's figures and the human accuracy
    of the validated set beside them."""
    if task not in TASKS:
        raise InvalidInput(fields={"task": f"unknown task {task!r}"})
    sets = list(task_set_list(task=task))
    chosen = next((s for s in sets if s.pk == task_set_id), None) if task_set_id else None
    if chosen is None:
        chosen = next((s for s in sets if s.evaluations.exists()), sets[0] if sets else None)
    rows = []
    if chosen is not None:
        for evaluation in chosen.evaluations.select_related("language_model", "llm_job"):
            rows.append(
                {
                    "evaluation": evaluation,
                    "model": evaluation.language_model.name,
                    "state": task_evaluation_state(evaluation, live=False),
                    **task_evaluation_accuracy(evaluation),
                }
            )
    rows.sort(key=lambda r: (r["accuracy"] is None, -(r["accuracy"] or 0.0), r["model"]))
    topics = sorted({topic for row in rows for topic in row["by_topic"]})
    return {
        "task": task,
        "task_sets": sets,
        "task_set": chosen,
        "rows": rows,
        "topics": topics,
        "paper_roberta": PAPER_ROBERTA_ACCURACY[task],
        "paper_human": PAPER_HUMAN_ACCURACY[task],
        "human": human_accuracy(task),
    }
