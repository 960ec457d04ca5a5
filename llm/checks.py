"""`llm_check`: one tiny request per configured endpoint, with what it supports."""
from __future__ import annotations

import time
from dataclasses import dataclass

import openai
from django.conf import settings

from llm.endpoints import Endpoint, endpoint_get

CHECK_SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"], "additionalProperties": False}
CHECK_MESSAGES = [{"role": "user", "content": 'Reply with the JSON object {"ok": true} and nothing else.'}]


@dataclass
class EndpointCheck:
    roles: list[str]
    base_url: str
    model: str
    reachable: bool
    structured_output: str  # json_schema, json_object, text, or "" when unreachable
    latency_ms: int | None
    served_model: str
    error: str = ""


def _try(client: openai.OpenAI, model: str, response_format: dict | None) -> tuple[dict, int]:
    kwargs = {"response_format": response_format} if response_format else {}
    started = time.perf_counter()
    raw = client.chat.completions.with_raw_response.create(model=model, messages=CHECK_MESSAGES, max_tokens=20, **kwargs)
    return raw.parse().model_dump(), int((time.perf_counter() - started) * 1000)


def endpoint_check(endpoint: Endpoint, roles: list[str], timeout: float = 30.0) -> EndpointCheck:
    client = openai.OpenAI(base_url=endpoint.base_url, api_key=endpoint.api_key or "none", max_retries=0, timeout=timeout)
    check = EndpointCheck(roles=roles, base_url=endpoint.base_url, model=endpoint.model, reachable=False,
                          structured_output="", latency_ms=None, served_model="")
    formats = [
        ("json_schema", {"type": "json_schema", "json_schema": {"name": "llm_check", "schema": CHECK_SCHEMA, "strict": True}}),
        ("json_object", {"type": "json_object"}),
        ("text", None),
    ]
    try:
        for name, response_format in formats:
            try:
                body, latency = _try(client, endpoint.model, response_format)
            except openai.BadRequestError as exc:
                check.error = f"{name} rejected: {exc.message}"
                continue
            check.reachable, check.structured_output, check.latency_ms = True, name, latency
            check.served_model = body.get("model") or ""
            check.error = ""
            break
    except openai.APIStatusError as exc:
        check.error = f"HTTP {exc.status_code}: {exc.message}"
    except openai.APIConnectionError as exc:
        check.error = f"cannot connect: {exc.__class__.__name__}"
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
