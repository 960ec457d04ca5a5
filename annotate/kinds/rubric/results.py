"""A rubric study's results from plain answers: Krippendorff's alpha per question at the
question's level of measurement, with its n and 95 % interval (annotate/stats/levels.py).
Pure: no Django.

* yes/no and multiple choice: nominal;
* Likert: ordinal (the scale's order counts, its distances do not);
* step links: nominal over the set of linked steps taken as one value (two annotators agree on
  an item only when they link exactly the same steps);
* free text: not computed (there is no distance between two texts), and the result says so."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import Any

from annotate.kinds.rubric.schema import FREE_TEXT, LIKERT, STEP_LINKS, Question, Rubric
from annotate.stats.levels import Level, level_alpha

FREE_TEXT_NOTE = "not computed: free text has no agreement measure (no distance between two texts)"


def question_level(question: Question) -> Level | None:
    """The level of measurement of a question's alpha (None: alpha is not computed)."""
    if question.type == FREE_TEXT:
        return None
    return "ordinal" if question.type == LIKERT else "nominal"


def _value(question: Question, value: Any) -> Hashable | None:
    if value is None:
        return None
    if question.type == STEP_LINKS:
        return ",".join(str(step) for step in sorted(value)) if value else "none"
    return value if isinstance(value, Hashable) else None


def answer_matrix(
    question: Question, answers: Iterable[tuple[str, str, dict[str, Any]]]
) -> list[list[Hashable | None]]:
    """Items x annotators of one question's values (``answers``: item id, annotator, answer)."""
    items: dict[str, dict[str, Hashable | None]] = {}
    annotators: dict[str, int] = {}
    for item_id, annotator, answer in answers:
        annotators.setdefault(annotator, len(annotators))
        items.setdefault(item_id, {})[annotator] = _value(question, answer.get(question.id))
    order = sorted(annotators, key=annotators.__getitem__)
    return [[row.get(a) for a in order] for _, row in sorted(items.items())]


def question_result(question: Question, answers: Sequence[tuple[str, str, dict[str, Any]]]) -> dict[str, Any]:
    level = question_level(question)
    answered = sum(1 for _, _, answer in answers if answer.get(question.id) is not None)
    result: dict[str, Any] = {
        "id": question.id,
        "type": question.type,
        "prompt": question.prompt,
        "n_answers": answered,
    }
    if level is None:
        return {
            **result,
            "level": None,
            "alpha": None,
            "alpha_ci95": None,
            "alpha_n": None,
            "alpha_ci95_not_estimable": None,
            "alpha_interval": None,
            "alpha_small_sample": None,
            "n_single": None,
            "alpha_undefined": None,
            "not_computed": FREE_TEXT_NOTE,
        }
    return {**result, **level_alpha(answer_matrix(question, answers), level), "not_computed": None}


def rubric_results(rubric: Rubric, answers: Sequence[tuple[str, str, dict[str, Any]]]) -> dict[str, Any]:
    """Every question's alpha (``questions``, in the rubric's order) over counted main-pool
    answers (item id, annotator, cleaned answer), with the number of answers and items."""
    return {
        "rubric": rubric.key,
        "n_answers": len(answers),
        "n_items": len({item_id for item_id, _, _ in answers}),
        "questions": [question_result(question, answers) for question in rubric.questions],
    }
