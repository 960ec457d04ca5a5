"""The prompt files of the five How2Mine LLM stages render with exactly their placeholders,
and each stage's strict answer schema accepts a correct answer and refuses wrong ones."""

from __future__ import annotations

import copy
import string
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from mining.stage_schemas import FINAL_VALIDATION_QUESTIONS, PROMPT_PLACEHOLDERS, STAGE_SCHEMAS, STAGES

PROMPTS_DIR = Path(__file__).resolve().parent.parent / "mining" / "prompts"

VALUES = {
    # Braces inside a value are text, not placeholders: they must come through unchanged.
    "document": "How to hard-boil an egg {the easy way}\nFill a pot with water and bring it to a boil...",
    "goal": "Hard-boil an egg so that the yolk is firm all the way through.",
    "steps": "1. Bring a pot of water to a boil.\n2. Lower the egg into the water.\n3. Boil for ten minutes.",
    "resources": "[egg, pot, water]",
}


def placeholders(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}


def test_every_stage_has_a_prompt_file_placeholders_and_a_schema():
    assert STAGES == ("extract_procedure", "llm_filter", "rewrite", "extract_resources", "final_validation")
    assert set(PROMPT_PLACEHOLDERS) == set(STAGE_SCHEMAS) == set(STAGES)
    assert sorted(p.stem for p in PROMPTS_DIR.glob("*.txt")) == sorted(STAGES)


@pytest.mark.parametrize("stage", STAGES)
def test_prompt_uses_exactly_its_placeholders_and_renders(stage):
    text = (PROMPTS_DIR / f"{stage}.txt").read_text(encoding="utf-8")
    assert placeholders(text) == PROMPT_PLACEHOLDERS[stage]
    rendered = text.format(**{name: VALUES[name] for name in PROMPT_PLACEHOLDERS[stage]})
    for name in PROMPT_PLACEHOLDERS[stage]:
        assert VALUES[name] in rendered
    # the JSON example keeps its (single) braces and names every key of the answer
    assert "{\n" in rendered and "{{" not in rendered
    for key in STAGE_SCHEMAS[stage]["properties"]:
        assert f'"{key}"' in rendered


def test_placeholder_sets_follow_the_paper():
    assert PROMPT_PLACEHOLDERS["extract_procedure"] == {"document"}
    for stage in ("llm_filter", "rewrite", "extract_resources"):
        assert PROMPT_PLACEHOLDERS[stage] == {"goal", "steps"}
    assert PROMPT_PLACEHOLDERS["final_validation"] == {"goal", "resources", "steps"}


def yes(reason: str = "") -> dict:
    return {"answer": "yes", "reason": reason}


# A correct answer of each stage (JSON objects: values of any JSON type).
CORRECT: dict[str, dict[str, Any]] = {
    "extract_procedure": {"has_procedure": True, "goal": "Hard-boil an egg.", "steps": ["Boil water.", "Add the egg."]},
    "llm_filter": {"judgment": True, "reason": "Pure math: the task is a unit conversion."},
    "rewrite": {"rewritten_goal": "Hard-boil an egg.", "rewritten_steps": ["Boil water.", "Add the egg."]},
    "extract_resources": {"resources": []},
    "final_validation": {q: yes() for q in FINAL_VALIDATION_QUESTIONS},
}

WRONG = {
    "extract_procedure": [
        {"has_procedure": "yes", "goal": "", "steps": []},  # boolean as a string
        {"has_procedure": False, "goal": ""},  # steps missing
        {"has_procedure": True, "goal": "g", "steps": "1. a\n2. b"},  # steps not a list
        {"has_procedure": True, "goal": "g", "steps": ["a", 2]},  # a step not a string
        {"has_procedure": True, "goal": "g", "steps": [], "topic": ""},  # extra key
    ],
    "llm_filter": [
        {"judgment": 1, "reason": ""},
        {"judgment": False},
        {"judgment": False, "reason": None},
    ],
    "rewrite": [
        {"goal": "g", "steps": ["a"]},
        {"rewritten_goal": "g", "rewritten_steps": [["a"]]},
        {"rewritten_goal": ["g"], "rewritten_steps": ["a"]},
    ],
    "extract_resources": [
        {"resources": "egg, pot"},
        {"resources": [{"name": "egg"}]},
        {},
    ],
    "final_validation": [
        {**{q: yes() for q in FINAL_VALIDATION_QUESTIONS}, "correctness": {"answer": "Yes", "reason": ""}},
        {**{q: yes() for q in FINAL_VALIDATION_QUESTIONS}, "sequential": {"answer": True, "reason": ""}},
        {**{q: yes() for q in FINAL_VALIDATION_QUESTIONS}, "goal_steps_alignment": {"answer": "no"}},
        {**{q: yes() for q in FINAL_VALIDATION_QUESTIONS}, "no_specific_entity": "yes"},
        {q: yes() for q in FINAL_VALIDATION_QUESTIONS[:3]},
        {**{q: yes() for q in FINAL_VALIDATION_QUESTIONS}, "correctness": {"answer": "yes", "reason": "", "score": 1}},
        {**{q: yes() for q in FINAL_VALIDATION_QUESTIONS}, "overall": yes()},
    ],
}


@pytest.mark.parametrize("stage", STAGES)
def test_schema_is_valid_and_accepts_a_correct_answer(stage):
    schema = STAGE_SCHEMAS[stage]
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(CORRECT[stage], schema)


def test_a_rejection_with_a_no_and_its_reason_is_a_valid_final_validation_answer():
    answer = copy.deepcopy(CORRECT["final_validation"])
    answer["sequential"] = {"answer": "no", "reason": "Step 3 offers two alternative routes."}
    jsonschema.validate(answer, STAGE_SCHEMAS["final_validation"])
    jsonschema.validate({"has_procedure": False, "goal": "", "steps": []}, STAGE_SCHEMAS["extract_procedure"])


@pytest.mark.parametrize("stage, answer", [(stage, answer) for stage, answers in WRONG.items() for answer in answers])
def test_schema_refuses_a_wrong_answer(stage, answer):
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(answer, STAGE_SCHEMAS[stage])


def objects(schema: dict):
    yield schema
    for child in schema.get("properties", {}).values():
        yield from objects(child)
    if isinstance(schema.get("items"), dict):
        yield from objects(schema["items"])


@pytest.mark.parametrize("stage", STAGES)
def test_schemas_are_strict_at_every_level(stage):
    # Strict structured outputs require every object to list all its properties as
    # required and to forbid others.
    for node in objects(STAGE_SCHEMAS[stage]):
        if node.get("type") == "object":
            assert node["additionalProperties"] is False
            assert sorted(node["required"]) == sorted(node["properties"])
