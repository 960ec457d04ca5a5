"""The ``critical_failure`` study kind (How2Everything §4.1-4.3, App. C.1, App. H.3).

An annotator reads a goal, the reference procedure L1 and a candidate L2, and says whether
L2 has any critical failure; with failures, each one has a description and links to the
relevant L1 and/or L2 steps (numbered from 1). Pure Python: no Django imports."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from annotate.constants import MAX_FAILURES_PER_ANNOTATION, MAX_TEXT_LENGTH
from annotate.kinds.answer_lists import answer_list
from annotate.kinds.base import (
    REPORT_AGREEMENT,
    REPORT_METRIC_AGREEMENT,
    ROLE_ATTENTION,
    ROLE_MAIN,
    ROLE_QUALIFICATION,
    FieldError,
    ItemRecordError,
    ItemSpec,
    KnownAnswerItem,
    StudyKind,
    record_item_id,
)
from annotate.kinds.columns import AnswerColumn, AnswerFilter, AnswerRecord, Column

KEY = "critical_failure"

DEFAULT_INSTRUCTIONS = """\
This is a research study about instructions written by AI language models. Each task shows a goal and two numbered lists of steps: L1, a valid reference solution, and L2, a solution to evaluate. You decide whether L2 has any critical failure: a problem serious enough that someone following L2 would not reach the goal, or that makes L2 unusable as instructions.

How it works:
1. A short training walks you through what counts as a critical failure and what does not, with examples. Each example has a check question.
2. A short qualification test with a few tasks whose answers are known. You need to pass it to continue.
3. The tasks. Aim to spend 1-2 minutes on each. Confirm that you have read the goal, click every step of both lists to confirm you have read it, then answer. If you find critical failures, describe each one and select the steps it concerns. Submission opens after a minimum time.

Please do not use AI tools; we want your own judgment. You may look up unfamiliar words. Some tasks have known answers and check attention. Your work is saved as you go: if you reload the page or lose your connection, you can continue where you were.

Your answers are stored with your Prolific ID and used only for research on evaluating AI-written instructions. By continuing you agree to take part; you can stop at any time by returning the study on Prolific."""
CODEBOOK = Path(__file__).with_name("codebook.json")


# ----------------------------------------------------------------------------- input records


def _text(record: dict[str, Any], name: str, *, required: bool = True) -> str:
    if name not in record or record[name] is None:
        if required:
            raise ItemRecordError("is required", name)
        return ""
    value = record[name]
    if not isinstance(value, str):
        raise ItemRecordError(f"must be a string, not {type(value).__name__}", name)
    if required and not value.strip():
        raise ItemRecordError("must not be empty", name)
    return value.strip()


def _steps(record: dict[str, Any], name: str) -> list[str]:
    if name not in record:
        raise ItemRecordError("is required", name)
    value = record[name]
    if not isinstance(value, list) or not value:
        raise ItemRecordError("must be a non-empty list of strings", name)
    steps = []
    for index, step in enumerate(value):
        if not isinstance(step, str) or not step.strip():
            raise ItemRecordError("must be a non-empty string", f"{name}[{index}]")
        steps.append(step.strip())
    return steps


def _known_answer(record: dict[str, Any], name: str) -> tuple[bool, str]:
    value = record[name]
    if not isinstance(value, dict):
        raise ItemRecordError('must be an object like {"has_failure": true}', name)
    if not isinstance(value.get("has_failure"), bool):
        raise ItemRecordError("must be true or false", f"{name}.has_failure")
    explanation = value.get("explanation", "")
    if not isinstance(explanation, str):
        raise ItemRecordError("must be a string", f"{name}.explanation")
    return value["has_failure"], explanation.strip()


def parse_record(record: dict[str, Any]) -> ItemSpec:
    """One input line: ``{"item_id", "topic", "goal", "reference_steps", "candidate_steps"}``
    plus at most one of ``"attention_check": {"has_failure"}`` and
    ``"qualification": {"has_failure", "explanation"}``."""
    if not isinstance(record, dict):
        raise ItemRecordError(f"a record must be a JSON object, not {type(record).__name__}")
    item_id = record_item_id(record)
    spec = ItemSpec(
        item_id=item_id,
        topic=_text(record, "topic", required=False),
        goal=_text(record, "goal"),
        reference_steps=_steps(record, "reference_steps"),
        candidate_steps=_steps(record, "candidate_steps"),
    )
    if "attention_check" in record and "qualification" in record:
        raise ItemRecordError(
            "an item is either an attention check or a qualification item, not both", "attention_check"
        )
    if "attention_check" in record:
        spec.role = ROLE_ATTENTION
        spec.expected, spec.explanation = _known_answer(record, "attention_check")
    elif "qualification" in record:
        spec.role = ROLE_QUALIFICATION
        spec.expected, spec.explanation = _known_answer(record, "qualification")
        if not spec.explanation:
            raise ItemRecordError("is required for a qualification item", "qualification.explanation")
    else:
        spec.role = ROLE_MAIN
    source = record.get("source")
    if source is not None and not isinstance(source, dict):
        raise ItemRecordError("must be an object", "source")
    spec.source = dict(source or {})
    return spec


# ----------------------------------------------------------------------------- answers


def _step_list(value: Any, limit: int) -> list[int]:
    """Lenient: keep integers in 1..limit, sorted and unique (for drafts)."""
    if not isinstance(value, list):
        return []
    return sorted({v for v in value if isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= limit})


def clean_draft(draft: Any, n_l1: int, n_l2: int) -> dict[str, Any]:
    """A draft keeps whatever the annotator has entered so far, in the answer's shape,
    truncated to the size limits. Nothing is validated beyond shape: drafts may be incomplete."""
    draft = draft if isinstance(draft, dict) else {}
    has_failure = draft.get("has_failure")
    failures = []
    for failure in (
        (draft.get("failures") or [])[:MAX_FAILURES_PER_ANNOTATION] if isinstance(draft.get("failures"), list) else []
    ):
        if not isinstance(failure, dict):
            continue
        description = failure.get("description")
        failures.append(
            {
                "description": description[:MAX_TEXT_LENGTH] if isinstance(description, str) else "",
                "L1_steps": _step_list(failure.get("L1_steps"), n_l1),
                "L2_steps": _step_list(failure.get("L2_steps"), n_l2),
            }
        )
    comments = draft.get("comments")
    return {
        "has_failure": has_failure if isinstance(has_failure, bool) else None,
        "failures": failures,
        "comments": comments[:MAX_TEXT_LENGTH] if isinstance(comments, str) else "",
    }


def _strict_steps(value: Any, limit: int, field: str, errors: list[FieldError]) -> list[int]:
    if value is None:
        return []
    if not isinstance(value, list):
        errors.append(FieldError(field, "must be a list of step numbers"))
        return []
    steps: set[int] = set()
    for number in value:
        if not isinstance(number, int) or isinstance(number, bool):
            errors.append(FieldError(field, f"{number!r} is not a step number"))
        elif not 1 <= number <= limit:
            list_name = field.rsplit(".", 1)[-1].split("_")[0]
            errors.append(FieldError(field, f"{list_name}.{number} does not exist: {list_name} has steps 1 to {limit}"))
        else:
            steps.add(number)
    return sorted(steps)


def _blank_failure(failure: Any) -> bool:
    """A failure entry with nothing in it: an object whose description is empty or blank and
    whose L1 and L2 step lists are empty or absent."""
    if not isinstance(failure, dict):
        return False
    description = failure.get("description")
    if description not in (None, "") and not (isinstance(description, str) and not description.strip()):
        return False
    return all(failure.get(name) in (None, []) for name in ("L1_steps", "L2_steps"))


def validate_submission(answer: Any, n_l1: int, n_l2: int) -> tuple[dict[str, Any] | None, list[FieldError]]:
    """The rules of a submitted answer (the server decides; the page only helps):

    * has_failure must be chosen (true: "Critical failures identified", false: "No critical
      failures identified");
    * with has_failure, at least one failure; each failure has a description and at least
      one linked step; step numbers lie in 1..n (L1) and 1..m (L2);
    * without has_failure, no failures may be listed; a blank failure (no description, no
      linked step: the one the page adds when "Critical failures identified" is chosen) is
      dropped rather than refused.
    """
    errors: list[FieldError] = []
    if not isinstance(answer, dict):
        return None, [FieldError("answer", "The answer is missing.")]
    has_failure = answer.get("has_failure")
    if not isinstance(has_failure, bool):
        errors.append(
            FieldError("has_failure", 'Choose "No critical failures identified" or "Critical failures identified".')
        )
    failures_in = answer_list(
        answer,
        "failures",
        MAX_FAILURES_PER_ANNOTATION,
        errors,
        not_a_list="must be a list",
        too_many=f"at most {MAX_FAILURES_PER_ANNOTATION} failures can be listed",
    )
    comments = answer.get("comments") or ""
    if not isinstance(comments, str):
        errors.append(FieldError("comments", "must be text"))
        comments = ""
    elif len(comments) > MAX_TEXT_LENGTH:
        errors.append(FieldError("comments", f"must be at most {MAX_TEXT_LENGTH} characters"))
    if has_failure is False:
        # The page adds an empty failure when "Critical failures identified" is chosen; going
        # back to "No critical failures" leaves nothing the annotator typed in it. Such a blank
        # entry (no description, no linked step) is dropped, not held against the submit.
        failures_in = [f for f in failures_in if not _blank_failure(f)]
    if has_failure is True and not failures_in:
        errors.append(
            FieldError(
                "failures", 'You chose "Critical failures identified": add at least one failure with "+ Add Failure".'
            )
        )
    if has_failure is False and failures_in:
        errors.append(
            FieldError(
                "failures",
                'You chose "No critical failures identified" but listed failures: remove them or change your choice.',
            )
        )
    failures = []
    for index, failure in enumerate(failures_in, start=1):
        where = f"failures[{index}]"
        if not isinstance(failure, dict):
            errors.append(FieldError(where, "must be an object"))
            continue
        description = failure.get("description")
        if not isinstance(description, str) or not description.strip():
            errors.append(FieldError(f"{where}.description", f"Failure {index} needs a short description."))
            description = ""
        elif len(description) > MAX_TEXT_LENGTH:
            errors.append(
                FieldError(
                    f"{where}.description",
                    f"Failure {index}: the description must be at most {MAX_TEXT_LENGTH} characters.",
                )
            )
        l1 = _strict_steps(failure.get("L1_steps"), n_l1, f"{where}.L1_steps", errors)
        l2 = _strict_steps(failure.get("L2_steps"), n_l2, f"{where}.L2_steps", errors)
        if not l1 and not l2 and not any(e.field.startswith(f"{where}.L") for e in errors):
            errors.append(
                FieldError(f"{where}.steps", f"Failure {index}: select at least one relevant step from L1 or L2.")
            )
        failures.append({"description": description.strip(), "L1_steps": l1, "L2_steps": l2})
    if errors:
        return None, errors
    return {"has_failure": has_failure, "failures": failures, "comments": comments.strip()}, []


def answer_label(cleaned: dict[str, Any]) -> bool:
    """The has_failure label every critical-failure annotation stores."""
    return bool(cleaned["has_failure"])


def expected_from_answer(cleaned: dict[str, Any]) -> bool:
    """A gold answer as a known answer: its has_failure label (what checks and qualification
    items know)."""
    return answer_label(cleaned)


def answer_correct(cleaned: dict[str, Any], item: KnownAnswerItem) -> bool | None:
    """An attention check's or qualification item's known has_failure against the answer's;
    None for main items (their answers are what the study measures)."""
    expected = item.expected
    if item.role not in (ROLE_ATTENTION, ROLE_QUALIFICATION) or not isinstance(expected, bool):
        return None
    return answer_label(cleaned) == expected


def required_openings(n_l1: int, n_l2: int) -> list[str]:
    """Figure 7: every step of both lists must be clicked to confirm it was read."""
    return [f"L1.{i}" for i in range(1, n_l1 + 1)] + [f"L2.{i}" for i in range(1, n_l2 + 1)]


def answer_summary(answer: dict[str, Any]) -> str:
    """The label of a stored answer: has_failure or no_failure."""
    return "has_failure" if answer.get("has_failure") else "no_failure"


def expected_summary(expected: Any) -> str:
    return "has_failure" if expected else "no_failure"


def _failures(record: AnswerRecord) -> list[dict[str, Any]]:
    return [
        {"description": f["description"], "L1_steps": f["L1_steps"], "L2_steps": f["L2_steps"]} for f in record.failures
    ]


_NULLABLE_BOOLEAN = {"type": "boolean", "nullable": True}
_STEPS = {"type": "array", "items": {"type": "integer", "minimum": 1}}
# The columns every critical-failure export has carried (the agreement report reads them back:
# annotate/stats/records.py), in their order.
ANSWER_COLUMNS = (
    AnswerColumn(
        "has_failure",
        _NULLABLE_BOOLEAN,
        "The annotator's label (null: the item was flagged broken)",
        lambda record: record.has_failure,
    ),
    AnswerColumn(
        "failures",
        {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"description": {"type": "string"}, "L1_steps": _STEPS, "L2_steps": _STEPS},
                "required": ["description", "L1_steps", "L2_steps"],
            },
        },
        "Each critical failure with its description and linked L1 and L2 steps (numbered from 1)",
        _failures,
    ),
    AnswerColumn(
        "gold_has_failure",
        _NULLABLE_BOOLEAN,
        "The item's gold label's has_failure (null: no gold label)",
        lambda record: record.gold_has_failure,
    ),
)
# The annotations API's own fields of a critical-failure annotation: its label and failures.
API_COLUMNS = ANSWER_COLUMNS[:2]
API_FILTERS = (
    AnswerFilter(
        "label",
        {"type": "string", "enum": ["has_failure", "no_failure"]},
        "The annotator's has_failure label",
        lambda value: {"has_failure": value == "has_failure"},
    ),
)
KNOWN_ANSWER_COLUMN = Column(
    "expected_has_failure", _NULLABLE_BOOLEAN, "An attention-check or qualification item's known has_failure"
)


# The note under the study page's table of pilot rounds.
ROUND_ALPHA_NOTE = (
    "Binary Krippendorff's α over has_failure, with its 95% bootstrap interval over the n items "
    "that have two or more counted annotations (the agreement page's numbers). How2Everything "
    "§4.3: α = 0.273 in the early pilots, 0.593 in the final round."
)


KIND = StudyKind(
    key=KEY,
    label="Critical failure (How2Score)",
    item_template="annotate/kinds/critical_failure_item.html",
    codebook_path=CODEBOOK,
    default_instructions=DEFAULT_INSTRUCTIONS,
    parse_record=parse_record,
    clean_draft=clean_draft,
    validate_submission=validate_submission,
    answer_label=answer_label,
    answer_correct=answer_correct,
    expected_from_answer=expected_from_answer,
    required_openings=required_openings,
    requires_goal_acknowledgement=True,
    typical_seconds_per_item=90,  # the middle of App. C.1's "Aim to spend 1-2 minutes per instance"
    answer_summary=answer_summary,
    expected_summary=expected_summary,
    known_answer_column=KNOWN_ANSWER_COLUMN,
    answer_columns=ANSWER_COLUMNS,
    api_columns=API_COLUMNS,
    api_filters=API_FILTERS,
    item_script="annotate/critical_failure.js",
    shortcuts_template="annotate/kinds/critical_failure_shortcuts.html",
    round_alpha_function="annotate.kinds.critical_failure.study_results.round_alpha",
    round_alpha_label="binary",
    round_alpha_note=ROUND_ALPHA_NOTE,
    results_summary="the agreement and metric-agreement reports",
    reports=frozenset({REPORT_AGREEMENT, REPORT_METRIC_AGREEMENT}),
    interface_version="cf-ui-1",  # what every critical-failure annotation has stored
)
