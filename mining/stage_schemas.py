"""The answer of each LLM stage of How2Mine as a strict JSON schema, and the placeholders
each stage's prompt file is rendered with.

The schemas are sent as structured outputs (``response_format={"type": "json_schema",
"json_schema": {"name": <stage>, "schema": ...}}``) and used to check answers from
servers that do not enforce them. They are strict: every property is required and no
other property is allowed, at every level. Pure Python, no Django imports.

Stages, their prompt files (``mining/prompts/<stage>.txt``) and their answers
(How2Everything §3.2 and App. H.1):

* ``extract_procedure`` (§3.2(1); the paper's Figure 15 is not in its text):
  ``{"has_procedure": bool, "goal": str, "steps": [str]}``; the reference CLI's prompt
  (``extract_procedures.txt``) names the flag ``has_valid_process``: the schema sent names
  the flag the prompt names (:func:`stage_schema`), and the stage reads either.
* ``llm_filter`` (Figure 16): ``{"judgment": bool, "reason": str}``; ``judgment`` true
  means one of the six categories applies and the procedure is dropped.
* ``rewrite`` (Figure 17): ``{"rewritten_goal": str, "rewritten_steps": [str]}``
* ``extract_resources`` (Figure 18): ``{"resources": [str]}``
* ``final_validation`` (Figure 19): ``{q: {"answer": "yes" | "no", "reason": str}}`` for
  q in correctness, sequential, no_specific_entity, goal_steps_alignment; the procedure
  is kept only when all four answers are "yes".
"""

from __future__ import annotations

from typing import Any

STAGES: tuple[str, ...] = ("extract_procedure", "llm_filter", "rewrite", "extract_resources", "final_validation")

# Placeholders of each prompt file (str.format). ``steps`` is filled with numbered lines
# ("1. ...", one per step), ``resources`` with the list as "[a, b, c]" ("[]" when empty).
PROMPT_PLACEHOLDERS: dict[str, frozenset[str]] = {
    "extract_procedure": frozenset({"document"}),
    "llm_filter": frozenset({"goal", "steps"}),
    "rewrite": frozenset({"goal", "steps"}),
    "extract_resources": frozenset({"goal", "steps"}),
    # Figure 19 shows the resources too: goal_steps_alignment is judged given them.
    "final_validation": frozenset({"goal", "resources", "steps"}),
}

FINAL_VALIDATION_QUESTIONS: tuple[str, ...] = (
    "correctness",
    "sequential",
    "no_specific_entity",
    "goal_steps_alignment",
)


def _strict_object(properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def _string_list() -> dict[str, Any]:
    return {"type": "array", "items": {"type": "string"}}


def _verdict() -> dict[str, Any]:
    return _strict_object({"answer": {"type": "string", "enum": ["yes", "no"]}, "reason": {"type": "string"}})


EXTRACT_PROCEDURE_SCHEMA = _strict_object(
    {"has_procedure": {"type": "boolean"}, "goal": {"type": "string"}, "steps": _string_list()}
)
LLM_FILTER_SCHEMA = _strict_object({"judgment": {"type": "boolean"}, "reason": {"type": "string"}})
REWRITE_SCHEMA = _strict_object({"rewritten_goal": {"type": "string"}, "rewritten_steps": _string_list()})
EXTRACT_RESOURCES_SCHEMA = _strict_object({"resources": _string_list()})
FINAL_VALIDATION_SCHEMA = _strict_object({question: _verdict() for question in FINAL_VALIDATION_QUESTIONS})

STAGE_SCHEMAS: dict[str, dict[str, Any]] = {
    "extract_procedure": EXTRACT_PROCEDURE_SCHEMA,
    "llm_filter": LLM_FILTER_SCHEMA,
    "rewrite": REWRITE_SCHEMA,
    "extract_resources": EXTRACT_RESOURCES_SCHEMA,
    "final_validation": FINAL_VALIDATION_SCHEMA,
}

# The names of the extraction answer's flag: ours, and the reference CLI's.
EXTRACT_FLAGS: tuple[str, ...] = ("has_procedure", "has_valid_process")


def stage_schema(stage: str, prompt_text: str) -> dict[str, Any]:
    """The schema of ``stage``'s answer for a prompt: the extraction flag is the one the
    prompt names (``has_valid_process`` when it names only that one, else ``has_procedure``),
    so a server that enforces the schema answers as the prompt asks."""
    schema = STAGE_SCHEMAS[stage]
    if stage == "extract_procedure" and "has_valid_process" in prompt_text and "has_procedure" not in prompt_text:
        schema = _strict_object(
            {"has_valid_process": {"type": "boolean"}, "goal": {"type": "string"}, "steps": _string_list()}
        )
    return schema
