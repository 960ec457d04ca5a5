"""Steps as components: ``(action, objects, parameters)``. Pure Python, no Django.

* ``StepComponents``: one step's triple (Thoth/SciRecipe §3.2, Eq. (1)).
* ``components_from_dict``: check a decoded JSON object (a ``<key>`` step, a line of
  ``score_metric`` input, an ``extract_components`` answer) and name the first wrong field.
* ``rule_based_components``: the offline fallback that turns a plain imperative step
  sentence into a triple when no LLM is configured (the rule is stated below and in
  docs/score.md)."""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from judging.constants import KEY_STEP_FIELDS


@dataclass(frozen=True)
class StepComponents:
    """One step: the action (a verb), the objects it acts on, and its parameters."""

    action: str
    objects: tuple[str, ...]
    parameters: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"action": self.action, "objects": list(self.objects), "parameters": list(self.parameters)}

    def text(self) -> str:
        """The triple's words in one string: action, objects, parameters, space-separated."""
        return " ".join([self.action, *self.objects, *self.parameters])


class ComponentsError(ValueError):
    """A step's triple is malformed; ``field`` names the wrong part (``objects[1]``)."""

    def __init__(self, field: str | None, problem: str):
        self.field = field
        self.problem = problem
        super().__init__(problem if field is None else f"field '{field}': {problem}")


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _string_list(value: Any, field: str) -> tuple[str, ...]:
    # The paper's own Figure 7 writes an empty list as an empty object ("parameters": {}),
    # so an empty object is read as an empty list; any other object is refused.
    if isinstance(value, Mapping) and not value:
        return ()
    if not isinstance(value, list):
        raise ComponentsError(field, f"expected a list of strings, got {_type_name(value)}")
    for index, item in enumerate(value):
        if not isinstance(item, str):
            raise ComponentsError(f"{field}[{index}]", f"expected a string, got {_type_name(item)}")
        if not item.strip():
            raise ComponentsError(f"{field}[{index}]", "expected a non-empty string")
    return tuple(item.strip() for item in value)


def components_from_dict(value: Any) -> StepComponents:
    """A checked triple from a decoded JSON object with exactly the keys ``action`` (a
    non-empty string), ``objects`` and ``parameters`` (lists of non-empty strings)."""
    if not isinstance(value, Mapping):
        raise ComponentsError(
            None, f"expected a JSON object with keys {', '.join(KEY_STEP_FIELDS)}, got {_type_name(value)}"
        )
    missing = [name for name in KEY_STEP_FIELDS if name not in value]
    if missing:
        raise ComponentsError(missing[0], "missing")
    extra = sorted(str(name) for name in value if name not in KEY_STEP_FIELDS)
    if extra:
        raise ComponentsError(extra[0], f"unexpected key (a step has exactly {', '.join(KEY_STEP_FIELDS)})")
    action = value["action"]
    if not isinstance(action, str) or not action.strip():
        raise ComponentsError("action", f"expected a non-empty string, got {action!r}")
    return StepComponents(
        action=action.strip(),
        objects=_string_list(value["objects"], "objects"),
        parameters=_string_list(value["parameters"], "parameters"),
    )


def components_list(value: Any, field: str) -> tuple[StepComponents, ...]:
    """A list of triples (``gold`` or ``pred`` of a ``score_metric`` line); errors name
    ``<field>[<index>].<part>``."""
    if not isinstance(value, list):
        raise ComponentsError(field, f"expected a list of steps, got {_type_name(value)}")
    steps = []
    for index, item in enumerate(value):
        try:
            steps.append(components_from_dict(item))
        except ComponentsError as exc:
            where = f"{field}[{index}]" if exc.field is None else f"{field}[{index}].{exc.field}"
            raise ComponentsError(where, exc.problem) from exc
    return tuple(steps)


# ---------------------------------------------------------------------------------------
# The rule-based fallback
# ---------------------------------------------------------------------------------------
#
# The rule, for imperative step sentences (How2Bench steps are instructions):
# 1. Drop a leading list marker ("1.", "2)", "-", "Step 3:").
# 2. If the sentence opens with a subordinate clause ("If ...,", "Once ...,", "When ...,",
#    "After ...,"), drop everything up to the first comma; then drop leading filler words
#    ("first", "then", "next", "now", "finally", "carefully", "gently", ...).
# 3. The first remaining word is the action.
# 4. The words after it, up to the first preposition or punctuation mark other than a
#    comma, are the object phrase: leading determiners are dropped, "and", "or" and commas
#    split it into objects, and trailing adverbs ("twice", "once", words ending in "-ly")
#    move to the parameters.
# 5. The rest is cut at commas, semicolons and before each preposition ("in", "at", "for",
#    "with", ...; not "of", which stays inside its phrase); each piece is a parameter.
# Everything is lowercased, as the paper's <key> format asks (App. L, Figure 20).

_MARKER = re.compile(r"^\s*(?:step\s+\d+\s*[:.)]|\d+\s*[.):]|[-*\u2022])\s*", re.IGNORECASE)
_SUBORDINATORS = frozenset({"if", "when", "once", "after", "before", "while", "until", "as", "whenever"})
_FILLERS = frozenset(
    {
        "first",
        "firstly",
        "then",
        "next",
        "now",
        "finally",
        "lastly",
        "also",
        "and",
        "please",
        "carefully",
        "gently",
        "slowly",
        "quickly",
        "immediately",
        "thoroughly",
        "simply",
        "just",
    }
)
_DETERMINERS = frozenset(
    {"the", "a", "an", "your", "some", "all", "any", "this", "that", "these", "those", "its", "their"}
)
_PREPOSITIONS = frozenset(
    {
        "in",
        "on",
        "at",
        "for",
        "with",
        "to",
        "into",
        "onto",
        "from",
        "over",
        "under",
        "until",
        "by",
        "about",
        "through",
        "using",
        "without",
        "within",
        "before",
        "after",
        "during",
        "across",
        "around",
        "between",
        "inside",
        "per",
        "via",
        "so",
        "while",
    }
)
_ADVERBS = frozenset({"once", "twice", "thrice", "again", "well", "together", "overnight", "briefly"})
_WORD = re.compile(r"[^\s,;:]+|[,;:]")
_PUNCTUATION = frozenset({",", ";", ":"})
# Marks that end the object phrase; a comma inside it separates objects ("flour, sugar").
_PHRASE_ENDS = _PUNCTUATION - {","}


def _is_adverb(word: str) -> bool:
    return word in _ADVERBS or (word.endswith("ly") and len(word) > 4)


def _clean(word: str) -> str:
    return word.strip(".!?\"'").lower()


def rule_based_components(sentence: str) -> StepComponents:
    """The offline fallback: ``(action, objects, parameters)`` of one step sentence by the
    rule above. Raises ``ValueError`` when the sentence has no word."""
    text = _MARKER.sub("", sentence.strip())
    words = [_clean(word) for word in _WORD.findall(text)]
    words = [word for word in words if word]
    if words and words[0] in _SUBORDINATORS and "," in words:
        words = words[words.index(",") + 1 :]
    while words and (words[0] in _FILLERS or words[0] in _PUNCTUATION):
        words = words[1:]
    if not words:
        raise ValueError(f"a step with no words has no action: {sentence!r}")
    action, rest = words[0], words[1:]

    object_words: list[str] = []
    while rest and rest[0] not in _PREPOSITIONS and rest[0] not in _PHRASE_ENDS:
        object_words.append(rest.pop(0))
    trailing_adverbs: list[str] = []
    while object_words and _is_adverb(object_words[-1]):
        trailing_adverbs.insert(0, object_words.pop())
    objects = _split_objects(object_words)

    parameters = list(trailing_adverbs)
    piece: list[str] = []
    for word in rest:
        if word in _PUNCTUATION or word in _PREPOSITIONS:
            if piece:
                parameters.append(" ".join(piece))
            piece = [] if word in _PUNCTUATION else [word]
        else:
            piece.append(word)
    if piece:
        parameters.append(" ".join(piece))
    return StepComponents(
        action=action, objects=tuple(objects), parameters=tuple(p for p in parameters if p not in _PREPOSITIONS)
    )


def _split_objects(words: Sequence[str]) -> list[str]:
    objects: list[str] = []
    current: list[str] = []
    for word in [*words, ","]:
        if word in {",", "and", "or"}:
            while current and current[0] in _DETERMINERS:
                current.pop(0)
            if current:
                objects.append(" ".join(current))
            current = []
        else:
            current.append(word)
    return objects


# ---------------------------------------------------------------------------------------
# The extract_components LLM stage: its answer schema and the check of an answer
# ---------------------------------------------------------------------------------------

_TRIPLE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "action": {"type": "string"},
        "objects": {"type": "array", "items": {"type": "string"}},
        "parameters": {"type": "array", "items": {"type": "string"}},
    },
    "required": list(KEY_STEP_FIELDS),
    "additionalProperties": False,
}

# Strict structured output: {"steps": [{"action", "objects", "parameters"}, ...]}, one
# entry per input step, in order.
COMPONENTS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"steps": {"type": "array", "items": _TRIPLE_SCHEMA}},
    "required": ["steps"],
    "additionalProperties": False,
}


def components_schema(n_steps: int) -> dict[str, Any]:
    """``COMPONENTS_SCHEMA`` for one list of ``n_steps`` steps: exactly that many triples
    (``minItems`` = ``maxItems``). An answer with another count is then ``parse_failed`` in
    the ledger and re-asked with the error, as ``judge_schema`` does for step links; it is
    never an ``ok`` answer that storing would have to refuse."""
    schema = copy.deepcopy(COMPONENTS_SCHEMA)
    schema["properties"]["steps"].update(minItems=n_steps, maxItems=n_steps)
    return schema


def components_answer(value: Any, n_steps: int) -> tuple[StepComponents, ...]:
    """The triples of an ``extract_components`` answer, checked: an object with ``steps``,
    exactly one valid triple per input step. ``ComponentsError`` names the wrong field."""
    if not isinstance(value, Mapping) or "steps" not in value:
        raise ComponentsError("steps", 'missing: expected an object {"steps": [...]}')
    steps = components_list(value["steps"], "steps")
    if len(steps) != n_steps:
        raise ComponentsError("steps", f"expected {n_steps} steps (one per input step), got {len(steps)}")
    return steps


def rule_based_steps(steps: Sequence[str]) -> tuple[StepComponents, ...] | None:
    """``rule_based_components`` of every step; None when some step has no word."""
    try:
        return tuple(rule_based_components(text) for text in steps)
    except ValueError:
        return None
