"""`llm_check`: one tiny request per configured endpoint, with what it supports.

The check is also the product's probe of an endpoint: the formats it rejects (classified by
the rejection's words, never by its status alone) and the context length its ``/models``
reports are stored in the shared capability store (llm/capabilities.py) that runs use."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import openai
from django.conf import settings
from openai.types.chat import ChatCompletionMessageParam
from openai.types.chat.completion_create_params import ResponseFormat

from llm import capabilities as caps
from llm.endpoints import Endpoint, endpoint_get
from llm.outbound import destination_problem, target_words

CHECK_SCHEMA = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}},
    "required": ["ok"],
    "additionalProperties": False,
}
CHECK_MESSAGES: list[ChatCompletionMessageParam] = [
    {"role": "user", "content": 'Reply with the JSON object {"ok": true} and nothing else.'}
]


@dataclass
class EndpointCheck:
    roles: list[str]
    base_url: str
    model: str
    reachable: bool
    structured_output: str  # json_schema, json_object, text ("text (json_schema accepted but not followed)"
    # when the endpoint took the format but answered otherwise), or "" when unreachable
    latency_ms: int | None
    served_model: str
    error: str = ""
    answer: str = ""  # the model's answer (an endpoint record's Test shows an excerpt)
    rejected: dict[str, str] | None = None  # format -> the server's words, for the formats it rejected
    context_length: int | None = None  # what is known of the model's context (tokens)
    context_source: str = ""

    def describe_capabilities(self) -> str:
        """One line: the format that works, what was rejected and why, the context."""
        parts = [f"structured output: {self.structured_output or 'none'}"]
        for name, words in (self.rejected or {}).items():
            parts.append(f"{name} rejected ({words[:160]})")
        if self.context_length:
            parts.append(f"context {self.context_length} tokens ({self.context_source})")
        else:
            parts.append("context length unknown (set it on the endpoint record)")
        return "; ".join(parts)


def _try(client: openai.OpenAI, model: str, response_format: ResponseFormat | None) -> tuple[dict, int]:
    """One check request; without a response format the request names none."""
    started = time.perf_counter()
    raw = client.chat.completions.with_raw_response.create(
        model=model,
        messages=CHECK_MESSAGES,
        max_tokens=20,
        response_format=response_format if response_format else openai.omit,
    )
    return raw.parse().model_dump(), int((time.perf_counter() - started) * 1000)


def _content(body: dict) -> str:
    """The first choice's message content, or "" when the answer has none (shapes vary)."""
    choices = body.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else None
    message = first.get("message") if isinstance(first, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    return content if isinstance(content, str) else ""


def _follows_check_schema(answer: str) -> bool:
    """Whether the answer is the JSON object CHECK_SCHEMA asks for ({"ok": <boolean>})."""
    try:
        value = json.loads(answer)
    except ValueError:
        return False
    return isinstance(value, dict) and isinstance(value.get("ok"), bool)


def _probe_context(client: openai.OpenAI, endpoint: Endpoint, endpoint_id: str) -> None:
    """Learn the context length from ``/models`` (vLLM gives ``max_model_len``), unless the
    endpoint record or role sets it."""
    if endpoint.context_length:
        caps.learn_context(endpoint_id, endpoint.context_length, "endpoint setting")
        return
    try:
        body = client.get("/models", cast_to=object)
    except (openai.APIError, ValueError):
        return
    length = caps.served_context_length(body, endpoint.model)
    if length:
        caps.learn_context(endpoint_id, length, "/models")


def endpoint_check(endpoint: Endpoint, roles: list[str], timeout: float = 30.0) -> EndpointCheck:
    check = EndpointCheck(
        roles=roles,
        base_url=endpoint.base_url,
        model=endpoint.model,
        reachable=False,
        structured_output="",
        latency_ms=None,
        served_model="",
    )
    refused = destination_problem(endpoint.base_url)
    if refused is not None:  # nothing is sent: not the server's own or private services (llm/outbound.py)
        check.error = f"not sent: {refused}"
        return check
    client = openai.OpenAI(
        base_url=endpoint.base_url,
        api_key=endpoint.api_key or "none",
        max_retries=0,
        timeout=timeout,
        http_client=openai.DefaultHttpxClient(follow_redirects=False),
    )
    endpoint_id = caps.endpoint_key(endpoint.base_url, endpoint.model)
    formats: list[tuple[str, ResponseFormat | None]] = [
        (
            "json_schema",
            {"type": "json_schema", "json_schema": {"name": "llm_check", "schema": CHECK_SCHEMA, "strict": True}},
        ),
        ("json_object", {"type": "json_object"}),
        ("text", None),
    ]
    check.rejected = {}
    try:
        for name, response_format in formats:
            try:
                body, latency = _try(client, endpoint.model, response_format)
            except openai.APIStatusError as exc:
                words = str(exc.message or "")
                if exc.body is not None and not isinstance(exc.body, str):
                    words = f"{words} {json.dumps(exc.body, default=str)[:500]}"
                if name != "text" and caps.rejection_kind(exc.status_code, words) == caps.REJECTION_FORMAT:
                    check.rejected[name] = f"HTTP {exc.status_code}: {target_words(exc.message)}"
                    caps.learn_rejected_path(endpoint_id, name, check.rejected[name])
                    check.error = f"{name} rejected: {target_words(exc.message)}"
                    continue
                raise
            check.served_model = str(body.get("model") or "")
            check.latency_ms = latency
            check.answer = _content(body)
            check.error = ""
            if not check.answer.strip():
                # A 200 without a message (no choices, a null choice, empty content): nothing usable.
                check.error = "HTTP 200 but the answer holds no message content"
                break
            check.reachable = True
            check.structured_output = (
                name
                if name == "text" or _follows_check_schema(check.answer)
                else (f"text ({name} accepted but not followed)")
            )
            break
    except openai.APIStatusError as exc:
        check.error = f"HTTP {exc.status_code}: {target_words(exc.message)}"
    except openai.APIConnectionError as exc:
        check.error = f"cannot connect: {exc.__class__.__name__}"
    else:
        if check.reachable:
            _probe_context(client, endpoint, endpoint_id)
            known = caps.capabilities_store().get(endpoint_id)
            check.context_length, check.context_source = known.context_length, known.context_source
    finally:
        client.close()
    return check


def endpoints_to_check(role: str | None = None) -> dict[tuple[str, str], tuple[Endpoint, list[str]]]:
    """Configured endpoints, each once, with the roles that use it."""
    roles = [role] if role else list(settings.LLM_ROLES)
    grouped: dict[tuple[str, str], tuple[Endpoint, list[str]]] = {}
    for name in roles:
        endpoint = endpoint_get(name)
        if not endpoint.configured:
            continue
        entry = grouped.setdefault((endpoint.base_url, endpoint.model), (endpoint, []))
        entry[1].append(name)
    return grouped
