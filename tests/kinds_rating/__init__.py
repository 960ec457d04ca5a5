"""A 1-5 rating study kind that exists in the test suite only, declared in this one package and
nowhere else: the annotator rates how usable a procedure is. Everything the shared pages,
exports and APIs show of it comes from its declaration: the one-line summary of an answer, its
export and annotations-API columns (``rating``, with the API's ``rating`` filter) and
known-answer column (``expected_rating``), its results
(``rating_results``, with their schema) and a pilot round's alpha (ordinal over the ratings).
Registered by a test with ``kind_register`` and taken away with ``kind_unregister``; its
templates are under ``templates/kinds_rating/``, found because the kind is registered (the
kinds' template loader, annotate/kinds/template_loader.py)."""

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
from annotate.kinds.columns import AnswerColumn, AnswerFilter, AnswerRecord, Column

KEY = "test_rating"
RATINGS = (1, 2, 3, 4, 5)
RESULTS_NAME = "rating_results"


def _rating(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value in RATINGS else None


def parse_record(record: dict[str, Any]) -> ItemSpec:
    """``{"item_id", "goal", "steps", "topic"?, "role"?, "known_rating"?}``; a check or
    qualification item needs its ``known_rating``."""
    if not isinstance(record, dict):
        raise ItemRecordError("a record must be a JSON object")
    steps = record.get("steps")
    if not isinstance(steps, list) or not steps or not all(isinstance(s, str) and s.strip() for s in steps):
        raise ItemRecordError("must be a non-empty list of step texts", "steps")
    goal = record.get("goal")
    if not isinstance(goal, str) or not goal.strip():
        raise ItemRecordError("must be a non-empty string", "goal")
    role = record.get("role", ROLE_MAIN)
    if role not in ROLES:
        raise ItemRecordError(f"must be one of {', '.join(ROLES)}", "role")
    known = record.get("known_rating")
    if known is not None and _rating(known) is None:
        raise ItemRecordError("must be a whole number from 1 to 5", "known_rating")
    if known is None and role in (ROLE_ATTENTION, ROLE_QUALIFICATION):
        raise ItemRecordError(f"is required for an item of role {role}", "known_rating")
    return ItemSpec(
        item_id=record_item_id(record),
        topic=str(record.get("topic", "")),
        goal=goal.strip(),
        reference_steps=[],
        candidate_steps=[s.strip() for s in steps],
        role=role,
        expected=known,
    )


def clean_draft(draft: Any, n_reference: int, n_steps: int) -> dict[str, Any]:
    draft = draft if isinstance(draft, dict) else {}
    return {"rating": _rating(draft.get("rating"))}


def validate_submission(answer: Any, n_reference: int, n_steps: int) -> tuple[dict[str, Any] | None, list[FieldError]]:
    rating = _rating(answer.get("rating")) if isinstance(answer, dict) else None
    if rating is None:
        return None, [FieldError("rating", "choose a rating from 1 to 5")]
    return {"rating": rating}, []


def answer_correct(cleaned: dict[str, Any], item: KnownAnswerItem) -> bool | None:
    """A check's known rating against the answer's; None for an item without one."""
    return None if item.expected is None else bool(cleaned.get("rating") == item.expected)


def expected_from_answer(cleaned: dict[str, Any]) -> int | None:
    return _rating(cleaned.get("rating"))


def answer_summary(answer: dict[str, Any]) -> str:
    return f"rating {answer.get('rating')}"


def expected_summary(expected: Any) -> str:
    return f"rating {expected}"


def _rating_cell(record: AnswerRecord) -> int | None:
    return None if record.broken else _rating(record.answer.get("rating"))


_RATING_SCHEMA = {"type": "integer", "minimum": 1, "maximum": 5, "nullable": True}
RATING_COLUMN = AnswerColumn("rating", _RATING_SCHEMA, "The rating given (null: flagged broken)", _rating_cell)
RESULTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "n_answers": {"type": "integer"},
        "mean_rating": {"type": "object", "additionalProperties": {"type": "number"}},
        "alpha": {"type": "number", "nullable": True},
        "alpha_n": {"type": "integer", "nullable": True},
    },
    "required": ["n_answers", "mean_rating", "alpha", "alpha_n"],
}

KIND = StudyKind(
    key=KEY,
    label="Usability rating (1-5, test)",
    item_template="kinds_rating/item.html",
    codebook_path=None,
    default_instructions="Rate how usable each procedure is, from 1 (unusable) to 5 (ready to follow).",
    parse_record=parse_record,
    clean_draft=clean_draft,
    validate_submission=validate_submission,
    answer_correct=answer_correct,
    expected_from_answer=expected_from_answer,
    answer_summary=answer_summary,
    expected_summary=expected_summary,
    known_answer_column=Column("expected_rating", _RATING_SCHEMA, "A check item's known rating"),
    answer_columns=(RATING_COLUMN,),
    api_columns=(RATING_COLUMN,),
    api_filters=(
        AnswerFilter(
            "rating",
            {"type": "integer", "minimum": 1, "maximum": 5},
            "The rating given",
            lambda value: {"answer__rating": value},
        ),
    ),
    results_function="tests.kinds_rating.study_results.rating_results",
    results_template="kinds_rating/results.html",
    results_name=RESULTS_NAME,
    results_schema=RESULTS_SCHEMA,
    results_summary="mean rating per item and ordinal Krippendorff's alpha",
    round_alpha_function="tests.kinds_rating.study_results.rating_round_alpha",
    round_alpha_label="ordinal, over the ratings",
    round_alpha_note="Ordinal Krippendorff's α over the ratings of each round's counted answers.",
    typical_seconds_per_item=30,
)
