"""The results of a constraint-faithfulness study read from its annotations: Fleiss' kappa,
alpha, accuracy by constraint type and error types (the computation is in ``results``, with
the n and interval of every number, as the study page and the report API show them), and a
pilot round's alpha."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from annotate.kinds.base import ROLE_MAIN
from annotate.kinds.constraint_faithfulness.results import FaithfulnessItem, question_alpha, study_results
from annotate.models import Study, StudyItem
from annotate.studies.selectors import study_annotations_counted


def faithfulness_items(study: Study) -> list[FaithfulnessItem]:
    """Main-pool items of a constraint-faithfulness study with the answers that count:
    submitted, not excluded (failed attention checks), not surplus and not flagged broken
    (``annotations_counted``), in submission order."""
    answers: dict[int, list[dict[str, Any]]] = defaultdict(list)
    rows = study_annotations_counted(study).order_by("submitted_at", "pk").values_list("item_id", "answer")
    for item_pk, answer in rows:
        answers[item_pk].append(answer)
    items = StudyItem.objects.filter(study=study, role=ROLE_MAIN).order_by("position")
    return [
        FaithfulnessItem(
            item_id=i.item_id,
            constraint_type=(i.source or {}).get("constraint_type", ""),
            topic=i.topic,
            answers=tuple(answers.get(i.pk, ())),
        )
        for i in items
    ]


def faithfulness_study_results(study: Study, *, bootstrap: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Fleiss' kappa, alpha, accuracy by constraint type and error-type counts of a
    constraint-faithfulness study (annotate/kinds/constraint_faithfulness/results.py)."""
    return study_results(faithfulness_items(study), study.annotators_per_item, bootstrap=bootstrap, seed=seed)


def faithfulness_results_with_intervals(study: Study) -> dict[str, Any]:
    """The study's results as the report API gives them: the study page's, which carry every
    interval (the accuracy cells' 95% Wilson ``ci95``, kappa's and alpha's bootstrap ones)."""
    return faithfulness_study_results(study)


def round_alpha(study: Study, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A pilot round's alpha: nominal alpha over the answers to question 3 (steps correct),
    with its n, 95% bootstrap interval and notes, the same numbers as the results' question 3."""
    return question_alpha(faithfulness_items(study), "steps_correct")
