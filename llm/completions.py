"""Reading a completion: the envelope's shape checked (``completion_envelope``), the outcome
decided (``classify_completion``: ok, parse_failed, truncated, refused) and the tokens used
(``_usage``). Every executor reads its answers through these."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import jsonschema

from llm.constants import OUTCOME_OK, OUTCOME_PARSE_FAILED, OUTCOME_REFUSED, OUTCOME_TRUNCATED
from llm.json_extract import JSONExtractError, extract_json_object
from llm.request import LLMRequest


class MalformedResponse(Exception):
    """The endpoint answered 200 with a body that is not a chat completion (an HTML error
    page, ``[]``, ``{"choices": [null]}``, non-string content, ...). Retried like a server
    error; the request ends ``api_error`` with this message when retries run out."""


@dataclass
class CompletionVerdict:
    """What one completion came to: its outcome (ok, parse_failed, truncated, refused), the
    parsed value when ok, and why not otherwise. Not a mining stage's verdict
    (``mining.stages.StageVerdict``)."""

    outcome: str
    value: Any = None
    text: str = ""
    finish_reason: str = ""
    error: str = ""


@lru_cache(maxsize=256)
def _validator(schema_json: str):
    """A compiled validator per schema: ``jsonschema.validate`` would re-check the schema
    itself on every answer, which costs more than the rest of the parsing."""
    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def classify_completion(request: LLMRequest, body: dict[str, Any]) -> CompletionVerdict:
    """Decide the outcome of one chat-completion body (used by every executor)."""
    choice = body["choices"][0]
    message = choice.get("message") or {}
    text = message.get("content") or choice.get("text") or ""
    finish_reason = choice.get("finish_reason") or ""
    if message.get("refusal") or finish_reason == "content_filter":
        return CompletionVerdict(
            OUTCOME_REFUSED,
            text=text,
            finish_reason=finish_reason,
            error=message.get("refusal") or "stopped by the content filter",
        )
    if finish_reason == "length":
        return CompletionVerdict(
            OUTCOME_TRUNCATED, text=text, finish_reason=finish_reason, error="answer cut off at the token limit"
        )
    if request.schema is None:
        return CompletionVerdict(OUTCOME_OK, value=text, text=text, finish_reason=finish_reason)
    try:
        value = extract_json_object(text)
        _validator(json.dumps(request.schema, sort_keys=True)).validate(value)
    except (JSONExtractError, jsonschema.ValidationError) as exc:
        return CompletionVerdict(
            OUTCOME_PARSE_FAILED, text=text, finish_reason=finish_reason, error=_parse_problem(exc)
        )
    return CompletionVerdict(OUTCOME_OK, value=value, text=text, finish_reason=finish_reason)


def completion_envelope(raw: Any) -> dict[str, Any]:
    """Check the shape of a completion body before anything reads it: the raw bytes or text
    of a response, or an already decoded value (a Batch API output line's body). Raises
    ``MalformedResponse`` naming what is wrong: the server's envelope is not the model's
    answer, so a broken one is an API error (retried), never a verdict."""
    if isinstance(raw, (bytes, bytearray, str)):
        try:
            body = json.loads(raw)
        except (ValueError, TypeError, RecursionError):
            text = raw.decode("utf-8", "replace") if isinstance(raw, (bytes, bytearray)) else raw
            raise MalformedResponse(f"200 with a body that is not JSON: {text[:120]!r}") from None
    else:
        body = raw
    if body is None:
        raise MalformedResponse("200 with no completion body")
    if not isinstance(body, dict):
        raise MalformedResponse(f"200 with a JSON {type(body).__name__} instead of a completion object")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices:
        raise MalformedResponse("200 with no choices in the completion")
    choice = choices[0]
    if not isinstance(choice, dict):
        raise MalformedResponse(f"200 with choices[0] = {json.dumps(choice)[:40]} instead of an object")
    message = choice.get("message")
    if message is not None and not isinstance(message, dict):
        raise MalformedResponse("200 with a message that is not an object")
    content = (message or {}).get("content") if message is not None else choice.get("text")
    if content is not None and not isinstance(content, str):
        raise MalformedResponse(f"200 with non-string content ({type(content).__name__})")
    if message is not None and message.get("refusal") is not None and not isinstance(message.get("refusal"), str):
        raise MalformedResponse("200 with a refusal that is not a string")
    finish_reason = choice.get("finish_reason")
    if finish_reason is not None and not isinstance(finish_reason, str):
        raise MalformedResponse("200 with a finish_reason that is not a string")
    return body


def _usage(body: dict[str, Any]) -> tuple[int, int]:
    """Prompt and completion tokens; anything that is not a non-negative whole number counts as 0."""
    usage = body.get("usage")
    if not isinstance(usage, dict):
        return 0, 0

    def count(name: str) -> int:
        value = usage.get(name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            return 0
        return int(value)

    return count("prompt_tokens"), count("completion_tokens")


def _parse_problem(exc: Exception) -> str:
    if isinstance(exc, jsonschema.ValidationError):
        where = "/".join(str(p) for p in exc.absolute_path) or "(top level)"
        return f"the JSON does not match the schema at {where}: {exc.message}"
    return str(exc)
