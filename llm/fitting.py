"""Fitting a request to its endpoint, with what ``llm/capabilities.py`` has learned of it.

The structured-output paths still worth trying (json_schema, then JSON mode, then plain text
with the schema stated in the prompt), the answer's budget fitted to the context left beside
the prompt (``PromptTooLong`` when none is left), the timeout an observed slow endpoint needs,
and what a context-overflow rejection teaches. ``CallState`` is one call's state across its
attempts, which the fitting reads and writes."""

from __future__ import annotations

from django.conf import settings

from llm import capabilities as caps
from llm.constants import PATH_JSON_OBJECT, PATH_JSON_SCHEMA, PATH_TEXT
from llm.endpoints import Endpoint
from llm.request import LLMRequest, request_body, schema_in_prompt


class PromptTooLong(Exception):
    """The prompt leaves no room for an answer in the endpoint's known context: not sent."""


class CallState:
    """The mutable state of one call across its attempts."""

    def __init__(self, request: LLMRequest, max_tokens: int):
        self.messages = list(request.messages)
        self.max_tokens = max_tokens  # the budget asked for (configured, or grown after a truncation)
        self.sent_max_tokens = max_tokens  # the budget the last attempt sent (fitted to the context)
        self.prompt_tokens = 0  # the last attempt's prompt, as the endpoint counts it (estimated)
        self.timeout = 0.0  # the last attempt's timeout in seconds
        self.prompt_chars = 0
        self.prompt_messages = 0
        self.budget_refits = 0  # retries after the server named a smaller context
        self.server_prompt_tokens = 0  # the prompt's tokens as the server counted them, when it said
        self.attempts = 0
        self.tokens_in = 0
        self.tokens_out = 0
        self.latency_ms = 0
        self.reasks = 0
        self.truncation_retries = 0
        self.api_failures = 0


class EndpointFit:
    """What one endpoint accepts, asked of the capabilities learned under ``endpoint_id``."""

    def __init__(self, endpoint: Endpoint, endpoint_id: str):
        self.endpoint = endpoint
        self.endpoint_id = endpoint_id

    def paths(self, request: LLMRequest) -> list[str]:
        if request.schema is None:
            return [PATH_TEXT]
        unsupported = caps.capabilities_store().get(self.endpoint_id).unsupported
        return [p for p in (PATH_JSON_SCHEMA, PATH_JSON_OBJECT, PATH_TEXT) if p not in unsupported]

    def context(self) -> int | None:
        return caps.capabilities_store().get(self.endpoint_id).context_length

    def room(self, prompt_tokens: int) -> int | None:
        """Tokens left for the answer beside a prompt of ``prompt_tokens``; None when the
        endpoint's context is unknown."""
        context = self.context()
        if context is None:
            return None
        return context - prompt_tokens - settings.LLM_CONTEXT_MARGIN_TOKENS

    def timeout(self, max_tokens: int) -> float:
        """An endpoint record's or role's timeout as set; otherwise LLM_TIMEOUT_SECONDS, raised
        for an endpoint observed to be slow to what ``max_tokens`` takes there (twice over)."""
        if self.endpoint.timeout_seconds:
            return float(self.endpoint.timeout_seconds)
        known = caps.capabilities_store().get(self.endpoint_id)
        timeout = max(float(settings.LLM_TIMEOUT_SECONDS), known.timeout_floor or 0.0)
        if known.seconds_per_token:
            timeout = max(timeout, 2 * known.seconds_per_token * max_tokens)
        return min(timeout, float(settings.LLM_TIMEOUT_MAX_SECONDS))

    def learn_overflow(self, state: CallState, words: str) -> str:
        """Learn what a context-overflow answer says (the context length, how the server
        counts this prompt) and describe it."""
        context, prompt_tokens = caps.context_numbers(words)
        if context:
            caps.learn_context(self.endpoint_id, context, "server error")
        if prompt_tokens:
            caps.learn_usage(
                self.endpoint_id, chars=state.prompt_chars, messages=state.prompt_messages, prompt_tokens=prompt_tokens
            )
        return f"the prompt does not fit the model's context; the server said: {words[:400]}"

    def wire(self, request: LLMRequest, state: CallState, path: str) -> tuple[dict, int]:
        """The body one attempt posts, and the tokens it is expected to use (for the TPM limit).
        The answer's budget is fitted to the context left beside the prompt; a prompt that
        leaves no room raises ``PromptTooLong`` (nothing is sent)."""
        messages = state.messages
        if request.schema is not None and path != PATH_JSON_SCHEMA and request.prompt is None:
            messages = schema_in_prompt(messages, request.schema)
        prompt_chars = len(request.prompt or "") + sum(len(m.get("content") or "") for m in messages)
        known = caps.capabilities_store().get(self.endpoint_id)
        n_messages = 1 if request.prompt is not None else len(messages)
        state.prompt_chars, state.prompt_messages = prompt_chars, n_messages
        state.prompt_tokens = max(known.prompt_tokens(prompt_chars, n_messages), state.server_prompt_tokens)
        budget = state.max_tokens
        room = self.room(state.prompt_tokens)
        if room is not None:
            if room < settings.LLM_MIN_ANSWER_TOKENS:
                if known.token_ratio is not None:  # the estimate is calibrated on this server
                    raise PromptTooLong(
                        f"the prompt (about {state.prompt_tokens} tokens) leaves no room for an answer in the "
                        f"model's context of {known.context_length} tokens ({known.context_source}); "
                        f"shorten the input or use a model with a longer context"
                    )
                room = settings.LLM_MIN_ANSWER_TOKENS  # the estimate is a guess: let the server decide
            budget = min(budget, room)
        state.sent_max_tokens = budget
        state.timeout = self.timeout(budget)
        body = request_body(request, self.endpoint.model, path=path, max_tokens=budget)
        if request.prompt is None:
            body["messages"] = messages
        if self.endpoint.disable_thinking:
            body["chat_template_kwargs"] = {"enable_thinking": False}
        return body, prompt_chars // 4 + budget
