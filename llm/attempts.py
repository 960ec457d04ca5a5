"""Every decision of one call, free of I/O: the attempt loop the blocking and the asynchronous
client both drive (``LLMClient._call``, ``LLMClient._call_async``).

``AttemptLoop.steps()`` is a generator: it yields ``("send", path, state)`` and receives
``(body, latency_ms)`` or has the send's exception thrown in, yields ``("sleep", seconds,
state)`` before a retry, and returns ``(result, last body)``. On the way it falls back from
a structured-output path the server rejects, fits the budget to a context the server names,
retries what the retry policy (``llm/retries.py``) says is worth retrying, re-asks an
unparseable answer with the parse error appended, and asks a truncated one again with a
larger budget that still fits."""

from __future__ import annotations

import logging
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import openai
from django.conf import settings

from llm import capabilities as caps
from llm.call_watch import CallWatch, Interrupted
from llm.completions import CompletionVerdict, MalformedResponse, _usage, classify_completion
from llm.constants import (
    OUTCOME_API_ERROR,
    OUTCOME_OK,
    OUTCOME_PARSE_FAILED,
    OUTCOME_TOO_LONG,
    OUTCOME_TRUNCATED,
    PATH_TEXT,
)
from llm.fitting import CallState, PromptTooLong
from llm.prices import request_cost
from llm.request import LLMRequest, LLMResult
from llm.retries import (
    RETRYABLE_ERRORS,
    _describe,
    _error_words,
    cut_off_budget,
    is_greedy,
    note_cut_off,
    retry_wait,
)

if TYPE_CHECKING:
    from llm.client import LLMClient

logger = logging.getLogger(__name__)

SPEED_MIN_TOKENS = 8  # an answer shorter than this says little of an endpoint's speed

# What the loop asks of its driver: ("send", path, state) or ("sleep", seconds, state).
Step = tuple[str, Any, CallState]
Steps = Generator[Step, Any, tuple[LLMResult, dict | None]]


class AttemptLoop:
    """One call of ``request`` (ledger key ``key``) through ``client``'s endpoint."""

    def __init__(self, client: LLMClient, request: LLMRequest, key: str, watch: CallWatch):
        self.client = client
        self.fit = client.fit
        self.request = request
        self.key = key
        self.watch = watch
        self.state = CallState(request, request.params.get("max_tokens") or settings.LLM_DEFAULT_MAX_TOKENS)
        self.paths = self.fit.paths(request)
        self.path_index = 0
        self.last_body: dict | None = None

    def steps(self) -> Steps:
        """The loop (see the module's docstring)."""
        state = self.state
        refused = self._cut_off_before()
        if refused is not None:
            return refused, None
        while True:
            if self.watch.should_stop():
                raise Interrupted("the run stopped")
            path = self.paths[self.path_index]
            state.attempts += 1
            try:
                body, latency_ms = yield ("send", path, state)
            except PromptTooLong as exc:  # refused before sending: the endpoint's context is known
                return self._result(OUTCOME_TOO_LONG, path=path, error=str(exc)), self.last_body
            except openai.APIStatusError as exc:
                rejection = self._rejection(exc, path)
                if rejection is True:
                    continue
                if isinstance(rejection, LLMResult):
                    return rejection, self.last_body
                final = self._failure(exc)
                if final is not None:
                    return self._result(OUTCOME_API_ERROR, path=path, error=final), self.last_body
                yield ("sleep", retry_wait(exc, state.api_failures, self.client.endpoint_id), state)
                continue
            except (openai.APIConnectionError, openai.APITimeoutError, MalformedResponse) as exc:
                final = self._failure(exc)
                if final is not None:
                    return self._result(OUTCOME_API_ERROR, path=path, error=final), self.last_body
                yield ("sleep", retry_wait(exc, state.api_failures, self.client.endpoint_id), state)
                continue
            result = self._answered(body, latency_ms, path)
            if result is not None:
                return result, body

    def _cut_off_before(self) -> LLMResult | None:
        """A greedy request asked before and cut off at some budget can only be cut off the same
        way: it is asked again only with a larger budget that fits (set here), and not at all
        (this result) when none does."""
        request, state = self.request, self.state
        cut_off = cut_off_budget(self.key) if is_greedy(request) else None
        if cut_off is None:
            return None
        state.prompt_chars = len(request.prompt or "") + sum(len(m.get("content") or "") for m in request.messages)
        state.prompt_messages = 1 if request.prompt is not None else len(request.messages)
        known = caps.capabilities_store().get(self.client.endpoint_id)
        state.prompt_tokens = known.prompt_tokens(state.prompt_chars, state.prompt_messages)
        grown = int(cut_off * settings.LLM_TRUNCATION_TOKEN_FACTOR)
        room = self.fit.room(state.prompt_tokens)
        larger = grown if room is None else min(grown, room)
        if larger <= cut_off:
            error = (
                f"cut off at max_tokens={cut_off} when asked before, and no larger budget fits the context "
                f"({self.fit.context()} tokens, prompt about {state.prompt_tokens}): not sent again"
            )
            return self._result(OUTCOME_TRUNCATED, path=self.paths[0], error=error)
        state.max_tokens = max(state.max_tokens, larger)
        return None

    def _rejection(self, exc: openai.APIStatusError, path: str) -> LLMResult | bool:
        """What a server's refusal of the request teaches: True to ask again at once (on the next
        structured-output path, or with a budget that fits the context it names), the call's
        result when the prompt does not fit, False for any other failure (the retry policy's)."""
        state = self.state
        endpoint_id = self.client.endpoint_id
        words = _error_words(exc)
        kind = caps.rejection_kind(exc.status_code, words)
        if (
            kind == caps.REJECTION_FORMAT
            and self.request.schema is not None
            and path != PATH_TEXT
            and self.path_index + 1 < len(self.paths)
        ):
            logger.info("endpoint %s rejected %s (%s); falling back", endpoint_id, path, words[:200])
            caps.learn_rejected_path(endpoint_id, path, self.client._masked(f"HTTP {exc.status_code}: {words}"))
            self.path_index += 1
            return True
        if kind == caps.REJECTION_CONTEXT:
            return self._context_overflow(words, path)
        if kind == caps.REJECTION_BUDGET and not state.budget_refits:
            context, _ = caps.context_numbers(words)
            if context:
                caps.learn_context(endpoint_id, context, "server error")
                state.budget_refits += 1
                return True
        return False

    def _context_overflow(self, words: str, path: str) -> LLMResult | bool:
        """The server said the request exceeds the context: when the prompt itself fits, the
        budget beside it did not, so it is asked once more with one that fits (True);
        otherwise the call ends ``too_long``."""
        state = self.state
        error = self.client._masked(self.fit.learn_overflow(state, words))
        context, prompt_tokens = caps.context_numbers(words)
        if (
            context
            and prompt_tokens
            and not state.budget_refits
            and context - prompt_tokens - settings.LLM_CONTEXT_MARGIN_TOKENS >= settings.LLM_MIN_ANSWER_TOKENS
        ):
            state.budget_refits += 1
            state.server_prompt_tokens = prompt_tokens
            return True
        return self._result(OUTCOME_TOO_LONG, path=path, error=error)

    def _failure(self, exc: Exception) -> str | None:
        """A failed attempt, told to the watch: the call's final error when retrying cannot
        help or attempts ran out, else None (sleep, then ask again)."""
        state, client = self.state, self.client
        error = client._masked(_describe(exc, timeout=state.timeout))
        slow = isinstance(exc, openai.APITimeoutError)
        self.watch.attempt_failed(error, client.endpoint_label, slow=slow)
        if slow and not client.endpoint.timeout_seconds:  # a timeout that was set is kept as set
            caps.learn_timeout(client.endpoint_id, state.timeout, float(settings.LLM_TIMEOUT_MAX_SECONDS))
        retryable = isinstance(exc, RETRYABLE_ERRORS)
        if not retryable or state.attempts >= settings.LLM_MAX_ATTEMPTS:
            return error
        state.api_failures += 1
        return None

    def _answered(self, body: dict, latency_ms: int, path: str) -> LLMResult | None:
        """An answer came: what it teaches of the endpoint, and the call's result, or None to
        ask again (a larger budget after a truncation, or a re-ask after a parse failure)."""
        state = self.state
        self.watch.attempt_succeeded()
        self.last_body = body
        state.latency_ms += latency_ms
        tokens_in, tokens_out = _usage(body)
        state.tokens_in += tokens_in
        state.tokens_out += tokens_out
        verdict = classify_completion(self.request, body)
        self._learn_from_answer(verdict, latency_ms, tokens_in, tokens_out)
        if verdict.outcome == OUTCOME_TRUNCATED and self._grow_budget(verdict):
            return None
        if verdict.outcome == OUTCOME_PARSE_FAILED and self._reask(verdict):
            return None
        return self._result(
            verdict.outcome,
            path=path,
            text=verdict.text,
            value=verdict.value,
            finish_reason=verdict.finish_reason,
            error=verdict.error,
        )

    def _learn_from_answer(self, verdict: CompletionVerdict, latency_ms: int, tokens_in: int, tokens_out: int) -> None:
        """How the server counts this prompt (whatever the answer), and its speed (a usable answer
        long enough to say)."""
        state, endpoint_id = self.state, self.client.endpoint_id
        if tokens_in:
            caps.learn_usage(
                endpoint_id, chars=state.prompt_chars, messages=state.prompt_messages, prompt_tokens=tokens_in
            )
        if verdict.outcome == OUTCOME_OK and tokens_out >= SPEED_MIN_TOKENS:
            caps.learn_speed(endpoint_id, seconds=latency_ms / 1000, tokens_out=tokens_out)

    def _grow_budget(self, verdict: CompletionVerdict) -> bool:
        """A truncated answer is asked again (True) only with a larger budget that still fits the
        context: the same request (greedy, or the same budget) would only be cut off the same
        way. Otherwise the verdict's error says where it was cut off, and a greedy request is
        remembered as cut off at that budget."""
        state = self.state
        grown = int(state.sent_max_tokens * settings.LLM_TRUNCATION_TOKEN_FACTOR)
        room = self.fit.room(state.prompt_tokens)
        larger = grown if room is None else min(grown, room)
        if (
            larger > state.sent_max_tokens
            and state.truncation_retries < settings.LLM_TRUNCATION_RETRIES
            and state.attempts < settings.LLM_MAX_ATTEMPTS
        ):
            state.truncation_retries += 1
            state.max_tokens = larger
            return True
        verdict.error = f"answer cut off at max_tokens={state.sent_max_tokens}"
        if is_greedy(self.request):
            note_cut_off(self.key, state.sent_max_tokens)
        if larger <= state.sent_max_tokens and room is not None:
            verdict.error += (
                f"; no larger budget fits the context ({self.fit.context()} tokens, prompt about {state.prompt_tokens})"
            )
        return False

    def _reask(self, verdict: CompletionVerdict) -> bool:
        """An unparseable answer is asked again (True), with the parse error appended, while
        re-asks and attempts last."""
        state = self.state
        if state.reasks >= settings.LLM_PARSE_REASKS or state.attempts >= settings.LLM_MAX_ATTEMPTS:
            return False
        state.reasks += 1
        state.messages = state.messages + [
            {"role": "assistant", "content": verdict.text},
            {
                "role": "user",
                "content": (
                    f"Your answer could not be used: {verdict.error}. Reply again with only one JSON object "
                    f"that matches the required schema, and nothing else."
                ),
            },
        ]
        return True

    def _result(
        self,
        outcome: str,
        *,
        path: str,
        text: str = "",
        value: Any = None,
        finish_reason: str = "",
        error: str = "",
    ) -> LLMResult:
        state, endpoint = self.state, self.client.endpoint
        return LLMResult(
            key=self.key,
            stage=self.request.stage,
            outcome=outcome,
            value=value if outcome == OUTCOME_OK else None,
            text=text,
            path=path,
            attempts=state.attempts,
            tokens_in=state.tokens_in,
            tokens_out=state.tokens_out,
            latency_ms=state.latency_ms,
            error=error,
            finish_reason=finish_reason,
            cost_usd=request_cost(
                model=endpoint.model,
                price_input=endpoint.price_input,
                price_output=endpoint.price_output,
                tokens_in=state.tokens_in,
                tokens_out=state.tokens_out,
                executor=self.client.executor,
            ),
        )
