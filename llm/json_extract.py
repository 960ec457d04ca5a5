"""Lenient extraction of one JSON object from a model's text answer. Pure Python.

Used when a server does not enforce a JSON schema (JSON mode or plain text), and when
scoring answers produced elsewhere. Tries, in order: the whole text; the text after the
last ``</think>``; the inside of a fenced code block; the first balanced ``{...}`` object
in the remaining text. Two different objects in one answer are ambiguous and refused,
never settled by taking the first. An answer nested deeper than ``MAX_ANSWER_DEPTH`` is
refused before any parsing (a hostile or broken model must not exhaust the recursion limit).
Raises ``JSONExtractError`` saying what was wrong."""

from __future__ import annotations

import json
import re
from typing import Any

from core.strict_json import nesting_depth

# No stage's answer nests more than a few levels; 64 leaves room and stays far from the
# interpreter's recursion limit.
MAX_ANSWER_DEPTH = 64

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


class JSONExtractError(ValueError):
    """No JSON object could be read from the text."""


def strip_reasoning(text: str) -> str:
    """Drop everything up to and including the last ``</think>`` (reasoning traces)."""
    marker = text.rfind("</think>")
    return text[marker + len("</think>") :] if marker >= 0 else text


def _balanced_objects(text: str) -> list[str]:
    """Every top-level balanced {...} in ``text``, left to right, respecting strings and escapes."""
    found = []
    start = text.find("{")
    while start >= 0:
        end = _object_end(text, start)
        if end is None:
            start = text.find("{", start + 1)
            continue
        found.append(text[start:end])
        start = text.find("{", end)
    return found


def _object_end(text: str, start: int) -> int | None:
    """The index just past the balanced object opening at ``start``, or None."""
    depth = 0
    in_string = False
    escaped = False
    for index in range(start, len(text)):
        char = text[index]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return index + 1
    return None


def _first_object(text: str) -> str | None:
    """The first balanced {...} in ``text``, respecting strings and escapes."""
    objects = _balanced_objects(text)
    return objects[0] if objects else None


def _distinct_objects(body: str) -> list[dict[str, Any]]:
    """The different JSON objects written in ``body`` (fenced or bare); repeats count once."""
    seen: list[dict[str, Any]] = []
    pieces = [m.group(1) for m in _FENCE.finditer(body)] + [_FENCE.sub(" ", body)]
    for piece in pieces:
        for raw in _balanced_objects(piece):
            try:
                value = json.loads(raw)
            except json.JSONDecodeError:
                continue
            if isinstance(value, dict) and value not in seen:
                seen.append(value)
    return seen


def extract_json_object(text: str) -> dict[str, Any]:
    """Return the JSON object in ``text`` or raise ``JSONExtractError``."""
    if text is None or not text.strip():
        raise JSONExtractError("the answer is empty")
    body = strip_reasoning(text).strip()
    if nesting_depth(body) > MAX_ANSWER_DEPTH:
        raise JSONExtractError(f"the answer nests JSON more than {MAX_ANSWER_DEPTH} levels deep")
    try:
        whole = json.loads(body)
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, dict):
        return whole
    objects = _distinct_objects(body)
    if len(objects) > 1:
        raise JSONExtractError(
            f"the answer holds {len(objects)} different JSON objects; it is ambiguous which one is the answer"
        )
    candidates = [body]
    candidates += [m.group(1).strip() for m in _FENCE.finditer(body)]
    balanced = _first_object(body)
    if balanced:
        candidates.append(balanced)
    last_error = "no '{' found"
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except json.JSONDecodeError as exc:
            last_error = f"{exc.msg} at line {exc.lineno} column {exc.colno}"
            continue
        if isinstance(value, dict):
            return value
        last_error = f"expected a JSON object, got {type(value).__name__}"
    raise JSONExtractError(f"no JSON object in the answer ({last_error})")
