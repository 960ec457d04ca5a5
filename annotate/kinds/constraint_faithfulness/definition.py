"""The ``constraint_faithfulness`` study kind: crowd validation of constrained scripts as in
CoScript (Yuan et al., ACL 2023, §4.4, App. B.4, Table 10, App. D, Figures 9-10).

An annotator reads an abstract ("general") goal, a specific goal that adds one constraint
(modifier, method or intent, Table 1), and a numbered script for the specific goal, and
answers the three questions of App. D with Yes / No / Not sure:

1. Does the specific goal inherit the abstract goal and contain the constraint?
2. Does the script meet the constraint in the specific goal?
3. Are the steps in the script correct in achieving the specific goal?

When the answer to 3 is No, "they must point out the wrong steps and select the error
types" (App. D): each marked step gets at least one of the six error types of Table 10, or
"other" with a description. The questions, answers and error types are in ``questions``, the
rules of a draft and of a submitted answer in ``answers``. Pure Python: no Django.

Input lines (the shape the CoScript export writes)::

    {"id", "abstract_goal", "specific_goal", "constraint", "constraint_type", "steps",
     "topic" (optional), "source" (optional)}

plus at most one of ``"attention_check": {<question>: "yes"|"no", ...}`` and
``"qualification": {<question>: "yes"|"no", ..., "explanation": str}``. On a study item the
specific goal is kept in ``goal``, the script in ``candidate_steps`` (L1 is empty), and the
abstract goal, constraint and constraint type in ``source`` beside the record's own source."""

from __future__ import annotations

import re
from typing import Any

from annotate.constants import FAITHFULNESS_MIN_SECONDS_DEFAULT, MAX_TEXT_LENGTH
from annotate.kinds.base import (
    ROLE_ATTENTION,
    ROLE_QUALIFICATION,
    ItemRecordError,
    ItemSpec,
    KnownAnswerItem,
    StudyKind,
)
from annotate.kinds.columns import Column
from annotate.kinds.constraint_faithfulness.answers import clean_draft, validate_submission
from annotate.kinds.constraint_faithfulness.questions import (
    ANSWER_LABELS,
    ANSWERS,
    CONSTRAINT_TYPES,
    ERROR_TYPES,
    MAX_WRONG_STEPS,
    NO,
    QUESTION_SHORT,
    QUESTION_TEXT,
    QUESTIONS,
    YES,
)

KEY = "constraint_faithfulness"


def _error_type_lines() -> str:
    return "\n".join(f"* {e['label']} ({e['aspect'].lower()}): {e['explanation']}" for e in ERROR_TYPES.values())


DEFAULT_INSTRUCTIONS = f"""\
This is a research study about everyday goals and the steps that achieve them. In each task you see a general goal about an everyday activity (such as "make a cake"), a specific goal that inherits the general goal but is more specific and has a reasonable CONSTRAINT (such as "make a chocolate cake"), and a script: numbered steps for the specific goal. You answer three questions, each with Yes, No or Not sure:

1. Does the specific goal inherit the general goal and contain the constraint? Making a chocolate cake is a reasonable constraint of making a cake, whereas making a lego cake is not. If you think the specific goal is not reasonable, choose No, but still answer questions 2 and 3 pretending that it is.
2. Does the script MEET THE CONSTRAINT? If the specific goal is making a chocolate cake and the script does not mention chocolate, it does not meet the constraint.
3. Are the steps correct in achieving the specific goal? A script for making a chocolate cake might mention chocolate, but if its instructions are wrong, answer No here. When you answer No, click every wrong step and select its error types:

{_error_type_lines()}
* Other: describe what you think is wrong.

For missing steps, mark the step next to where the missing step belongs. A step can have several error types.

Example: for the specific goal "Make a vanilla cake", the script "1. Preheat the oven to 325 °F and grease and flour a cake pan. 2. Gather your ingredients. 3. Buy your ingredients. 4. Cream the butter and salt. 5. Stir in the cake flour. 6. Have a shower. 7. Pour the batter into the pan. 8. Bake the cake for 1 hour 15 minutes." has steps 1 and 2 in the wrong order, step 3 repeats step 2, step 4 is incoherent (butter and salt instead of sugar) and misses adding the eggs and vanilla (missing steps, no constraint), and step 6 is unrelated to the goal.

Do not ignore grammar and spelling mistakes in the script. You may search the web to judge whether a script can achieve its goal, especially if you are not sure; you can always choose "Not sure".

Keyboard: Y, N and S answer the current question with Yes, No or Not sure and move to the next one; 1, 2 and 3 go to a question; Ctrl+Enter submits. Tab reaches every step and check box; Space marks a step or ticks a box.

Please do not use AI tools; we want your own judgment. Some tasks have known answers and check attention. Your work is saved as you go: if you reload the page or lose your connection, you can continue where you were.

Your answers are stored with your Prolific ID and used only for research on planning with constraints. By continuing you agree to take part; you can stop at any time by returning the study on Prolific."""


# ----------------------------------------------------------------------------- input records


def _text(record: dict[str, Any], name: str) -> str:
    if name not in record or record[name] is None:
        raise ItemRecordError("is required", name)
    value = record[name]
    if not isinstance(value, str):
        raise ItemRecordError(f"must be a string, not {type(value).__name__}", name)
    if not value.strip():
        raise ItemRecordError("must not be empty", name)
    if len(value) > MAX_TEXT_LENGTH:
        raise ItemRecordError(f"must be at most {MAX_TEXT_LENGTH} characters", name)
    return value.strip()


def _steps(record: dict[str, Any]) -> list[str]:
    if "steps" not in record:
        raise ItemRecordError("is required", "steps")
    value = record["steps"]
    if not isinstance(value, list) or not value:
        raise ItemRecordError("must be a non-empty list of strings", "steps")
    if len(value) > MAX_WRONG_STEPS:
        raise ItemRecordError(f"must have at most {MAX_WRONG_STEPS} steps", "steps")
    steps = []
    for index, step in enumerate(value):
        if not isinstance(step, str) or not step.strip():
            raise ItemRecordError("must be a non-empty string", f"steps[{index}]")
        steps.append(step.strip())
    return steps


def _known_answer(record: dict[str, Any], name: str) -> tuple[dict[str, str], str]:
    value = record[name]
    if not isinstance(value, dict):
        raise ItemRecordError('must be an object like {"steps_correct": "no"}', name)
    unknown = sorted(set(value) - set(QUESTIONS) - {"explanation"})
    if unknown:
        raise ItemRecordError(
            f"unknown key(s) {', '.join(unknown)}; the questions are {', '.join(QUESTIONS)}", f"{name}.{unknown[0]}"
        )
    known = {}
    for question in QUESTIONS:
        if question in value:
            if value[question] not in (YES, NO):
                raise ItemRecordError('must be "yes" or "no"', f"{name}.{question}")
            known[question] = value[question]
    if not known:
        raise ItemRecordError(f"needs the known answer of at least one question ({', '.join(QUESTIONS)})", name)
    explanation = value.get("explanation", "")
    if not isinstance(explanation, str):
        raise ItemRecordError("must be a string", f"{name}.explanation")
    return known, explanation.strip()


def parse_record(record: dict[str, Any]) -> ItemSpec:
    """One input line (see the module docstring); ``item_id`` is accepted for ``id``."""
    if not isinstance(record, dict):
        raise ItemRecordError(f"a record must be a JSON object, not {type(record).__name__}")
    item_id = record.get("id", record.get("item_id"))
    if isinstance(item_id, int) and not isinstance(item_id, bool):
        item_id = str(item_id)
    if not isinstance(item_id, str) or not item_id.strip() or len(item_id) > 200:
        raise ItemRecordError("is required: a non-empty string of at most 200 characters", "id")
    abstract_goal = _text(record, "abstract_goal")
    specific_goal = _text(record, "specific_goal")
    constraint = _text(record, "constraint")
    constraint_type = record.get("constraint_type")
    if constraint_type not in CONSTRAINT_TYPES:
        raise ItemRecordError(f"must be one of {', '.join(CONSTRAINT_TYPES)}", "constraint_type")
    steps = _steps(record)
    topic = record.get("topic") or ""
    if not isinstance(topic, str):
        raise ItemRecordError("must be a string", "topic")
    extra = record.get("source")
    if extra is not None and not isinstance(extra, dict):
        raise ItemRecordError("must be an object", "source")
    spec = ItemSpec(
        item_id=item_id.strip(),
        topic=topic.strip()[:100],
        goal=specific_goal,
        reference_steps=[],
        candidate_steps=steps,
    )
    if "attention_check" in record and "qualification" in record:
        raise ItemRecordError(
            "an item is either an attention check or a qualification item, not both", "attention_check"
        )
    for role, name in ((ROLE_ATTENTION, "attention_check"), (ROLE_QUALIFICATION, "qualification")):
        if name in record:
            spec.role = role
            spec.expected, spec.explanation = _known_answer(record, name)
            if role == ROLE_QUALIFICATION and not spec.explanation:
                raise ItemRecordError("is required for a qualification item", f"{name}.explanation")
    spec.source = {
        **(extra or {}),
        "abstract_goal": abstract_goal,
        "constraint": constraint,
        "constraint_type": constraint_type,
    }
    return spec


def goal_parts(goal: str, constraint: str) -> list[tuple[str, bool]]:
    """The specific goal cut into (text, is_constraint) parts: the first case-insensitive
    occurrence of the constraint is highlighted; without one, the goal is one plain part."""
    match = re.search(re.escape(constraint.strip()), goal, flags=re.IGNORECASE) if constraint.strip() else None
    if match is None:
        return [(goal, False)]
    parts = [(goal[: match.start()], False), (match.group(0), True), (goal[match.end() :], False)]
    return [(text, marked) for text, marked in parts if text]


def item_context(item: Any) -> dict[str, Any]:
    """What the item page shows beside the script (the item is a StudyItem or an ItemSpec)."""
    source = getattr(item, "source", None) or {}
    constraint = str(source.get("constraint", ""))
    constraint_type = str(source.get("constraint_type", ""))
    return {
        "abstract_goal": source.get("abstract_goal", ""),
        "constraint": constraint,
        "constraint_type": constraint_type,
        "constraint_type_explanation": CONSTRAINT_TYPES.get(constraint_type, ""),
        "goal_parts": goal_parts(item.goal, constraint),
        "questions": [(n, q, QUESTION_TEXT[q]) for n, q in enumerate(QUESTIONS, start=1)],
        "answers": [(a, ANSWER_LABELS[a]) for a in ANSWERS],
        "error_types": [(key, e["label"], e["aspect"], e["explanation"]) for key, e in ERROR_TYPES.items()],
    }


# ----------------------------------------------------------------------------- known answers and summaries


def expected_from_answer(cleaned: dict[str, Any]) -> dict[str, Any]:
    """A gold answer as a known answer: the three questions' answers."""
    return {question: cleaned[question] for question in QUESTIONS if question in cleaned}


def answer_correct(cleaned: dict[str, Any], item: KnownAnswerItem) -> bool | None:
    """Every question with a known answer answered with it ("not sure" counts as wrong);
    None for items without known answers (the main pool)."""
    expected = item.expected
    if not expected:
        return None
    return all(cleaned.get(question) == value for question, value in expected.items() if question in QUESTIONS)


def answer_summary(answer: dict[str, Any]) -> str:
    """One line for the study page: the three answers and the marked steps."""
    text = " · ".join(f"{QUESTION_SHORT[q]}: {ANSWER_LABELS.get(answer.get(q), '—')}" for q in QUESTIONS)
    wrong = answer.get("wrong_steps") or []
    if wrong:
        text += " · wrong steps " + ", ".join(
            f"{w['step']} ({', '.join(ERROR_TYPES[t]['label'] if t in ERROR_TYPES else 'Other' for t in w['error_types'])})"
            for w in wrong
        )
    return text


def required_openings(n_reference: int, n_steps: int) -> list[str]:
    """App. D asks no step-by-step reading confirmation: the minimum time is the check."""
    return []


def expected_summary(expected: Any) -> str:
    """A known answer: the questions it knows, as the study page's summary names them."""
    return " · ".join(f"{QUESTION_SHORT.get(q, q)}: {ANSWER_LABELS.get(v, v)}" for q, v in expected.items())


KNOWN_ANSWER_COLUMN = Column(
    "expected_answer",
    {"type": "object", "nullable": True, "additionalProperties": {"type": "string", "enum": list(ANSWERS)}},
    "An attention-check or qualification item's known answers by question",
)
_OBJECT = {"type": "object"}
RESULTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Fleiss' kappa and Krippendorff's alpha per question (bootstrap intervals), accuracy per "
    "constraint type (Wilson intervals) and error types (CoScript, Yuan et al. 2023)",
    "properties": {
        "k": {"type": "integer"},
        "items": {"type": "integer"},
        "complete_items": {"type": "integer"},
        "answers": {"type": "integer"},
        "answers_with_wrong_steps": {"type": "integer"},
        "questions": {"type": "object", "additionalProperties": _OBJECT, "description": "By question key"},
        "accuracy": {"type": "object", "additionalProperties": _OBJECT, "description": "By constraint type"},
        "accuracy_columns": {"type": "array", "items": {"type": "string"}},
        "accuracy_table": {"type": "array", "items": _OBJECT},
        "error_types": {"type": "object", "additionalProperties": _OBJECT, "description": "By error type"},
        "paper_fleiss_kappa": _OBJECT,
    },
    "required": ["k", "items", "complete_items", "answers", "questions", "accuracy"],
}


# The note under the study page's table of pilot rounds.
ROUND_ALPHA_NOTE = (
    "Nominal Krippendorff's α over the Yes / No / Not sure answers to question 3 (“Are the steps "
    "in the script correct in achieving the specific goal?”), the counted answers of each round, "
    "as in the results above; it says nothing about has_failure."
)


KIND = StudyKind(
    key=KEY,
    label="Constraint faithfulness (CoScript)",
    item_template="annotate/kinds/constraint_faithfulness_item.html",
    codebook_path=None,
    default_instructions=DEFAULT_INSTRUCTIONS,
    parse_record=parse_record,
    clean_draft=clean_draft,
    validate_submission=validate_submission,
    required_openings=required_openings,
    answer_correct=answer_correct,
    expected_from_answer=expected_from_answer,
    item_script="annotate/constraint_faithfulness.js",
    shortcuts_template="annotate/kinds/constraint_faithfulness_shortcuts.html",
    item_context=item_context,
    min_seconds_default=FAITHFULNESS_MIN_SECONDS_DEFAULT,
    answer_summary=answer_summary,
    expected_summary=expected_summary,
    known_answer_column=KNOWN_ANSWER_COLUMN,
    typical_seconds_per_item=180,  # CoScript's "$6/hour for 20 samples" (Ethics): three minutes each
    file_field_names={"item_id": "id", "goal": "specific_goal", "candidate_steps": "steps"},
    results_function="annotate.kinds.constraint_faithfulness.study_results.faithfulness_study_results",
    api_results_function="annotate.kinds.constraint_faithfulness.study_results.faithfulness_results_with_intervals",
    results_template="annotate/kinds/constraint_faithfulness_results.html",
    results_name="faithfulness_results",
    results_schema=RESULTS_SCHEMA,
    round_alpha_function="annotate.kinds.constraint_faithfulness.study_results.round_alpha",
    round_alpha_label="nominal, question 3: steps correct",
    round_alpha_note=ROUND_ALPHA_NOTE,
    results_summary="Fleiss' kappa and Krippendorff's alpha per question, accuracy by constraint type, error types",
    interface_version="faithfulness-ui-1",
)
