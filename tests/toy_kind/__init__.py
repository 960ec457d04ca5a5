"""A fourth study kind that lives in the test suite only: the annotator rates how clear a
candidate procedure is (1 to 5). It shows that a kind plugs in with nothing but its own
package: the definition (``KIND``), its results (``study_results``) and its templates
(``templates/toy_kind/``), registered by a test fixture and taken away again after it."""

from __future__ import annotations

from typing import Any

from annotate.kinds.base import ROLE_MAIN, ROLES, FieldError, ItemRecordError, ItemSpec, StudyKind

KEY = "toy_clarity"
RATINGS = (1, 2, 3, 4, 5)


def parse_record(record: dict[str, Any]) -> ItemSpec:
    """``{"id", "goal", "steps", "topic"?, "role"?, "known_rating"?}``."""
    steps = record.get("steps")
    if not isinstance(steps, list) or not steps or not all(isinstance(s, str) and s.strip() for s in steps):
        raise ItemRecordError("must be a non-empty list of step texts", "steps")
    role = record.get("role", ROLE_MAIN)
    if role not in ROLES:
        raise ItemRecordError(f"must be one of {', '.join(ROLES)}", "role")
    known = record.get("known_rating")
    if known is not None and known not in RATINGS:
        raise ItemRecordError("must be a rating from 1 to 5", "known_rating")
    return ItemSpec(
        item_id=str(record["id"]),
        topic=str(record.get("topic", "")),
        goal=str(record["goal"]),
        reference_steps=[],
        candidate_steps=list(steps),
        role=role,
        expected=None if known is None else {"rating": known},
    )


def clean_draft(draft: Any, n_reference: int, n_steps: int) -> dict[str, Any]:
    draft = draft if isinstance(draft, dict) else {}
    rating = draft.get("rating")
    return {"rating": rating if rating in RATINGS else None}


def validate_submission(answer: Any, n_reference: int, n_steps: int) -> tuple[dict[str, Any] | None, list[FieldError]]:
    if not isinstance(answer, dict) or answer.get("rating") not in RATINGS:
        return None, [FieldError("rating", "choose a rating from 1 to 5")]
    return {"rating": answer["rating"]}, []


def answer_correct(cleaned: dict[str, Any], item: Any) -> bool | None:
    known = getattr(item, "expected", None)
    return None if not known else cleaned["rating"] == known["rating"]


KIND = StudyKind(
    key=KEY,
    label="Clarity rating (toy)",
    item_template="toy_kind/item.html",
    codebook_path=None,
    default_instructions="Rate how clear each procedure is, from 1 (unusable) to 5 (perfectly clear).",
    parse_record=parse_record,
    clean_draft=clean_draft,
    validate_submission=validate_submission,
    answer_correct=answer_correct,
    results_function="tests.toy_kind.study_results.clarity_results",
    results_template="toy_kind/results.html",
    results_name="clarity_results",
)
