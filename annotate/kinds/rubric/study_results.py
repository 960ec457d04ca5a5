"""A rubric study's results read from its counted main-pool annotations (results.py computes)."""

from __future__ import annotations

from typing import Any

from annotate.kinds.rubric.results import question_level, question_result, rubric_results
from annotate.kinds.rubric.schema import Rubric, rubric_parse
from annotate.models import Rubric as RubricRow
from annotate.models import Study
from annotate.studies.selectors import study_annotations_counted


def study_rubric(study: Study) -> Rubric:
    """The rubric of a rubric study (its kind's key names the stored rubric)."""
    from annotate.kinds.rubric.definition import KEY_PREFIX

    row = RubricRow.objects.get(key=study.kind.removeprefix(KEY_PREFIX))
    return rubric_parse(row.definition)


def _answers(study: Study) -> list[tuple[str, str, dict[str, Any]]]:
    rows = (
        study_annotations_counted(study)
        .order_by("submitted_at", "pk")
        .values_list("item__item_id", "annotator__pid", "answer")
    )
    return [(item_id, pid, answer if isinstance(answer, dict) else {}) for item_id, pid, answer in rows]


def rubric_study_results(study: Study, **options: Any) -> dict[str, Any]:
    """What the study page and the report API show: alpha per question with its level, n and
    95 % interval."""
    return rubric_results(study_rubric(study), _answers(study))


def rubric_round_alpha(study: Study, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """A pilot round's alpha: the first question that has a level of measurement, with its n
    and 95 % interval."""
    rubric = study_rubric(study)
    question = next((q for q in rubric.questions if question_level(q) is not None), None)
    if question is None:
        return {"alpha": None}
    result = question_result(question, _answers(study))
    keys = ("alpha", "alpha_ci95", "alpha_n", "alpha_ci95_not_estimable", "alpha_interval", "alpha_small_sample")
    return {key: result[key] for key in (*keys, "alpha_undefined")}
