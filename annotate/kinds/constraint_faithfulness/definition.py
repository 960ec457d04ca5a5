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
"other" with a description. Pure Python: no Django.

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
    FieldError,
    ItemRecordError,
    ItemSpec,
    KnownAnswerItem,
    StudyKind,
)
from annotate.kinds.columns import Column

KEY = "constraint_faithfulness"

# Table 1: the three constraint types, with the paper's description of each.
CONSTRAINT_TYPES = {
    "modifier": "a word, an adjective or a phrase that modifies or constrains an abstract goal "
    "(e.g. Make a chocolate cake)",
    "method": "a tool or specified mode that controls the process for achieving the goal "
    "(e.g. Make a cake with an oven)",
    "intent": "an additional purpose or demand when completing the goal (e.g. Make a cake for a wedding)",
}

# App. D, Figure 10: the three questions, in order, and their answers ("I am not sure").
YES, NO, NOT_SURE = "yes", "no", "not_sure"
ANSWERS = (YES, NO, NOT_SURE)
ANSWER_LABELS: dict[str | None, str] = {YES: "Yes", NO: "No", NOT_SURE: "Not sure"}
QUESTIONS = ("specific_goal_ok", "meets_constraint", "steps_correct")
QUESTION_TEXT = {
    "specific_goal_ok": "Does the specific goal inherit the general goal and contain the constraint?",
    "meets_constraint": "Does the script meet the constraint in the specific goal?",
    "steps_correct": "Are the steps in the script correct in achieving the specific goal?",
}
QUESTION_SHORT = {
    "specific_goal_ok": "Specific goal",
    "meets_constraint": "Meets the constraint",
    "steps_correct": "Steps correct",
}

# Table 10 (and Figure 9): the six error types, their aspect (§4.4: semantic completeness, SE;
# faithfulness to the constraints, FE) and the paper's explanation. Table 10 and Figure 9 name
# the second type "Repeat steps"; §4.4 calls it "repeated step(s)".
ERROR_TYPES: dict[str, dict[str, str]] = {
    "wrong_order": {
        "label": "Wrong order",
        "aspect": "Semantic completeness",
        "explanation": "Steps that are in the wrong order.",
    },
    "repeated_steps": {
        "label": "Repeat steps",
        "aspect": "Semantic completeness",
        "explanation": "Steps that are repeated in the script.",
    },
    "missing_steps": {
        "label": "Missing steps",
        "aspect": "Semantic completeness",
        "explanation": "Important steps that are missing.",
    },
    "no_constraint": {
        "label": "No constraint",
        "aspect": "Faithfulness to constraints",
        "explanation": "Script is unfaithful to the constraint.",
    },
    "incoherent_steps": {
        "label": "Incoherent steps",
        "aspect": "Faithfulness to constraints",
        "explanation": "Steps that are related to the goal, but are not coherent within the script.",
    },
    "unrelated_steps": {
        "label": "Unrelated steps",
        "aspect": "Faithfulness to constraints",
        "explanation": "Steps that are not related to the goal.",
    },
}
OTHER = "other"  # Figure 9: "Others: (Describe what you think is wrong)"
ERROR_CHOICES = (*ERROR_TYPES, OTHER)
MAX_WRONG_STEPS = 100


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


# ----------------------------------------------------------------------------- answers


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
    cleaned: dict[str, Any] = {}
    for number, question in enumerate(QUESTIONS, start=1):
        value = _answer(answer.get(question))
        if value is None:
            errors.append(FieldError(question, f"Question {number}: choose Yes, No or Not sure."))
        cleaned[question] = value
    raw = answer.get("wrong_steps") or []
    if not isinstance(raw, list):
        errors.append(FieldError("wrong_steps", "must be a list of marked steps"))
        raw = []
    if len(raw) > MAX_WRONG_STEPS:
        errors.append(FieldError("wrong_steps", f"at most {MAX_WRONG_STEPS} steps can be marked"))
        raw = raw[:MAX_WRONG_STEPS]
    steps_correct = cleaned["steps_correct"]
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
    wrong = []
    seen: set[int] = set()
    for position, entry in enumerate(raw, start=1):
        if not isinstance(entry, dict):
            errors.append(FieldError(f"wrong_steps[{position}]", "must be an object"))
            continue
        step = entry.get("step")
        step_number = _step_number(step, n_steps)  # the step itself when it is one
        if step_number is None:
            where = (
                f"wrong_steps.{step}.step"
                if isinstance(step, int) and not isinstance(step, bool)
                else f"wrong_steps[{position}].step"
            )
            errors.append(FieldError(where, f"Step {step!r} does not exist: the script has steps 1 to {n_steps}."))
            continue
        if step_number in seen:
            errors.append(FieldError(f"wrong_steps.{step}.step", f"Step {step} is marked twice."))
            continue
        seen.add(step_number)
        types_in = entry.get("error_types") or []
        other = entry.get("other") or ""
        if not isinstance(types_in, list) or any(t not in ERROR_CHOICES for t in types_in):
            errors.append(
                FieldError(
                    f"wrong_steps.{step}.error_types",
                    f"Step {step}: error types must be among {', '.join(ERROR_CHOICES)}.",
                )
            )
            continue
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
        wrong.append({"step": step, "error_types": types, "other": other})
    comments = answer.get("comments") or ""
    if not isinstance(comments, str) or len(comments) > MAX_TEXT_LENGTH:
        errors.append(FieldError("comments", f"must be text of at most {MAX_TEXT_LENGTH} characters"))
        comments = ""
    if errors:
        return None, errors
    return {**cleaned, "wrong_steps": sorted(wrong, key=lambda w: w["step"]), "comments": comments.strip()}, []


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
