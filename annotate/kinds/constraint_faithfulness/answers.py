"""The answer rules of the constraint-faithfulness kind: a draft cleaned to the answer's shape,
and a submitted answer checked against App. D's questions and Table 10's error types (the
definition's ``clean_draft`` and ``validate_submission``). Pure Python: no Django."""

from __future__ import annotations

from typing import Any

from annotate.constants import MAX_TEXT_LENGTH
from annotate.kinds.answer_lists import answer_list
from annotate.kinds.base import FieldError
from annotate.kinds.constraint_faithfulness.questions import (
    ANSWER_LABELS,
    ANSWERS,
    ERROR_CHOICES,
    MAX_WRONG_STEPS,
    NO,
    NOT_SURE,
    OTHER,
    QUESTIONS,
    YES,
)


def _answer(value: Any) -> str | None:
    return value if isinstance(value, str) and value in ANSWERS else None


def _step_number(value: Any, n_steps: int) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= n_steps:
        return value
    return None


def clean_draft(draft: Any, n_reference: int, n_steps: int) -> dict[str, Any]:
    """A draft keeps what was entered so far in the answer's shape, cut to the size limits;
    nothing is required (drafts may be incomplete)."""
    draft = draft if isinstance(draft, dict) else {}
    wrong = []
    seen: set[int] = set()
    raw = draft.get("wrong_steps")
    for entry in raw[:MAX_WRONG_STEPS] if isinstance(raw, list) else []:
        if not isinstance(entry, dict):
            continue
        step = _step_number(entry.get("step"), n_steps)
        if step is None or step in seen:
            continue
        seen.add(step)
        types = entry.get("error_types")
        other = entry.get("other")
        wrong.append(
            {
                "step": step,
                "error_types": [t for t in ERROR_CHOICES if isinstance(types, list) and t in types],
                "other": other[:MAX_TEXT_LENGTH] if isinstance(other, str) else "",
            }
        )
    comments = draft.get("comments")
    return {
        **{q: _answer(draft.get(q)) for q in QUESTIONS},
        "wrong_steps": sorted(wrong, key=lambda w: w["step"]),
        "comments": comments[:MAX_TEXT_LENGTH] if isinstance(comments, str) else "",
    }


def _questions_checked(answer: dict[str, Any], errors: list[FieldError]) -> dict[str, str | None]:
    """The three questions' answers, each "yes", "no" or "not_sure"; one missing or of another
    value is a problem (kept as None)."""
    cleaned: dict[str, str | None] = {}
    for number, question in enumerate(QUESTIONS, start=1):
        value = _answer(answer.get(question))
        if value is None:
            errors.append(FieldError(question, f"Question {number}: choose Yes, No or Not sure."))
        cleaned[question] = value
    return cleaned


def _marked_steps(answer: dict[str, Any], steps_correct: str | None, errors: list[FieldError]) -> list[Any]:
    """The marked steps as submitted (a list, at most ``MAX_WRONG_STEPS`` of them), which must
    agree with question 3: at least one when it says No, none when it says Yes or Not sure."""
    raw = answer_list(
        answer,
        "wrong_steps",
        MAX_WRONG_STEPS,
        errors,
        not_a_list="must be a list of marked steps",
        too_many=f"at most {MAX_WRONG_STEPS} steps can be marked",
    )
    if steps_correct == NO and not raw:
        errors.append(
            FieldError(
                "wrong_steps",
                "You answered No to question 3: click the wrong steps in the script and select their error types.",
            )
        )
    if steps_correct in (YES, NOT_SURE) and raw:
        said = ANSWER_LABELS[steps_correct]
        errors.append(
            FieldError(
                "wrong_steps", f"You answered {said} to question 3 but marked wrong steps: unmark them or answer No."
            )
        )
    return raw


def _marked_step_number(
    entry: dict[str, Any], position: int, n_steps: int, seen: set[int], errors: list[FieldError]
) -> int | None:
    """A marked step's number: one of the script's steps (1..n), marked once. A problem is
    named by the step's number when it is a whole number, by its place in the list otherwise;
    None when the step is refused."""
    step = entry.get("step")
    step_number = _step_number(step, n_steps)  # the step itself when it is one
    if step_number is None:
        where = (
            f"wrong_steps.{step}.step"
            if isinstance(step, int) and not isinstance(step, bool)
            else f"wrong_steps[{position}].step"
        )
        errors.append(FieldError(where, f"Step {step!r} does not exist: the script has steps 1 to {n_steps}."))
        return None
    if step_number in seen:
        errors.append(FieldError(f"wrong_steps.{step}.step", f"Step {step} is marked twice."))
        return None
    seen.add(step_number)
    return step_number


def _marked_step_errors(entry: dict[str, Any], step: int, errors: list[FieldError]) -> tuple[list[str], str] | None:
    """A marked step's error types (in Table 10's order) and its description under Other: at
    least one type, and a description with Other (a description alone counts as Other). None
    when a type is not one of the choices."""
    types_in = entry.get("error_types") or []
    other = entry.get("other") or ""
    if not isinstance(types_in, list) or any(t not in ERROR_CHOICES for t in types_in):
        errors.append(
            FieldError(
                f"wrong_steps.{step}.error_types",
                f"Step {step}: error types must be among {', '.join(ERROR_CHOICES)}.",
            )
        )
        return None
    if not isinstance(other, str) or len(other) > MAX_TEXT_LENGTH:
        errors.append(
            FieldError(
                f"wrong_steps.{step}.other",
                f"Step {step}: the description must be text of at most {MAX_TEXT_LENGTH} characters.",
            )
        )
        other = ""
    other = other.strip()
    types = [t for t in ERROR_CHOICES if t in types_in or (t == OTHER and other)]
    if not types:
        errors.append(
            FieldError(
                f"wrong_steps.{step}.error_types",
                f"Step {step}: select at least one error type (or Other with a description).",
            )
        )
    elif OTHER in types and not other:
        errors.append(FieldError(f"wrong_steps.{step}.other", f"Step {step}: describe what is wrong under Other."))
    return types, other


def validate_submission(answer: Any, n_reference: int, n_steps: int) -> tuple[dict[str, Any] | None, list[FieldError]]:
    """The rules of a submitted answer (the server decides; the page only helps):

    * each of the three questions is answered "yes", "no" or "not_sure";
    * when question 3 (steps_correct) is "no", at least one wrong step is marked; each marked
      step exists (1..n), is marked once, and has at least one error type of Table 10 or
      "other"; "other" needs a description (a description alone counts as "other");
    * when question 3 is "yes" or "not_sure", no step may be marked.

    Field names: the question keys, ``wrong_steps``, ``wrong_steps.<step>.step`` /
    ``.error_types`` / ``.other`` (``<step>`` is the step number), ``comments``."""
    if not isinstance(answer, dict):
        return None, [FieldError("answer", "The answer is missing.")]
    errors: list[FieldError] = []
    cleaned = _questions_checked(answer, errors)
    wrong = []
    seen: set[int] = set()
    for position, entry in enumerate(_marked_steps(answer, cleaned["steps_correct"], errors), start=1):
        if not isinstance(entry, dict):
            errors.append(FieldError(f"wrong_steps[{position}]", "must be an object"))
            continue
        step = _marked_step_number(entry, position, n_steps, seen, errors)
        marked = None if step is None else _marked_step_errors(entry, step, errors)
        if marked is not None:
            types, other = marked
            wrong.append({"step": step, "error_types": types, "other": other})
    comments = answer.get("comments") or ""
    if not isinstance(comments, str) or len(comments) > MAX_TEXT_LENGTH:
        errors.append(FieldError("comments", f"must be text of at most {MAX_TEXT_LENGTH} characters"))
        comments = ""
    if errors:
        return None, errors
    return {**cleaned, "wrong_steps": sorted(wrong, key=lambda w: w["step"]), "comments": comments.strip()}, []
