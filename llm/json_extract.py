"""Lenient extraction of one JSON object from a model's text answer. Pure Python.

Used when a server does not enforce a JSON schema (JSON mode or plain text), and when
scoring answers produced elsewhere. Tries, in order: the whole text; the text after the
last ``</think>``; the inside of a fenced code block; the first balanced ``{...}`` object
in the remaining text. Raises ``JSONExtractError`` saying what was wrong."""
from __future__ import annotations

import json
import re
from typing import Any

_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


class JSONExtractError(ValueError):
    """No JSON object could be read from the text."""


def strip_reasoning(text: str) -> str:
    """Drop everything up to and including the last ``</think>`` (reasoning traces)."""
    marker = text.rfind("</think>")
    return text[marker + len("</think>"):] if marker >= 0 else text


def _first_object(text: str) -> str | None:
    """The first balanced {...} in ``text``, respecting strings and escapes."""
    start = text.find("{")
    while start >= 0:
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
                    return text[start:index + 1]
        start = text.find("{", start + 1)
    return None


def extract_json_object(text: str) -> dict[str, Any]:
    """Return the JSON object in ``text`` or raise ``JSONExtractError``."""
    if text is None or not text.strip():
        raise JSONExtractError("the answer is empty")
    body = strip_reasoning(text).strip()
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
