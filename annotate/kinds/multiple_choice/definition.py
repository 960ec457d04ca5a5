"""The ``multiple_choice`` study kind: crowd validation of the goal-step tasks (Zhang, Lyu,
Callison-Burch 2020, §3.4, Figure 4).

An annotator reads a prompt (a goal, or a step for goal inference) and its candidates and
chooses the most likely one, or "None of the above is likely"; step-ordering items (two
candidates: which step comes first) offer "Neutral" instead. The paper's guidance: "if
multiple options seem equally likely, you have to choose one". Pure Python: no Django.

Input lines are the lines ``goalstep_build`` writes: ``{"id", "task", "prompt",
"candidates", "label", "topic", "source_procedure_ids"}`` (``item_id`` is accepted for
``id``), plus at most one of ``"attention_check": {"label": n}`` and ``"qualification":
{"label": n, "explanation": str}``. On a study item the prompt is kept in ``goal`` and the
candidates in ``candidate_steps``; the label in ``expected``."""

from __future__ import annotations

from typing import Any

from annotate.constants import MAX_TEXT_LENGTH
from annotate.kinds.base import (
    ROLE_ATTENTION,
    ROLE_MAIN,
    ROLE_QUALIFICATION,
    FieldError,
    ItemRecordError,
    ItemSpec,
    KnownAnswerItem,
    StudyKind,
)
from annotate.kinds.columns import AnswerColumn, AnswerFilter, Column

KEY = "multiple_choice"
TASKS = ("step_inference", "goal_inference", "step_ordering")
NONE_OF_THE_ABOVE = "none"  # "None of the above is likely" (Figure 4)
NEUTRAL = "neutral"  # step ordering: neither order is more likely (§3.4)
ORDERING_CANDIDATES = 2  # step-ordering items have two candidates, every other task four

GUIDANCE = "If multiple options seem equally likely, you have to choose one, but don't worry too much about it."

DEFAULT_INSTRUCTIONS = f"""\
This is a research study about everyday procedures. Each task shows a goal (or an action) and a few options. Choose the option that is the most likely answer to the question:

* which action is the most likely to help accomplish the goal;
* which goal the action is the most likely to help accomplish;
* which of two actions comes first when accomplishing the goal.

{GUIDANCE} Answer according to your common sense, not necessarily what you would personally do. If the actions or goals are hard to understand, do your best to answer; you may look up words you don't understand. Choose "None of the above is likely" (or "Neutral" for which-comes-first questions) only when no option fits at all.

Keyboard: 1-4 choose an option of the current question, 0 chooses "None of the above" or "Neutral", J and K move to the next and previous question, Ctrl+Enter submits the page.

Please do not use AI tools; we want your own judgment. Some questions have known answers and check attention. Your answers are saved as you go.

Your answers are stored with your Prolific ID and used only for research on reasoning about goals and steps. By continuing you agree to take part; you can stop at any time by returning the study on Prolific."""


def _text(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ItemRecordError("must be a non-empty string", field)
    return value.strip()


def _label(value: Any, n: int, field: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < n:
        raise ItemRecordError(f"must be a candidate index from 0 to {n - 1}", field)
    return value


def parse_record(record: dict[str, Any]) -> ItemSpec:
    if not isinstance(record, dict):
        raise ItemRecordError(f"a record must be a JSON object, not {type(record).__name__}")
    item_id = record.get("id", record.get("item_id"))
    if isinstance(item_id, int) and not isinstance(item_id, bool):
        item_id = str(item_id)
    if not isinstance(item_id, str) or not item_id.strip() or len(item_id) > 200:
        raise ItemRecordError("is required: a non-empty string of at most 200 characters", "id")
    task = record.get("task")
    if task not in TASKS:
        raise ItemRecordError(f"must be one of {', '.join(TASKS)}", "task")
    candidates_in = record.get("candidates")
    expected = ORDERING_CANDIDATES if task == "step_ordering" else 4
    if not isinstance(candidates_in, list) or len(candidates_in) != expected:
        raise ItemRecordError(f"must be a list of {expected} strings for {task}", "candidates")
    candidates = [_text(c, f"candidates[{i}]") for i, c in enumerate(candidates_in)]
    topic = record.get("topic") or ""
    if not isinstance(topic, str):
        raise ItemRecordError("must be a string", "topic")
    spec = ItemSpec(
        item_id=item_id.strip(),
        topic=topic.strip(),
        goal=_text(record.get("prompt"), "prompt"),
        reference_steps=[],
        candidate_steps=candidates,
    )
    if "label" in record:
        spec.expected = _label(record["label"], len(candidates), "label")
    if "attention_check" in record and "qualification" in record:
        raise ItemRecordError(
            "an item is either an attention check or a qualification item, not both", "attention_check"
        )
    for role, name in ((ROLE_ATTENTION, "attention_check"), (ROLE_QUALIFICATION, "qualification")):
        if name not in record:
            continue
        known = record[name]
        if not isinstance(known, dict):
            raise ItemRecordError('must be an object like {"label": 0}', name)
        spec.role = role
        spec.expected = _label(known.get("label"), len(candidates), f"{name}.label")
        explanation = known.get("explanation", "")
        if not isinstance(explanation, str):
            raise ItemRecordError("must be a string", f"{name}.explanation")
        spec.explanation = explanation.strip()
        if role == ROLE_QUALIFICATION and not spec.explanation:
            raise ItemRecordError("is required for a qualification item", f"{name}.explanation")
    if spec.role == ROLE_MAIN and spec.expected is None:
        raise ItemRecordError("is required (the index of the right candidate)", "label")
    source = {"task": task}
    ids = record.get("source_procedure_ids")
    if ids is not None:
        if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
            raise ItemRecordError("must be a list of integers", "source_procedure_ids")
        source["source_procedure_ids"] = ids
    extra = record.get("source")
    if extra is not None and not isinstance(extra, dict):
        raise ItemRecordError("must be an object", "source")
    spec.source = {**(extra or {}), **source}
    return spec


def extra_options(n_candidates: int) -> list[str]:
    """The options besides the candidates: "neutral" for step ordering, else "none"."""
    return [NEUTRAL] if n_candidates == ORDERING_CANDIDATES else [NONE_OF_THE_ABOVE]


def _choice(value: Any, n_candidates: int) -> int | str | None:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < n_candidates:
        return value
    if isinstance(value, str) and value in extra_options(n_candidates):
        return value
    return None


def _comments(value: Any) -> str:
    return value[:MAX_TEXT_LENGTH].strip() if isinstance(value, str) else ""


def clean_draft(draft: Any, n_reference: int, n_candidates: int) -> dict[str, Any]:
    draft = draft if isinstance(draft, dict) else {}
    return {"choice": _choice(draft.get("choice"), n_candidates), "comments": _comments(draft.get("comments"))}


def validate_submission(
    answer: Any, n_reference: int, n_candidates: int
) -> tuple[dict[str, Any] | None, list[FieldError]]:
    """One option must be chosen: a candidate (0-based index) or the extra option of the task."""
    if not isinstance(answer, dict):
        return None, [FieldError("answer", "The answer is missing.")]
    choice = _choice(answer.get("choice"), n_candidates)
    errors = []
    if choice is None:
        errors.append(FieldError("choice", "Choose one option. " + GUIDANCE))
    comments = answer.get("comments") or ""
    if not isinstance(comments, str) or len(comments) > MAX_TEXT_LENGTH:
        errors.append(FieldError("comments", f"must be text of at most {MAX_TEXT_LENGTH} characters"))
    if errors:
        return None, errors
    return {"choice": choice, "comments": comments.strip()}, []


def expected_from_answer(cleaned: dict[str, Any]) -> Any:
    """A gold answer as a known answer: the chosen option (the item's label)."""
    return cleaned.get("choice")


def answer_correct(cleaned: dict[str, Any], item: KnownAnswerItem) -> bool | None:
    expected = item.expected
    return None if expected is None else cleaned.get("choice") == expected


def item_context(item: Any) -> dict[str, Any]:
    """An item's entry on the page: its lettered options, the extra option (none of the above,
    or neutral for step ordering) and its task."""
    candidates = list(item.candidate_steps)
    return {
        "options": [(str(i), chr(ord("A") + i), text) for i, text in enumerate(candidates)],
        "extra": extra_options(len(candidates)),
        "task": (item.source or {}).get("task", ""),
    }


def required_openings(n_reference: int, n_candidates: int) -> list[str]:
    return []


def answer_summary(answer: dict[str, Any]) -> str:
    """The chosen option: its 0-based index, or the extra option's name."""
    return f"choice {answer.get('choice')}"


def expected_summary(expected: Any) -> str:
    return f"choice {expected}"


_OPTION = {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "string"}], "nullable": True}
ANSWER_COLUMNS = (
    AnswerColumn(
        "choice",
        _OPTION,
        "The chosen option: a candidate's 0-based index, or none / neutral (null: flagged broken)",
        lambda record: None if record.broken else record.answer.get("choice"),
    ),
)
API_FILTERS = (
    AnswerFilter(
        "choice",
        {"type": "integer", "minimum": -1, "maximum": 1000},
        "The chosen option's index",
        lambda value: {"answer__choice": value},
    ),
)
KNOWN_ANSWER_COLUMN = Column("expected_choice", _OPTION, "The item's label: the right candidate's 0-based index")

_ESTIMATE = {"type": "object", "nullable": True, "description": "A share with its n and 95% Wilson interval"}
RESULTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Table 2 of Zhang et al. 2020 per task (the key): yield and human accuracy with their n and "
    "95% Wilson interval, nominal alpha with its n and 95% bootstrap interval, the gold and harder tiers",
    "additionalProperties": {
        "type": "object",
        "properties": {
            "items": {"type": "integer"},
            "complete_items": {"type": "integer"},
            "k": {"type": "integer"},
            "by_correct": {"type": "object", "additionalProperties": {"type": "integer"}},
            "yield": {"type": "number", "nullable": True},
            "gold": {"type": "array", "items": {"type": "string"}},
            "harder": {"type": "array", "items": {"type": "string"}},
            "yield_estimate": _ESTIMATE,
            "alpha": {"type": "number", "nullable": True},
            "alpha_n": {"type": "integer", "nullable": True},
            "answers": {"type": "integer"},
            "human_accuracy": {"type": "number", "nullable": True},
            "human_accuracy_estimate": _ESTIMATE,
        },
        "required": ["items", "complete_items", "k", "by_correct", "yield", "gold", "harder", "answers"],
    },
}


# The note under the study page's table of pilot rounds.
ROUND_ALPHA_NOTE = (
    "Nominal Krippendorff's α over the options annotators chose (a candidate, none of the above, "
    "or neutral), every task of the round together; the per-task α is in the results above."
)


KIND = StudyKind(
    key=KEY,
    label="Multiple choice (goal-step tasks)",
    item_template="annotate/kinds/multiple_choice_item.html",
    codebook_path=None,
    default_instructions=DEFAULT_INSTRUCTIONS,
    parse_record=parse_record,
    clean_draft=clean_draft,
    validate_submission=validate_submission,
    required_openings=required_openings,
    answer_correct=answer_correct,
    expected_from_answer=expected_from_answer,
    page_template="annotate/kinds/multiple_choice_page.html",
    page_guidance=GUIDANCE,
    answer_summary=answer_summary,
    expected_summary=expected_summary,
    known_answer_column=KNOWN_ANSWER_COLUMN,
    answer_columns=ANSWER_COLUMNS,
    api_columns=ANSWER_COLUMNS,
    api_filters=API_FILTERS,
    typical_seconds_per_item=20,  # Zhang et al. 2020 §3.4: 5 minutes for 15 examples
    file_field_names={"item_id": "id", "goal": "prompt", "candidate_steps": "candidates", "expected": "label"},
    item_context=item_context,
    results_function="annotate.kinds.multiple_choice.study_results.choice_study_results",
    api_results_function="annotate.kinds.multiple_choice.study_results.choice_results_with_intervals",
    results_template="annotate/kinds/multiple_choice_results.html",
    results_name="choice_results",
    results_schema=RESULTS_SCHEMA,
    round_alpha_function="annotate.kinds.multiple_choice.study_results.round_alpha",
    round_alpha_label="nominal, over the options",
    round_alpha_note=ROUND_ALPHA_NOTE,
    results_summary="Krippendorff's alpha over the options, human accuracy, tiers",
    tiers=("gold", "harder"),
    tier_records_function="annotate.kinds.multiple_choice.study_results.choice_tier_records",
    ready_function="annotate.kinds.multiple_choice.ready.choice_ready",
    interface_version="mc-ui-1",
)
