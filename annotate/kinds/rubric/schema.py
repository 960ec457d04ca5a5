"""A rubric: a study kind given as data (YAML or JSON), checked strictly. Pure Python: no Django.

A rubric is a mapping with ``key``, ``title``, ``instructions`` and ``questions``; each question
has an ``id``, a ``type`` (``yes_no``, ``likert``, ``multiple_choice``, ``free_text``,
``step_links``), a ``prompt`` and ``required``, and per type a ``scale`` (likert: ``min``,
``max``, optional ``labels`` by value), ``options`` (multiple choice: the option texts) or
``max_length`` (free text). Every input is hostile: sizes are bounded, unknown keys are
refused, YAML is read with ``yaml.safe_load`` only, and nothing in a rubric is ever run. Every
problem names its path (``questions[2].scale.max: must be greater than min``)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, TypeGuard

import yaml

from core.strict_json import nesting_depth

YES_NO = "yes_no"
LIKERT = "likert"
MULTIPLE_CHOICE = "multiple_choice"
FREE_TEXT = "free_text"
STEP_LINKS = "step_links"
QUESTION_TYPES = (YES_NO, LIKERT, MULTIPLE_CHOICE, FREE_TEXT, STEP_LINKS)
YES_NO_VALUES = ("yes", "no")

# Bounds on what a rubric may hold (a hostile file never grows memory or pages without bound).
MAX_SOURCE_BYTES = 200_000
MAX_NESTING = 32  # a rubric is a few levels deep; deeper input only feeds a parser's recursion
MAX_QUESTIONS = 30
MAX_OPTIONS = 20
MAX_KEY_LENGTH = 40  # a question's id
# A rubric's key: its kind's key ``rubric:<key>`` fits every kind field (40 characters).
MAX_RUBRIC_KEY_LENGTH = 32
MAX_TITLE_LENGTH = 200
MAX_INSTRUCTIONS_LENGTH = 20_000
MAX_PROMPT_LENGTH = 1_000
MAX_OPTION_LENGTH = 200
MAX_LABEL_LENGTH = 100
MAX_SCALE_POINTS = 11
SCALE_BOUND = 100
FREE_TEXT_DEFAULT_LENGTH = 2_000
FREE_TEXT_MAX_LENGTH = 10_000
MAX_PROBLEMS = 50  # the most problems one refusal lists

KEY_PATTERN = re.compile(r"[a-z][a-z0-9_]*")
ID_PATTERN = re.compile(r"[a-z][a-z0-9_]*")

RUBRIC_KEYS = {"key", "title", "instructions", "questions"}
QUESTION_KEYS = {"id", "type", "prompt", "required"}
TYPE_KEYS = {
    YES_NO: set(),
    LIKERT: {"scale"},
    MULTIPLE_CHOICE: {"options"},
    FREE_TEXT: {"max_length"},
    STEP_LINKS: set(),
}


class RubricError(ValueError):
    """A rubric that cannot be used: ``problems`` are ``(path, message)`` pairs."""

    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems
        super().__init__("; ".join(f"{path}: {message}" for path, message in problems))

    def by_path(self) -> dict[str, list[str]]:
        result: dict[str, list[str]] = {}
        for path, message in self.problems:
            result.setdefault(path, []).append(message)
        return result


@dataclass(frozen=True)
class Question:
    id: str
    type: str
    prompt: str
    required: bool
    scale_min: int | None = None
    scale_max: int | None = None
    scale_labels: tuple[tuple[int, str], ...] = ()
    options: tuple[str, ...] = ()
    max_length: int | None = None

    @property
    def scale_points(self) -> list[tuple[int, str]]:
        """The likert scale's values with their labels ("" where none)."""
        if self.scale_min is None or self.scale_max is None:
            return []
        labels = dict(self.scale_labels)
        return [(value, labels.get(value, "")) for value in range(self.scale_min, self.scale_max + 1)]

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "type": self.type, "prompt": self.prompt, "required": self.required}
        if self.type == LIKERT:
            scale: dict[str, Any] = {"min": self.scale_min, "max": self.scale_max}
            if self.scale_labels:
                scale["labels"] = {str(value): label for value, label in self.scale_labels}
            data["scale"] = scale
        elif self.type == MULTIPLE_CHOICE:
            data["options"] = list(self.options)
        elif self.type == FREE_TEXT:
            data["max_length"] = self.max_length
        return data


@dataclass(frozen=True)
class Rubric:
    key: str
    title: str
    instructions: str
    questions: tuple[Question, ...]

    def as_dict(self) -> dict[str, Any]:
        """The rubric in its stored (and re-readable) shape."""
        return {
            "key": self.key,
            "title": self.title,
            "instructions": self.instructions,
            "questions": [q.as_dict() for q in self.questions],
        }

    def question(self, question_id: str) -> Question | None:
        return next((q for q in self.questions if q.id == question_id), None)


def rubric_text_load(text: str | bytes, *, name: str = "") -> Any:
    """A rubric file's content as data: JSON when it parses as JSON (or the name ends in
    ``.json``), else YAML read with ``yaml.safe_load`` (no tags that build objects). The size and
    the nesting are bounded first; a syntax error is a ``RubricError`` at path ``file``."""
    if isinstance(text, bytes):
        if len(text) > MAX_SOURCE_BYTES:
            raise RubricError([("file", f"must be at most {MAX_SOURCE_BYTES} bytes")])
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            raise RubricError([("file", "must be UTF-8 text")]) from None
    if len(text.encode("utf-8")) > MAX_SOURCE_BYTES:
        raise RubricError([("file", f"must be at most {MAX_SOURCE_BYTES} bytes")])
    if nesting_depth(text) > MAX_NESTING or _indentation_depth(text) > MAX_NESTING:  # before any parser recurses
        raise RubricError([("file", f"is nested more than {MAX_NESTING} levels deep")])
    stripped = text.lstrip()
    if name.lower().endswith(".json") or stripped.startswith(("{", "[")):
        try:
            return json.loads(text)
        except ValueError as exc:
            if name.lower().endswith(".json"):
                raise RubricError([("file", f"not valid JSON: {exc}")]) from None
    try:
        return yaml.safe_load(text)
    except RecursionError:  # deep nesting by indentation, which no bracket count sees
        raise RubricError([("file", f"is nested more than {MAX_NESTING} levels deep")]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "cannot be read"
        raise RubricError([("file", f"not valid YAML{where}: {problem}")]) from None


class _Checker:
    def __init__(self) -> None:
        self.problems: list[tuple[str, str]] = []

    def add(self, path: str, message: str) -> None:
        self.problems.append((path, message))

    def text(self, data: dict[str, Any], key: str, path: str, *, maximum: int, required: bool = True) -> str:
        value = data.get(key)
        where = f"{path}.{key}" if path else key
        if value is None:
            if required:
                self.add(where, "is required")
            return ""
        if not isinstance(value, str):
            self.add(where, "must be text")
            return ""
        if required and not value.strip():
            self.add(where, "must not be empty")
        if len(value) > maximum:
            self.add(where, f"must be at most {maximum} characters")
        return value.strip()

    def unknown(self, data: dict[str, Any], allowed: set[str], path: str) -> None:
        for key in data:
            if key not in allowed:
                shown = str(key)[:40]
                where = f"{path}.{shown}" if path else shown
                self.add(where, f"is not a rubric field here (allowed: {', '.join(sorted(allowed))})")


def _integer(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _likert(check: _Checker, data: dict[str, Any], path: str) -> dict[str, Any]:
    scale = data.get("scale")
    where = f"{path}.scale"
    if not isinstance(scale, dict):
        check.add(where, "is required for a likert question: a mapping with min and max")
        return {}
    check.unknown(scale, {"min", "max", "labels"}, where)
    bounds: dict[str, int] = {}
    for name in ("min", "max"):
        value = scale.get(name)
        if not _integer(value):
            check.add(f"{where}.{name}", "must be a whole number")
        elif abs(value) > SCALE_BOUND:
            check.add(f"{where}.{name}", f"must be between -{SCALE_BOUND} and {SCALE_BOUND}")
        else:
            bounds[name] = value
    if len(bounds) < 2:
        return {}
    low, high = bounds["min"], bounds["max"]
    if high <= low:
        check.add(f"{where}.max", "must be greater than min")
        return {}
    if high - low + 1 > MAX_SCALE_POINTS:
        check.add(f"{where}.max", f"a scale has at most {MAX_SCALE_POINTS} points")
        return {}
    labels: list[tuple[int, str]] = []
    raw = scale.get("labels", {})
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        check.add(f"{where}.labels", "must be a mapping of scale values to labels")
        raw = {}
    for value, label in raw.items():
        at = f"{where}.labels.{str(value)[:20]}"
        try:
            number = int(value) if not isinstance(value, bool) else None
        except (TypeError, ValueError):
            number = None
        if number is None or str(number) != str(value).strip() or not low <= number <= high:
            check.add(at, f"must be a value of the scale ({low} to {high})")
            continue
        if not isinstance(label, str) or not label.strip():
            check.add(at, "must be a non-empty text")
        elif len(label) > MAX_LABEL_LENGTH:
            check.add(at, f"must be at most {MAX_LABEL_LENGTH} characters")
        else:
            labels.append((number, label.strip()))
    return {"scale_min": low, "scale_max": high, "scale_labels": tuple(sorted(labels))}


def _options(check: _Checker, data: dict[str, Any], path: str) -> dict[str, Any]:
    options = data.get("options")
    where = f"{path}.options"
    if not isinstance(options, list):
        check.add(where, "is required for a multiple_choice question: a list of option texts")
        return {}
    if len(options) < 2:
        check.add(where, "must have at least 2 options")
    if len(options) > MAX_OPTIONS:
        check.add(where, f"must have at most {MAX_OPTIONS} options")
        return {}
    kept: list[str] = []
    for index, option in enumerate(options):
        at = f"{where}[{index}]"
        if not isinstance(option, str) or not option.strip():
            check.add(at, "must be a non-empty text")
        elif len(option) > MAX_OPTION_LENGTH:
            check.add(at, f"must be at most {MAX_OPTION_LENGTH} characters")
        elif option.strip() in kept:
            check.add(at, "repeats an earlier option")
        else:
            kept.append(option.strip())
    return {"options": tuple(kept)}


def _free_text(check: _Checker, data: dict[str, Any], path: str) -> dict[str, Any]:
    value = data.get("max_length", FREE_TEXT_DEFAULT_LENGTH)
    if not _integer(value) or not 1 <= value <= FREE_TEXT_MAX_LENGTH:
        check.add(f"{path}.max_length", f"must be a whole number from 1 to {FREE_TEXT_MAX_LENGTH}")
        return {}
    return {"max_length": value}


def _question(check: _Checker, data: Any, path: str, seen: set[str]) -> Question | None:
    if not isinstance(data, dict):
        check.add(path, "must be a mapping with id, type, prompt and required")
        return None
    before = len(check.problems)
    question_id = data.get("id")
    if not isinstance(question_id, str) or not ID_PATTERN.fullmatch(question_id) or len(question_id) > MAX_KEY_LENGTH:
        check.add(
            f"{path}.id",
            f"must be lower-case letters, digits and _ starting with a letter, at most {MAX_KEY_LENGTH} characters",
        )
        question_id = None
    elif question_id in seen:
        check.add(f"{path}.id", f"repeats the id {question_id!r} of an earlier question")
    else:
        seen.add(question_id)
    kind = data.get("type")
    if kind not in QUESTION_TYPES:
        check.add(f"{path}.type", f"must be one of {', '.join(QUESTION_TYPES)}")
        check.unknown(data, QUESTION_KEYS | {k for keys in TYPE_KEYS.values() for k in keys}, path)
        return None
    check.unknown(data, QUESTION_KEYS | TYPE_KEYS[kind], path)
    prompt = check.text(data, "prompt", path, maximum=MAX_PROMPT_LENGTH)
    required = data.get("required")
    if not isinstance(required, bool):
        check.add(f"{path}.required", "must be true or false")
    extra: dict[str, Any] = {}
    if kind == LIKERT:
        extra = _likert(check, data, path)
    elif kind == MULTIPLE_CHOICE:
        extra = _options(check, data, path)
    elif kind == FREE_TEXT:
        extra = _free_text(check, data, path)
    if len(check.problems) > before or question_id is None:
        return None
    return Question(id=question_id, type=kind, prompt=prompt, required=bool(required), **extra)


def rubric_parse(data: Any) -> Rubric:
    """A checked ``Rubric`` from data read from YAML or JSON; ``RubricError`` listing every
    problem with its path otherwise."""
    check = _Checker()
    if not isinstance(data, dict):
        raise RubricError([("rubric", "must be a mapping with key, title, instructions and questions")])
    check.unknown(data, RUBRIC_KEYS, "")
    key = data.get("key")
    if not isinstance(key, str) or not KEY_PATTERN.fullmatch(key) or len(key) > MAX_RUBRIC_KEY_LENGTH:
        check.add(
            "key",
            "must be lower-case letters, digits and _ starting with a letter, "
            f"at most {MAX_RUBRIC_KEY_LENGTH} characters",
        )
        key = ""
    title = check.text(data, "title", "", maximum=MAX_TITLE_LENGTH)
    instructions = check.text(data, "instructions", "", maximum=MAX_INSTRUCTIONS_LENGTH)
    raw = data.get("questions")
    questions: list[Question] = []
    if not isinstance(raw, list) or not raw:
        check.add("questions", "must be a non-empty list of questions")
    elif len(raw) > MAX_QUESTIONS:
        check.add("questions", f"must have at most {MAX_QUESTIONS} questions")
    else:
        seen: set[str] = set()
        for index, item in enumerate(raw):
            question = _question(check, item, f"questions[{index}]", seen)
            if question is not None:
                questions.append(question)
    if check.problems:
        raise RubricError(check.problems[:MAX_PROBLEMS])
    return Rubric(key=key, title=title, instructions=instructions, questions=tuple(questions))


def _indentation_depth(text: str) -> int:
    """How many levels deep YAML's block indentation goes: each line indented further than the
    line it follows opens a level, one indented less closes the levels it leaves."""
    open_levels: list[int] = []
    deepest = 0
    for line in text.splitlines():
        content = line.lstrip(" ")
        if not content or content.startswith("#"):
            continue
        indent = len(line) - len(content)
        while open_levels and open_levels[-1] >= indent:
            open_levels.pop()
        open_levels.append(indent)
        deepest = max(deepest, len(open_levels))
    return deepest


def rubric_from_text(text: str | bytes, *, name: str = "") -> Rubric:
    """A checked rubric from a YAML or JSON file's content."""
    return rubric_parse(rubric_text_load(text, name=name))


# -- answers --------------------------------------------------------------------------------


def value_check(question: Question, value: Any, n_steps: int) -> tuple[Any, str | None]:
    """A question's answer value, normalized, or the problem with it (None: no answer).
    Step links are the 1-based numbers of the candidate's steps, sorted."""
    if question.type == STEP_LINKS and isinstance(value, bool):
        # One checkbox alone reads as checked or not (a candidate of one step).
        value = [1] if value and n_steps == 1 else []
    if value == [] and question.type == STEP_LINKS and not question.required:
        return [], None  # no step linked is an answer where links are optional
    if value is None or value == "" or value == []:
        return None, ("an answer is required" if question.required else None)
    if question.type == YES_NO:
        if value not in YES_NO_VALUES:
            return None, "must be yes or no"
        return value, None
    if question.type == LIKERT:
        if isinstance(value, str) and re.fullmatch(r"-?\d{1,3}", value.strip()):
            value = int(value)
        if not _integer(value) or question.scale_min is None or question.scale_max is None:
            return None, "must be a whole number on the scale"
        if not question.scale_min <= value <= question.scale_max:
            return None, f"must be from {question.scale_min} to {question.scale_max}"
        return value, None
    if question.type == MULTIPLE_CHOICE:
        if not isinstance(value, str) or value not in question.options:
            return None, "must be one of the options"
        return value, None
    if question.type == FREE_TEXT:
        if not isinstance(value, str):
            return None, "must be text"
        limit = question.max_length or FREE_TEXT_DEFAULT_LENGTH
        if len(value) > limit:
            return None, f"must be at most {limit} characters"
        if not value.strip():
            return None, ("an answer is required" if question.required else None)
        return value.strip(), None
    # step links
    if not isinstance(value, list) or len(value) > max(n_steps, 0):
        return None, f"must be a list of step numbers from 1 to {n_steps}"
    steps: set[int] = set()
    for step in value:
        if isinstance(step, str) and step.strip().isdigit() and len(step.strip()) <= 4:
            step = int(step)
        if not _integer(step) or not 1 <= step <= n_steps:
            return None, f"must be a list of step numbers from 1 to {n_steps}"
        steps.add(step)
    return sorted(steps), None


def answer_check(rubric: Rubric, answer: Any, n_steps: int) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """The cleaned answer (every question's id, None where unanswered) and the problems, each
    naming ``answer.<question id>``."""
    if not isinstance(answer, dict):
        return {}, [("answer", "must be a mapping of question ids to answers")]
    problems: list[tuple[str, str]] = []
    cleaned: dict[str, Any] = {}
    for question in rubric.questions:
        value, problem = value_check(question, answer.get(question.id), n_steps)
        cleaned[question.id] = value
        if problem is not None:
            problems.append((f"answer.{question.id}", problem))
    known = {q.id for q in rubric.questions}
    for key in list(answer)[:50]:
        if key not in known:
            problems.append((f"answer.{str(key)[:40]}", "is not a question of this rubric"))
    return cleaned, problems


def known_answer_check(rubric: Rubric, known: Any, path: str = "known_answer") -> dict[str, Any]:
    """An item's known answers (``{question id: value}``, attention and qualification items)
    checked against the questions; free-text questions have none. ``RubricError`` otherwise."""
    if not isinstance(known, dict) or not known:
        raise RubricError([(path, "must be a non-empty mapping of question ids to known answers")])
    problems: list[tuple[str, str]] = []
    cleaned: dict[str, Any] = {}
    for key, value in list(known.items())[: MAX_QUESTIONS + 1]:
        question = rubric.question(str(key))
        at = f"{path}.{str(key)[:40]}"
        if question is None:
            problems.append((at, "is not a question of this rubric"))
            continue
        if question.type == FREE_TEXT:
            problems.append((at, "a free_text question has no known answer"))
            continue
        checked, problem = value_check(question, value, 10_000)
        if problem is not None or checked is None:
            problems.append((at, problem or "must be an answer"))
        else:
            cleaned[question.id] = checked
    if problems:
        raise RubricError(problems)
    return cleaned
