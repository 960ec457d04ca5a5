"""The results of a multiple-choice study read from its annotations: Table 2 per task (the
computation is in ``results``, with the n and interval of every rate and of alpha, as the
study page and the report API show them), a pilot round's alpha, the gold and harder tiers as
goal-step task lines, and human accuracy per task over every multiple-choice study (the
goal-step leaderboards' provider)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any, cast

from django.db.models import QuerySet

from annotate.kinds.base import ROLE_MAIN
from annotate.kinds.multiple_choice.definition import KEY as MULTIPLE_CHOICE
from annotate.kinds.multiple_choice.results import ChoiceItem, study_results
from annotate.models import Study, StudyItem
from annotate.stats.alpha import ALPHA_KEYS
from annotate.stats.bootstrap import DEFAULT_BOOTSTRAP
from annotate.studies.selectors import study_annotations_counted


def choice_items(studies: QuerySet[Study] | list[Study]) -> list[ChoiceItem]:
    """Main-pool items of multiple-choice studies with the answers that count: submitted,
    not excluded (failed attention checks), not surplus and not flagged broken
    (``annotations_counted``), in submission order."""
    answers: dict[int, list] = defaultdict(list)
    rows = study_annotations_counted(studies).order_by("submitted_at", "pk").values_list("item_id", "answer")
    for item_pk, answer in rows:
        answers[item_pk].append(answer.get("choice"))
    items = StudyItem.objects.filter(study__in=studies, role=ROLE_MAIN).order_by("study_id", "position")
    # A main-pool item's known answer is its label, which the kind requires (definition.py).
    return [
        ChoiceItem(
            item_id=i.item_id,
            task=i.source.get("task", ""),
            topic=i.topic,
            label=cast(int, i.expected),
            answers=tuple(answers.get(i.pk, ())),
        )
        for i in items
    ]


def choice_study_results(study: Study, *, bootstrap: int = DEFAULT_BOOTSTRAP) -> dict[str, dict[str, Any]]:
    """Table 2 of Zhang et al. 2020 per task of a multiple-choice study (annotate/kinds/multiple_choice/results.py),
    with the yield and the human accuracy as shares with their n and 95% Wilson interval and
    alpha with its n and 95% bootstrap interval."""
    return study_results(choice_items([study]), study.annotators_per_item, bootstrap=bootstrap)


def choice_alpha(study: Study, *, bootstrap: int = DEFAULT_BOOTSTRAP) -> dict[str, Any]:
    """Nominal alpha over every answer of the study, all tasks together, with its n, interval
    and notes (``ALPHA_KEYS``; a one-task study: the same numbers as its task's alpha)."""
    results = study_results(
        [ChoiceItem(i.item_id, "all", i.topic, i.label, i.answers) for i in choice_items([study])],
        study.annotators_per_item,
        bootstrap=bootstrap,
    ).get("all")
    return {key: results[key] if results else None for key in ALPHA_KEYS}


def choice_results_with_intervals(study: Study) -> dict[str, dict[str, Any]]:
    """Each task's results as the report API gives them: the study page's, which carry every
    interval (``yield_estimate``, ``human_accuracy_estimate``, ``alpha_ci95``)."""
    return choice_study_results(study)


def round_alpha(study: Study, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A pilot round's alpha: nominal alpha over the options, all tasks together, with its n
    and 95% bootstrap interval (``choice_alpha``)."""
    return choice_alpha(study)


def choice_human_accuracy(task: str) -> dict[str, Any] | None:
    """Human accuracy on a goal-step task over every multiple-choice study (the provider of
    goalstep.validation): answers equal to the label / answers."""
    studies = list(Study.objects.filter(kind=MULTIPLE_CHOICE))
    items = [item for item in choice_items(studies) if item.task == task and item.answers]
    if not items:
        return None
    answers = sum(len(item.answers) for item in items)
    correct = sum(answer == item.label for item in items for answer in item.answers)
    return {
        "accuracy": correct / answers,
        "n_answers": answers,
        "n_items": len(items),
        "source": ", ".join(sorted(s.slug for s in studies)),
    }


def choice_tier_records(study: Study, tier: str) -> list[dict[str, Any]]:
    """The items of a tier (``gold``: all annotators chose the label; ``harder``: all but one)
    as goal-step task lines, ready for evaluation."""
    if tier not in ("gold", "harder"):
        raise ValueError("tier must be gold or harder")
    chosen = {item_id for results in choice_study_results(study, bootstrap=0).values() for item_id in results[tier]}
    records = []
    for item in study.items.filter(role=ROLE_MAIN).order_by("position"):
        if item.item_id in chosen:
            records.append(
                {
                    "id": item.item_id,
                    "task": item.source.get("task", ""),
                    "prompt": item.goal,
                    "candidates": list(item.candidate_steps),
                    "label": item.expected,
                    "topic": item.topic,
                    "source_procedure_ids": item.source.get("source_procedure_ids", []),
                }
            )
    return records
