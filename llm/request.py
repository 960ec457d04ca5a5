"""One request to an OpenAI-compatible endpoint and what came of it.

``LLMRequest`` is a call's identity (its ledger key hashes the endpoint's URL and model, the
messages or prompt, the sampling parameters and the schema) and ``request_body`` the body it
is sent with on a structured-output path; ``LLMResult`` is what the client returns."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from django.conf import settings

from llm.constants import OUTCOME_OK, PATH_JSON_OBJECT, PATH_JSON_SCHEMA
from llm.endpoints import Endpoint
from llm.models import LedgerEntry


@dataclass(frozen=True)
class LLMRequest:
    """One call: its stage, the chat messages, sampling parameters and (for JSON stages) a schema."""

    stage: str
    messages: list[dict[str, str]]
    params: dict[str, Any] = field(default_factory=dict)
    schema: dict[str, Any] | None = None
    prompt: str | None = None  # a plain completion prompt (base models): sent to /completions
    # Options of the in-process vLLM engine that answers it (``vllm.LLM(**engine)``: revision,
    # max_model_len, tensor_parallel_size, ...): never sent, but part of the request's identity.
    engine: dict[str, Any] | None = None
    # Keys already computed for this request, per (base URL, model): hashing a judge's ~14 kB
    # request is a noticeable part of its CPU, and callers ask for the key more than once.
    _keys: dict[tuple[str, str], str] = field(default_factory=dict, init=False, repr=False, compare=False)

    def key(self, model: str, *, base_url: str = "", variant: str = "") -> str:
        """Ledger key: a hash of (endpoint base URL, model, messages or prompt, sampling
        parameters, schema). Product code calls :meth:`key_for` with the endpoint; a
        trailing ``/`` of the URL does not matter. Keys written before the URL was part of
        the key no longer match, so such a request is asked again once."""
        base_url = base_url.strip().rstrip("/")
        if variant:  # something of the endpoint that changes the answer (non-thinking mode)
            base_url = f"{base_url}#{variant}"
        known = self._keys.get((base_url, model))
        if known is not None:
            return known
        payload = {
            "base_url": base_url,
            "model": model,
            "messages": self.messages,
            "params": {k: v for k, v in sorted(self.params.items()) if v is not None},
            "schema": self.schema,
        }
        if self.prompt is not None:
            payload["prompt"] = self.prompt
        if self.engine:
            payload["engine"] = self.engine
        key = hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()
        self._keys[(base_url, model)] = key
        return key

    def key_for(self, endpoint: Endpoint) -> str:
        """The ledger key of this request sent to ``endpoint``: the one function the
        client, jobs, mining stage reuse, run resume and collection all use."""
        return self.key(endpoint.model, base_url=endpoint.base_url, variant=endpoint_variant(endpoint))

    @property
    def path_url(self) -> str:
        return "/completions" if self.prompt is not None else "/chat/completions"

    def to_dict(self) -> dict[str, Any]:
        data = {"stage": self.stage, "messages": self.messages, "params": self.params, "schema": self.schema}
        if self.prompt is not None:
            data["prompt"] = self.prompt
        if self.engine:
            data["engine"] = self.engine
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LLMRequest:
        return cls(
            stage=data["stage"],
            messages=data.get("messages") or [],
            params=data.get("params") or {},
            schema=data.get("schema"),
            prompt=data.get("prompt"),
            engine=data.get("engine") or None,
        )


@dataclass
class LLMResult:
    key: str
    stage: str
    outcome: str
    value: Any = None  # dict for JSON stages, str for text stages; None unless outcome is ok
    text: str = ""
    path: str = ""
    cached: bool = False
    attempts: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    latency_ms: int = 0
    cost_usd: Decimal | None = None
    error: str = ""
    finish_reason: str = ""

    @property
    def ok(self) -> bool:
        return self.outcome == OUTCOME_OK

    @classmethod
    def from_entry(cls, entry: LedgerEntry, *, cached: bool) -> LLMResult:
        return cls(
            key=entry.key,
            stage=entry.stage,
            outcome=entry.outcome,
            value=entry.parsed if entry.outcome == OUTCOME_OK else None,
            text=entry.response_text,
            path=entry.path,
            cached=cached,
            attempts=entry.attempts,
            tokens_in=entry.tokens_in,
            tokens_out=entry.tokens_out,
            latency_ms=entry.latency_ms,
            cost_usd=entry.cost_usd,
            error=entry.error,
            finish_reason=entry.finish_reason,
        )


def endpoint_variant(endpoint: Endpoint) -> str:
    """What an endpoint adds to a request's identity beside its URL and model."""
    return "no-thinking" if endpoint.disable_thinking else ""


def request_body(request: LLMRequest, model: str, *, path: str, max_tokens: int | None = None) -> dict[str, Any]:
    """The chat-completions body for a request on a structured-output path."""
    params = {k: v for k, v in request.params.items() if v is not None}
    params["max_tokens"] = max_tokens or params.get("max_tokens") or settings.LLM_DEFAULT_MAX_TOKENS
    body: dict[str, Any] = {"model": model, **params}
    if request.prompt is not None:
        body["prompt"] = request.prompt
    else:
        body["messages"] = request.messages
    if path == PATH_JSON_SCHEMA:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": request.stage, "schema": request.schema, "strict": True},
        }
    elif path == PATH_JSON_OBJECT:
        body["response_format"] = {"type": "json_object"}
    return body


SCHEMA_INSTRUCTION = "Answer with one JSON object, and nothing else, that follows this JSON Schema:"


def schema_in_prompt(messages: list[dict[str, str]], schema: dict[str, Any]) -> list[dict[str, str]]:
    """The messages with the schema stated after the last user message's text: for an endpoint
    that cannot enforce the schema (JSON mode or plain text). The static part of the prompt
    stays first, so a server's prefix cache still applies."""
    text = f"{SCHEMA_INSTRUCTION}\n{json.dumps(schema, ensure_ascii=False, separators=(',', ':'))}"
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") == "user":
            changed = dict(messages[index])
            changed["content"] = f"{changed.get('content') or ''}\n\n{text}"
            return [*messages[:index], changed, *messages[index + 1 :]]
    return [*messages, {"role": "user", "content": text}]
