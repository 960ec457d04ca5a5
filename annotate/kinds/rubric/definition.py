"""The study kind a rubric defines (schema.py), built from the rubric's data. Pure Python: no Django.

An item is a procedure (a goal, the candidate's steps, optionally reference steps) and the
annotator answers the rubric's questions about it. The answer is ``{question id: value}``:
``"yes"``/``"no"``, a whole number on the Likert scale, an option's text, free text, or the
sorted 1-based numbers of linked candidate steps; ``None`` where a question is unanswered. An
attention or qualification item carries ``known_answer`` (``{question id: value}``; no free
text), the item's ``expected``, which ``answer_correct`` compares question by question."""

from __future__ import annotations

from typing import Any

from annotate.kinds.base import (
    ROLE_ATTENTION,
    ROLE_MAIN,
    ROLE_QUALIFICATION,
    ROLES,
    FieldError,
    ItemRecordError,
    ItemSpec,
    KnownAnswerItem,
    StudyKind,
    record_item_id,
)
from annotate.kinds.columns import AnswerColumn, AnswerRecord, Column
from annotate.kinds.rubric.schema import (
    FREE_TEXT,
    LIKERT,
    STEP_LINKS,
    YES_NO,
    Question,
    Rubric,
    RubricError,
    answer_check,
    known_answer_check,
    value_check,
)

KEY_PREFIX = "rubric:"
MAX_STEPS = 100
MAX_STEP_LENGTH = 5_000
MAX_GOAL_LENGTH = 5_000
RESULTS_NAME = "rubric_results"


def kind_key(rubric_key: str) -> str:
    """The study kind's key of a rubric (``rubric:<key>``)."""
    return f"{KEY_PREFIX}{rubric_key}"


def _text(record: dict[str, Any], name: str, *, required: bool, maximum: int) -> str:
    value = record.get(name)
    if value is None:
        if required:
            raise ItemRecordError("is required", name)
        return ""
    if not isinstance(value, str):
        raise ItemRecordError(f"must be a string, not {type(value).__name__}", name)
    if required and not value.strip():
        raise ItemRecordError("must not be empty", name)
    if len(value) > maximum:
        raise ItemRecordError(f"must be at most {maximum} characters", name)
    return value.strip()


def _steps(record: dict[str, Any], name: str, *, required: bool) -> list[str]:
    value = record.get(name)
    if value is None and not required:
        return []
    if not isinstance(value, list) or not value:
        raise ItemRecordError("must be a non-empty list of strings", name)
    if len(value) > MAX_STEPS:
        raise ItemRecordError(f"must have at most {MAX_STEPS} steps", name)
    steps = []
    for index, step in enumerate(value):
        if not isinstance(step, str) or not step.strip():
            raise ItemRecordError("must be a non-empty string", f"{name}[{index}]")
        if len(step) > MAX_STEP_LENGTH:
            raise ItemRecordError(f"must be at most {MAX_STEP_LENGTH} characters", f"{name}[{index}]")
        steps.append(step.strip())
    return steps


def _parse_record(rubric: Rubric, record: dict[str, Any]) -> ItemSpec:
    """One input line: ``{"item_id", "goal", "candidate_steps", "topic"?, "reference_steps"?,
    "role"? (main, attention, qualification), "known_answer"? ({question id: value}, required
    for attention and qualification items), "explanation"?, "source"?}``."""
    if not isinstance(record, dict):
        raise ItemRecordError(f"a record must be a JSON object, not {type(record).__name__}")
    item_id = record_item_id(record)
    role = record.get("role", ROLE_MAIN)
    if role not in ROLES:
        raise ItemRecordError(f"must be one of {', '.join(ROLES)}", "role")
    candidate = _steps(record, "candidate_steps", required=True)
    expected: dict[str, Any] | None = None
    if record.get("known_answer") is not None:
        try:
            expected = known_answer_check(rubric, record["known_answer"])
        except RubricError as exc:
            path, message = exc.problems[0]
            raise ItemRecordError(message, path) from None
        for question_id, value in expected.items():
            if isinstance(value, list) and any(step > len(candidate) for step in value):
                raise ItemRecordError(
                    f"links a step beyond the {len(candidate)} candidate steps", f"known_answer.{question_id}"
                )
    elif role in (ROLE_ATTENTION, ROLE_QUALIFICATION):
        raise ItemRecordError(f"is required for an item of role {role}", "known_answer")
    source = record.get("source")
    if source is not None and not isinstance(source, dict):
        raise ItemRecordError("must be an object", "source")
    return ItemSpec(
        item_id=item_id,
        topic=_text(record, "topic", required=False, maximum=200),
        goal=_text(record, "goal", required=True, maximum=MAX_GOAL_LENGTH),
        reference_steps=_steps(record, "reference_steps", required=False),
        candidate_steps=candidate,
        role=role,
        expected=expected,
        explanation=_text(record, "explanation", required=False, maximum=MAX_GOAL_LENGTH),
        source=dict(source or {}),
    )


def _clean_draft(rubric: Rubric, draft: Any, n_steps: int) -> dict[str, Any]:
    """What can be kept of a draft: each question's value where it is valid, never a refusal."""
    draft = draft if isinstance(draft, dict) else {}
    cleaned: dict[str, Any] = {}
    for question in rubric.questions:
        value, problem = value_check(question, draft.get(question.id), n_steps)
        cleaned[question.id] = value if problem is None else None
    return cleaned


def _validate(rubric: Rubric, answer: Any, n_steps: int) -> tuple[dict[str, Any] | None, list[FieldError]]:
    cleaned, problems = answer_check(rubric, answer, n_steps)
    if problems:
        number = {f"answer.{q.id}": index for index, q in enumerate(rubric.questions, start=1)}
        return None, [
            FieldError(path, f"question {number[path]}: {message}" if path in number else message)
            for path, message in problems
        ]
    return cleaned, []


def _same(value: Any, known: Any) -> bool:
    if isinstance(known, list):
        return isinstance(value, list) and sorted(value) == sorted(known)
    return bool(value == known)


def _answer_correct(cleaned: dict[str, Any], item: KnownAnswerItem) -> bool | None:
    known = item.expected
    if not isinstance(known, dict) or not known:
        return None
    return all(_same(cleaned.get(question_id), value) for question_id, value in known.items())


def _expected_from_answer(rubric: Rubric, cleaned: dict[str, Any]) -> dict[str, Any] | None:
    known = {q.id: cleaned.get(q.id) for q in rubric.questions if q.type != FREE_TEXT and cleaned.get(q.id) is not None}
    return known or None


def export_column(question_id: str) -> str:
    return f"answer.{question_id}"


def _cell_schema(question: Question) -> dict[str, Any]:
    """The OpenAPI schema of one question's value (null: unanswered)."""
    if question.type == YES_NO:
        return {"type": "string", "enum": ["yes", "no"], "nullable": True}
    if question.type == LIKERT:
        return {"type": "integer", "nullable": True}
    if question.type == STEP_LINKS:
        return {"type": "array", "items": {"type": "integer", "minimum": 1}, "nullable": True}
    return {"type": "string", "nullable": True}


def _answer_column(question: Question) -> AnswerColumn:
    def cell(record: AnswerRecord) -> Any:
        return record.answer.get(question.id)

    return AnswerColumn(export_column(question.id), _cell_schema(question), f"The answer to {question.id!r}", cell)


def answer_summary(rubric: Rubric, answer: dict[str, Any]) -> str:
    """Each answered question with its value (free text left out), in the rubric's order."""
    parts = [f"{q.id} {answer[q.id]}" for q in rubric.questions if q.type != FREE_TEXT and answer.get(q.id) is not None]
    return " · ".join(parts) if parts else "no answer"


KNOWN_ANSWER_COLUMN = Column(
    "expected_answer",
    {"type": "object", "nullable": True},
    "An attention-check or qualification item's known answers by question id",
)
# What every rubric kind's results are (results.py, ``rubric_results``): the generic shape.
RESULTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "A rubric's kind: Krippendorff's alpha per question with its level of measurement "
    "(nominal, ordinal; none for free text), n and 95% interval",
    "properties": {
        "rubric": {"type": "string"},
        "n_answers": {"type": "integer"},
        "n_items": {"type": "integer"},
        "questions": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "string"},
                    "type": {"type": "string"},
                    "prompt": {"type": "string"},
                    "n_answers": {"type": "integer"},
                    "level": {"type": "string", "enum": ["nominal", "ordinal"], "nullable": True},
                    "alpha": {"type": "number", "nullable": True},
                    "alpha_ci95": {"type": "array", "items": {"type": "number"}, "nullable": True},
                    "alpha_n": {"type": "integer", "nullable": True},
                    "not_computed": {"type": "string", "nullable": True},
                },
                "required": ["id", "type", "prompt", "n_answers", "level", "alpha", "not_computed"],
            },
        },
    },
    "required": ["rubric", "n_answers", "n_items", "questions"],
}


def rubric_kind(rubric: Rubric) -> StudyKind:
    """The study kind of a checked rubric: the shared one-item page with the rubric's form
    (annotate/kinds/rubric_item.html and form_kind.js), the answer checked per question, one
    export column per question, known answers compared per question, and alpha per question
    at its level of measurement (study_results.py)."""
    # What the item template shows of each question (the Likert scale's points with their labels).
    questions = [{**q.as_dict(), "points": q.scale_points} for q in rubric.questions]
    return StudyKind(
        key=kind_key(rubric.key),
        label=rubric.title,
        item_template="annotate/kinds/rubric_item.html",
        codebook_path=None,
        default_instructions=rubric.instructions,
        parse_record=lambda record: _parse_record(rubric, record),
        clean_draft=lambda draft, n_reference, n_steps: _clean_draft(rubric, draft, n_steps),
        validate_submission=lambda answer, n_reference, n_steps: _validate(rubric, answer, n_steps),
        answer_correct=_answer_correct,
        expected_from_answer=lambda cleaned: _expected_from_answer(rubric, cleaned),
        item_context=lambda item: {"questions": questions, "rubric_key": rubric.key},
        answer_columns=tuple(_answer_column(q) for q in rubric.questions),
        answer_summary=lambda answer: answer_summary(rubric, answer),
        # Known answers by question, as constraint faithfulness gives its own.
        known_answer_column=KNOWN_ANSWER_COLUMN,
        file_field_names={},
        results_function="annotate.kinds.rubric.study_results.rubric_study_results",
        results_template="annotate/kinds/rubric_results.html",
        results_name=RESULTS_NAME,
        results_schema=RESULTS_SCHEMA,
        round_alpha_function="annotate.kinds.rubric.study_results.rubric_round_alpha",
        round_alpha_label="first question",
        round_alpha_note="A pilot round's alpha is the first question's with a level of measurement; "
        "every question's alpha is in the rubric results.",
        results_summary="Krippendorff's alpha per question at its level of measurement",
        typical_seconds_per_item=60,
    )
