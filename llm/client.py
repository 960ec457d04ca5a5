"""The one client for every OpenAI-compatible endpoint.

``LLMClient(endpoint).complete(request, run=...)`` sends one request through the official
``openai`` client and returns an ``LLMResult`` whose ``outcome`` is exactly one of
``ok``, ``parse_failed``, ``truncated``, ``refused``, ``api_error``; only ``ok`` carries a
value. On the way it:

* answers from the request ledger when the request's key has a finished entry (no
  network call, no cost);
* asks for structured output with ``json_schema`` (strict), falling back to JSON mode and
  then plain text with lenient extraction when a server rejects it, and records the path;
* retries 429 and 5xx with exponential backoff and jitter, honouring ``retry-after`` and
  ``retry-after-ms``; a 429 pauses the endpoint for every worker;
* re-asks an unparseable answer with the parse error appended, and retries a truncated
  answer once with a larger token budget;
* writes the ledger entry (request, raw response, outcome, tokens, latency, cost) as soon
  as the request is finished."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import random
import ssl
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache
from typing import Any, Literal, overload

import httpx2 as _http  # the HTTP library the pinned openai client is built on (requirements.txt)
import jsonschema
import openai
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from core.bulk_insert import bulk_insert
from core.secret_masking import MASK
from llm import capabilities as caps
from llm.constants import (
    EXECUTOR_ONLINE,
    OUTCOME_API_ERROR,
    OUTCOME_OK,
    OUTCOME_PARSE_FAILED,
    OUTCOME_REFUSED,
    OUTCOME_TOO_LONG,
    OUTCOME_TRUNCATED,
    PATH_JSON_OBJECT,
    PATH_JSON_SCHEMA,
    PATH_TEXT,
)
from llm.endpoints import Endpoint
from llm.json_extract import JSONExtractError, extract_json_object
from llm.limits import EndpointLimits, endpoint_limits_default, limits_get
from llm.models import LedgerEntry
from llm.outbound import destination_check, target_words
from llm.prices import request_cost

logger = logging.getLogger(__name__)

RETRY_SLEEP_SLICE_SECONDS = 0.25  # how often a waiting retry checks that its run still wants it

# Sampling parameters that are part of a request's identity.
SAMPLING_KEYS = (
    "temperature",
    "top_p",
    "max_tokens",
    "stop",
    "seed",
    "presence_penalty",
    "frequency_penalty",
    "reasoning_effort",
)


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


@lru_cache(maxsize=1)
def tls_context() -> ssl.SSLContext:
    """The TLS settings every HTTP pool of this process verifies with (the HTTP library's
    defaults: its CA bundle, or ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``). Built once: loading the
    CA bundle costs milliseconds of CPU, and a job opens a pool per 8 requests in flight."""
    return _http.create_ssl_context()


def ledger_lookup(key: str) -> LedgerEntry | None:
    """The entry that answers a key from the cache: only an ``ok`` answer. A failure
    (``parse_failed``, ``truncated``, ``refused``, ``api_error``) is never an answer, so a
    new run, a resumed run or *Retry failed* asks again; the failure stays in the entry's
    history."""
    return LedgerEntry.objects.filter(key=key, outcome=OUTCOME_OK).first()


def finished_keys(keys: list[str], chunk: int = 2000) -> set[str]:
    """The keys among ``keys`` with an ``ok`` ledger entry (the ones not sent again), in few queries."""
    found: set[str] = set()
    for start in range(0, len(keys), chunk):
        found.update(
            LedgerEntry.objects.filter(key__in=keys[start : start + chunk], outcome=OUTCOME_OK).values_list(
                "key", flat=True
            )
        )
    return found


def _header_seconds(value: str | None, scale: float = 1.0) -> float | None:
    """A finite, non-negative number of seconds from a header value, or None (absent,
    negative, ``nan``, ``inf``, an HTTP date or anything else unreadable)."""
    if not value:
        return None
    try:
        seconds = float(value) * scale
    except (TypeError, ValueError):
        return None
    if not math.isfinite(seconds) or seconds < 0:
        return None
    return seconds


def _retry_after_seconds(error: openai.APIStatusError) -> float | None:
    """The wait an error asks for (``retry-after-ms`` or ``retry-after``), capped at
    LLM_RETRY_AFTER_MAX_SECONDS so that one odd header cannot stall an endpoint for hours;
    None when the header is absent or unreadable (the client's own backoff applies)."""
    headers = error.response.headers if error.response is not None else {}
    seconds = _header_seconds(headers.get("retry-after-ms"), 0.001)
    if seconds is None:
        seconds = _header_seconds(headers.get("retry-after"))
    if seconds is None:
        return None
    return min(seconds, settings.LLM_RETRY_AFTER_MAX_SECONDS)


class MalformedResponse(Exception):
    """The endpoint answered 200 with a body that is not a chat completion (an HTML error
    page, ``[]``, ``{"choices": [null]}``, non-string content, ...). Retried like a server
    error; the request ends ``api_error`` with this message when retries run out."""


class Interrupted(Exception):
    """The caller's run was paused or cancelled while the request waited for a retry: it
    is left unfinished (no ledger entry), to be asked when the run resumes."""


class CallWatch:
    """What a run learns from its calls while they happen, and how it stops them. The
    default watches nothing; ``llm.runs.RunWatch`` counts retries and trips the breaker."""

    def attempt_failed(self, error: str, endpoint: str = "", *, slow: bool = False) -> None:
        """``slow``: the attempt timed out on a connected endpoint (it is working, late)."""

    def attempt_succeeded(self) -> None:
        pass

    def waiting(self, delta: int) -> None:
        """+1 when a request starts waiting for a retry, -1 when it stops waiting."""

    def should_stop(self) -> bool:
        return False


def endpoint_variant(endpoint: Endpoint) -> str:
    """What an endpoint adds to a request's identity beside its URL and model."""
    return "no-thinking" if endpoint.disable_thinking else ""


_CUT_OFF_LIMIT = 20_000  # greedy requests remembered as cut off, per process
_cut_off: OrderedDict[str, int] = OrderedDict()
_cut_off_lock = threading.Lock()


def is_greedy(request: LLMRequest) -> bool:
    """Temperature 0: the same request gives the same answer, so resending it changes nothing."""
    temperature = request.params.get("temperature")
    return temperature is not None and not isinstance(temperature, bool) and float(temperature) == 0.0


def note_cut_off(key: str, budget: int) -> None:
    """Remember that the greedy request ``key`` was cut off at ``budget`` tokens."""
    with _cut_off_lock:
        _cut_off[key] = max(budget, _cut_off.get(key, 0))
        _cut_off.move_to_end(key)
        while len(_cut_off) > _CUT_OFF_LIMIT:
            _cut_off.popitem(last=False)


def cut_off_budget(key: str) -> int | None:
    with _cut_off_lock:
        return _cut_off.get(key)


def cut_off_seed(keys: list[str], chunk: int = 2000) -> None:
    """Learn from the ledger which of ``keys`` ended truncated, and at what budget (the answer's
    length when cut off): a resumed job or *Retry failed* in a new process knows it too."""
    for start in range(0, len(keys), chunk):
        for key, response in LedgerEntry.objects.filter(
            key__in=keys[start : start + chunk], outcome=OUTCOME_TRUNCATED
        ).values_list("key", "response"):
            usage = (response or {}).get("usage") if isinstance(response, dict) else None
            tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
            if isinstance(tokens, int) and not isinstance(tokens, bool) and tokens > 0:
                note_cut_off(key, tokens)


class PromptTooLong(Exception):
    """The prompt leaves no room for an answer in the endpoint's known context: not sent."""


SPEED_MIN_TOKENS = 8  # an answer shorter than this says little of an endpoint's speed


class _Attempt:
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


class LLMClient:
    """Calls one endpoint. Thread-safe: executors share one client between threads."""

    def __init__(self, endpoint: Endpoint, *, limits: EndpointLimits | None = None, executor: str = EXECUTOR_ONLINE):
        self.endpoint = endpoint
        self.limits = limits or endpoint.limits or endpoint_limits_default()
        self.executor = executor
        self.endpoint_id = caps.endpoint_key(endpoint.base_url, endpoint.model)
        self.endpoint_label = f"{endpoint.base_url} ({endpoint.model})"
        destination_check(endpoint.base_url)  # never the server's own or private services (llm/outbound.py)
        self.openai = openai.OpenAI(
            base_url=endpoint.base_url,
            api_key=endpoint.api_key or "none",
            max_retries=0,
            timeout=endpoint.timeout_seconds or settings.LLM_TIMEOUT_SECONDS,
            # A redirect is never followed: a public URL must not pass a request on elsewhere.
            http_client=openai.DefaultHttpxClient(verify=tls_context(), follow_redirects=False),
        )
        known = caps.capabilities_store().get(self.endpoint_id)
        if endpoint.context_length:
            if known.context_length != endpoint.context_length:
                caps.learn_context(self.endpoint_id, endpoint.context_length, "endpoint setting")
        elif not known.probed_at and executor == EXECUTOR_ONLINE:
            self._probe()
        # The asynchronous path's state, set up on the first call from an event loop (_async_http).
        self._async_loop: asyncio.AbstractEventLoop | None = None
        self._async_pools: list[_http.AsyncClient] = []
        self._async_lanes: dict[asyncio.Task[Any] | None, _http.AsyncClient] = {}
        self._async_headers: dict[str, str] = {}

    def close(self) -> None:
        self.openai.close()

    PROBE_TIMEOUT_SECONDS = 5.0

    def _probe(self) -> None:
        """The cheap probe of a first use: ``/models``, for the served context length (vLLM's
        ``max_model_len``). Asked once per endpoint and capability lifetime; a server without
        it, or one that does not answer, is learned from its errors instead."""
        length = None
        try:
            body = self.openai.get("/models", cast_to=object, options={"timeout": self.PROBE_TIMEOUT_SECONDS})
            length = caps.served_context_length(body, self.endpoint.model)
        except Exception:  # the probe is a hint: any failure leaves the context unknown
            pass
        caps.learn_probe(self.endpoint_id, length)

    # -- the asynchronous client (llm/async_executor.py) ------------------------------

    ASYNC_POOL_CONNECTIONS = 8  # connections per asynchronous pool (see _async_http)

    def _async_http(self) -> _http.AsyncClient:
        """The HTTP client of the calling task on the running event loop.

        The asynchronous path posts with the HTTP library the ``openai`` package is built on
        directly (the same headers, timeout and error classes; ``_async_post``): the
        package's own request machinery costs more CPU than the rest of a request. The
        library's connection pool scans every one of its connections (polling each socket)
        whenever a request starts or ends, so one pool of C connections costs O(C) per
        request; a loop with C requests in flight uses C / 8 pools of 8 connections, each
        task keeping the pool it was given (its connections stay warm)."""
        loop = asyncio.get_running_loop()
        if self._async_loop is not loop:
            self._async_loop = loop
            self._async_pools = []
            self._async_lanes = {}
            self._async_headers = {
                **{k: v for k, v in self.openai.default_headers.items() if isinstance(v, str)},
                "X-Stainless-Async": "async:asyncio",
                "Authorization": f"Bearer {self.endpoint.api_key or 'none'}",
            }
        task = asyncio.current_task()
        client = self._async_lanes.get(task)
        if client is None:
            lane = len(self._async_lanes) // self.ASYNC_POOL_CONNECTIONS
            if lane >= len(self._async_pools):
                size = self.ASYNC_POOL_CONNECTIONS
                self._async_pools.append(
                    _http.AsyncClient(
                        verify=tls_context(),
                        timeout=self.endpoint.timeout_seconds or settings.LLM_TIMEOUT_SECONDS,
                        follow_redirects=False,  # never passed on elsewhere (llm/outbound.py)
                        limits=_http.Limits(max_connections=size, max_keepalive_connections=size),
                    )
                )
            client = self._async_lanes[task] = self._async_pools[lane]
        return client

    async def _async_post(self, path_url: str, body: dict[str, Any], timeout: float) -> Any:
        """POST a JSON body; errors become the ``openai`` package's classes, as its client raises them."""
        http = self._async_http()
        request = http.build_request(
            "POST",
            str(self.openai.base_url).rstrip("/") + path_url,
            content=json.dumps(body, ensure_ascii=False).encode("utf-8"),
            headers=self._async_headers,
            timeout=timeout,
        )
        try:
            response = await http.send(request)
        except _http.TimeoutException as exc:
            raise openai.APITimeoutError(request=request) from exc
        except Exception as exc:
            raise openai.APIConnectionError(request=request) from exc
        if response.status_code >= 400:
            raise self.openai._make_status_error_from_response(response)
        return response

    async def aclose(self) -> None:
        """Close the running loop's connection pools (before the loop ends)."""
        if self._async_loop is not asyncio.get_running_loop():
            return
        for client in self._async_pools:
            await client.aclose()
        self._async_loop, self._async_pools, self._async_lanes = None, [], {}

    def _masked(self, text: str) -> str:
        """An error as stored and shown: never with the endpoint's key in it (a server may
        echo the key it refused)."""
        key = self.endpoint.api_key
        return text.replace(key, MASK) if key and len(key) >= 8 else text

    # -- public ---------------------------------------------------------------------

    @overload
    def complete(
        self,
        request: LLMRequest,
        *,
        run: str = "",
        role: str = "",
        known_unfinished: bool = False,
        watch: CallWatch | None = None,
        asynchronous: Literal[False] = False,
        record: Callable[[str, dict[str, Any]], None] | None = None,
    ) -> LLMResult: ...

    @overload
    def complete(
        self,
        request: LLMRequest,
        *,
        run: str = "",
        role: str = "",
        known_unfinished: Literal[True],
        watch: CallWatch | None = None,
        asynchronous: Literal[True],
        record: Callable[[str, dict[str, Any]], None],
    ) -> Coroutine[Any, Any, LLMResult]: ...

    def complete(
        self,
        request: LLMRequest,
        *,
        run: str = "",
        role: str = "",
        known_unfinished: bool = False,
        watch: CallWatch | None = None,
        asynchronous: bool = False,
        record: Callable[[str, dict[str, Any]], None] | None = None,
    ) -> LLMResult | Coroutine[Any, Any, LLMResult]:
        """``known_unfinished``: the caller has just checked the ledger for this key (an
        executor does it for all its keys at once), so the per-call lookup is skipped.
        ``watch`` hears of every failed attempt and may stop the call between attempts
        (``Interrupted``: nothing is recorded).

        ``asynchronous=True`` (the online executor, on its event loop): returns an awaitable
        of the result, sent through the same attempt loop over one ``AsyncOpenAI``
        connection pool. It touches no database: the caller has checked the ledger
        (``known_unfinished``) and ``record(key, fields)`` receives what the ledger stores,
        for the thread that owns the database to write in groups (``ledger_write_many``)."""
        key = request.key_for(self.endpoint)
        if asynchronous:
            if not known_unfinished or record is None:
                raise ValueError("an asynchronous call needs known_unfinished=True and a record function")
            return self._complete_async(request, key, run=run, role=role, watch=watch or CallWatch(), record=record)
        entry = None if known_unfinished else ledger_lookup(key)
        if entry is not None:
            return LLMResult.from_entry(entry, cached=True)
        result, response_body = self._call(request, key, watch or CallWatch())
        self._record(request, result, response_body, run=run, role=role)
        return result

    async def _complete_async(
        self,
        request: LLMRequest,
        key: str,
        *,
        run: str,
        role: str,
        watch: CallWatch,
        record: Callable[[str, dict[str, Any]], None],
    ) -> LLMResult:
        result, response_body = await self._call_async(request, key, watch)
        record(key, self.ledger_fields(request, result, response_body, run=run, role=role))
        return result

    # -- the attempt loop -------------------------------------------------------------

    def _paths(self, request: LLMRequest) -> list[str]:
        if request.schema is None:
            return [PATH_TEXT]
        unsupported = caps.capabilities_store().get(self.endpoint_id).unsupported
        return [p for p in (PATH_JSON_SCHEMA, PATH_JSON_OBJECT, PATH_TEXT) if p not in unsupported]

    def _call(self, request: LLMRequest, key: str, watch: CallWatch) -> tuple[LLMResult, dict | None]:
        """The attempt loop (``_attempts``) driven by blocking sends and sleeps."""
        steps = self._attempts(request, key, watch)
        reply: Any = None
        error: BaseException | None = None
        while True:
            try:
                action = steps.throw(error) if error is not None else steps.send(reply)
            except StopIteration as finished:
                return finished.value
            reply = error = None
            if action[0] == "send":
                try:
                    reply = self._send(request, action[2], action[1])
                except Exception as exc:  # the attempt loop decides what a failed send means
                    error = exc
            else:
                self._sleep(action[1], watch)

    async def _call_async(self, request: LLMRequest, key: str, watch: CallWatch) -> tuple[LLMResult, dict | None]:
        """The same attempt loop driven by an event loop: sends and waits are awaited."""
        steps = self._attempts(request, key, watch)
        reply: Any = None
        error: BaseException | None = None
        while True:
            try:
                action = steps.throw(error) if error is not None else steps.send(reply)
            except StopIteration as finished:
                return finished.value
            reply = error = None
            if action[0] == "send":
                try:
                    reply = await self._send_async(request, action[2], action[1])
                except Exception as exc:
                    error = exc
            else:
                await self._sleep_async(action[1], watch)

    def _attempts(self, request: LLMRequest, key: str, watch: CallWatch):
        """Every decision of one call, free of I/O: it yields ``("send", path, state)`` and
        receives ``(body, latency_ms)`` or has the send's exception thrown in, yields
        ``("sleep", seconds, state)`` before a retry, and returns ``(result, last body)``.
        The blocking and the asynchronous client drive the same loop."""
        state = _Attempt(request, request.params.get("max_tokens") or settings.LLM_DEFAULT_MAX_TOKENS)
        paths = self._paths(request)
        path_index = 0
        last_body: dict | None = None
        cut_off = cut_off_budget(key) if is_greedy(request) else None
        if cut_off is not None:
            # Asked before and cut off at ``cut_off`` tokens: the same greedy request can only be
            # cut off the same way, so it is asked again only with a larger budget that fits.
            state.prompt_chars = len(request.prompt or "") + sum(len(m.get("content") or "") for m in request.messages)
            state.prompt_messages = 1 if request.prompt is not None else len(request.messages)
            known = caps.capabilities_store().get(self.endpoint_id)
            state.prompt_tokens = known.prompt_tokens(state.prompt_chars, state.prompt_messages)
            grown = int(cut_off * settings.LLM_TRUNCATION_TOKEN_FACTOR)
            room = self._room(state.prompt_tokens)
            larger = grown if room is None else min(grown, room)
            if larger <= cut_off:
                error = (
                    f"cut off at max_tokens={cut_off} when asked before, and no larger budget fits the context "
                    f"({self._context()} tokens, prompt about {state.prompt_tokens}): not sent again"
                )
                return self._result(key, request, state, OUTCOME_TRUNCATED, path=paths[0], error=error), None
            state.max_tokens = max(state.max_tokens, larger)
        while True:
            if watch.should_stop():
                raise Interrupted("the run stopped")
            path = paths[path_index]
            state.attempts += 1
            try:
                body, latency_ms = yield ("send", path, state)
            except PromptTooLong as exc:  # refused before sending: the endpoint's context is known
                return self._result(key, request, state, OUTCOME_TOO_LONG, path=path, error=str(exc)), last_body
            except openai.APIStatusError as exc:
                words = _error_words(exc)
                kind = caps.rejection_kind(exc.status_code, words)
                if (
                    kind == caps.REJECTION_FORMAT
                    and request.schema is not None
                    and path != PATH_TEXT
                    and path_index + 1 < len(paths)
                ):
                    logger.info("endpoint %s rejected %s (%s); falling back", self.endpoint_id, path, words[:200])
                    caps.learn_rejected_path(self.endpoint_id, path, self._masked(f"HTTP {exc.status_code}: {words}"))
                    path_index += 1
                    continue
                if kind == caps.REJECTION_CONTEXT:
                    error = self._masked(self._learn_overflow(state, words))
                    context, prompt_tokens = caps.context_numbers(words)
                    if (  # the prompt fits: the budget beside it did not, so ask once with one that fits
                        context
                        and prompt_tokens
                        and not state.budget_refits
                        and context - prompt_tokens - settings.LLM_CONTEXT_MARGIN_TOKENS
                        >= settings.LLM_MIN_ANSWER_TOKENS
                    ):
                        state.budget_refits += 1
                        state.server_prompt_tokens = prompt_tokens
                        continue
                    return self._result(key, request, state, OUTCOME_TOO_LONG, path=path, error=error), last_body
                if kind == caps.REJECTION_BUDGET and not state.budget_refits:
                    context, _ = caps.context_numbers(words)
                    if context:
                        caps.learn_context(self.endpoint_id, context, "server error")
                        state.budget_refits += 1
                        continue
                final = self._failure(exc, state, watch)
                if final is not None:
                    return self._result(key, request, state, OUTCOME_API_ERROR, path=path, error=final), last_body
                yield ("sleep", self._wait_after(exc, state), state)
                continue
            except (openai.APIConnectionError, openai.APITimeoutError, MalformedResponse) as exc:
                final = self._failure(exc, state, watch)
                if final is not None:
                    return self._result(key, request, state, OUTCOME_API_ERROR, path=path, error=final), last_body
                yield ("sleep", self._wait_after(exc, state), state)
                continue

            watch.attempt_succeeded()
            last_body = body
            state.latency_ms += latency_ms
            tokens_in, tokens_out = _usage(body)
            state.tokens_in += tokens_in
            state.tokens_out += tokens_out
            verdict = classify_completion(request, body)
            if tokens_in:  # how the server counts this prompt, whatever the answer
                caps.learn_usage(
                    self.endpoint_id, chars=state.prompt_chars, messages=state.prompt_messages, prompt_tokens=tokens_in
                )
            if verdict.outcome == OUTCOME_OK and tokens_out >= SPEED_MIN_TOKENS:
                caps.learn_speed(self.endpoint_id, seconds=latency_ms / 1000, tokens_out=tokens_out)
            if verdict.outcome == OUTCOME_TRUNCATED:
                # Asked again only with a larger budget that still fits the context: the same
                # request (greedy, or the same budget) would only be cut off the same way.
                grown = int(state.sent_max_tokens * settings.LLM_TRUNCATION_TOKEN_FACTOR)
                room = self._room(state.prompt_tokens)
                larger = grown if room is None else min(grown, room)
                if (
                    larger > state.sent_max_tokens
                    and state.truncation_retries < settings.LLM_TRUNCATION_RETRIES
                    and state.attempts < settings.LLM_MAX_ATTEMPTS
                ):
                    state.truncation_retries += 1
                    state.max_tokens = larger
                    continue
                verdict.error = f"answer cut off at max_tokens={state.sent_max_tokens}"
                if is_greedy(request):
                    note_cut_off(key, state.sent_max_tokens)
                if larger <= state.sent_max_tokens and room is not None:
                    verdict.error += (
                        f"; no larger budget fits the context ({self._context()} tokens, "
                        f"prompt about {state.prompt_tokens})"
                    )
            if (
                verdict.outcome == OUTCOME_PARSE_FAILED
                and state.reasks < settings.LLM_PARSE_REASKS
                and state.attempts < settings.LLM_MAX_ATTEMPTS
            ):
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
                continue
            return self._result(
                key,
                request,
                state,
                verdict.outcome,
                path=path,
                text=verdict.text,
                value=verdict.value,
                finish_reason=verdict.finish_reason,
                error=verdict.error,
            ), body

    def _sleep(self, seconds: float, watch: CallWatch) -> None:
        """Wait before a retry, counted as retrying, and give up waiting as soon as the run stops."""
        watch.waiting(+1)
        try:
            deadline = time.monotonic() + seconds
            while True:
                if watch.should_stop():
                    raise Interrupted("the run stopped while a request waited for a retry")
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                time.sleep(min(left, RETRY_SLEEP_SLICE_SECONDS))
        finally:
            watch.waiting(-1)

    async def _sleep_async(self, seconds: float, watch: CallWatch) -> None:
        watch.waiting(+1)
        try:
            deadline = time.monotonic() + seconds
            while True:
                if watch.should_stop():
                    raise Interrupted("the run stopped while a request waited for a retry")
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                await asyncio.sleep(min(left, RETRY_SLEEP_SLICE_SECONDS))
        finally:
            watch.waiting(-1)

    # -- fitting a request to its endpoint (llm/capabilities.py) -------------------------

    def _context(self) -> int | None:
        return caps.capabilities_store().get(self.endpoint_id).context_length

    def _room(self, prompt_tokens: int) -> int | None:
        """Tokens left for the answer beside a prompt of ``prompt_tokens``; None when the
        endpoint's context is unknown."""
        context = self._context()
        if context is None:
            return None
        return context - prompt_tokens - settings.LLM_CONTEXT_MARGIN_TOKENS

    def _timeout(self, max_tokens: int) -> float:
        """An endpoint record's or role's timeout as set; otherwise LLM_TIMEOUT_SECONDS, raised
        for an endpoint observed to be slow to what ``max_tokens`` takes there (twice over)."""
        if self.endpoint.timeout_seconds:
            return float(self.endpoint.timeout_seconds)
        known = caps.capabilities_store().get(self.endpoint_id)
        timeout = max(float(settings.LLM_TIMEOUT_SECONDS), known.timeout_floor or 0.0)
        if known.seconds_per_token:
            timeout = max(timeout, 2 * known.seconds_per_token * max_tokens)
        return min(timeout, float(settings.LLM_TIMEOUT_MAX_SECONDS))

    def _learn_overflow(self, state: _Attempt, words: str) -> str:
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

    def _wire(self, request: LLMRequest, state: _Attempt, path: str) -> tuple[dict, int]:
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
        room = self._room(state.prompt_tokens)
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
        state.timeout = self._timeout(budget)
        body = request_body(request, self.endpoint.model, path=path, max_tokens=budget)
        if request.prompt is None:
            body["messages"] = messages
        if self.endpoint.disable_thinking:
            body["chat_template_kwargs"] = {"enable_thinking": False}
        return body, prompt_chars // 4 + budget

    def _send(self, request: LLMRequest, state: _Attempt, path: str) -> tuple[dict, int]:
        body, estimate = self._wire(request, state, path)
        limits = limits_get()
        limits.wait_turn(self.endpoint_id, self.limits, estimate)
        with limits.slot(self.endpoint_id, self.limits):
            started = time.perf_counter()
            # The client's own HTTP stack and error classes, without its per-call type
            # transformation of the body (which costs more than the rest of the request).
            response = self.openai.post(
                request.path_url, body=body, cast_to=_http.Response, options={"timeout": state.timeout}
            )
            latency_ms = int((time.perf_counter() - started) * 1000)
        return completion_envelope(response.content), latency_ms

    async def _send_async(self, request: LLMRequest, state: _Attempt, path: str) -> tuple[dict, int]:
        body, estimate = self._wire(request, state, path)
        limits = limits_get()
        await limits.wait_turn_async(self.endpoint_id, self.limits, estimate)
        async with limits.slot_async(self.endpoint_id, self.limits):
            started = time.perf_counter()
            response = await self._async_post(request.path_url, body, state.timeout)
            latency_ms = int((time.perf_counter() - started) * 1000)
        return completion_envelope(response.content), latency_ms

    def _failure(self, exc: Exception, state: _Attempt, watch: CallWatch) -> str | None:
        """A failed attempt, told to the watch: the call's final error when retrying cannot
        help or attempts ran out, else None (sleep, then ask again)."""
        error = self._masked(_describe(exc, timeout=state.timeout))
        slow = isinstance(exc, openai.APITimeoutError)
        watch.attempt_failed(error, self.endpoint_label, slow=slow)
        if slow and not self.endpoint.timeout_seconds:  # a timeout that was set is kept as set
            caps.learn_timeout(self.endpoint_id, state.timeout, float(settings.LLM_TIMEOUT_MAX_SECONDS))
        retryable = isinstance(
            exc,
            (
                openai.RateLimitError,
                openai.InternalServerError,
                openai.APIConnectionError,
                openai.ConflictError,
                MalformedResponse,
            ),
        )
        if not retryable or state.attempts >= settings.LLM_MAX_ATTEMPTS:
            return error
        state.api_failures += 1
        return None

    def _wait_after(self, exc: Exception, state: _Attempt) -> float:
        wait = self._backoff(state.api_failures)
        if isinstance(exc, openai.APIStatusError):
            retry_after = _retry_after_seconds(exc)
            if retry_after is not None:
                wait = retry_after
            if isinstance(exc, openai.RateLimitError):
                limits_get().pause(self.endpoint_id, wait)
        return wait

    def _backoff(self, failures: int) -> float:
        """Exponential backoff with full jitter."""
        ceiling = min(settings.LLM_BACKOFF_MAX_SECONDS, settings.LLM_BACKOFF_BASE_SECONDS * (2 ** (failures - 1)))
        return random.uniform(0, ceiling)

    def _result(
        self,
        key: str,
        request: LLMRequest,
        state: _Attempt,
        outcome: str,
        *,
        path: str,
        text: str = "",
        value: Any = None,
        finish_reason: str = "",
        error: str = "",
    ) -> LLMResult:
        return LLMResult(
            key=key,
            stage=request.stage,
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
                model=self.endpoint.model,
                price_input=self.endpoint.price_input,
                price_output=self.endpoint.price_output,
                tokens_in=state.tokens_in,
                tokens_out=state.tokens_out,
                executor=self.executor,
            ),
        )

    def _record(self, request: LLMRequest, result: LLMResult, body: dict | None, *, run: str, role: str) -> None:
        ledger_write(result.key, self.ledger_fields(request, result, body, run=run, role=role))

    def ledger_fields(
        self, request: LLMRequest, result: LLMResult, body: dict | None, *, run: str, role: str
    ) -> dict[str, Any]:
        """What the ledger stores for a finished request (besides its key)."""
        return dict(
            stage=request.stage,
            role=role,
            run=run,
            base_url=self.endpoint.base_url,
            model=self.endpoint.model,
            executor=self.executor,
            request=request.to_dict(),
            response=body,
            response_text=result.text,
            finish_reason=result.finish_reason,
            outcome=result.outcome,
            parsed=result.value if result.ok else None,
            error=result.error,
            path=result.path,
            attempts=result.attempts,
            tokens_in=result.tokens_in,
            tokens_out=result.tokens_out,
            latency_ms=result.latency_ms,
            cost_usd=result.cost_usd,
        )


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


HISTORY_TEXT_CHARS = 2000  # of a failed answer kept in an entry's history


def _history_item(entry: LedgerEntry) -> dict[str, Any]:
    return {
        "outcome": entry.outcome,
        "error": entry.error,
        "run": entry.run,
        "attempts": entry.attempts,
        "tokens_in": entry.tokens_in,
        "tokens_out": entry.tokens_out,
        "latency_ms": entry.latency_ms,
        "cost_usd": None if entry.cost_usd is None else str(entry.cost_usd),
        "path": entry.path,
        "response_text": (entry.response_text or "")[:HISTORY_TEXT_CHARS],
        "at": entry.created_at.isoformat(),
    }


def ledger_write(key: str, fields: dict[str, Any]) -> None:
    """Store a finished request. An ``ok`` entry is never replaced (a concurrent worker's
    answer is kept). A failed entry is replaced by the newer attempt, and moves into the
    entry's ``history``, so every failed attempt stays visible on the ledger pages."""
    try:
        with transaction.atomic():
            LedgerEntry.objects.create(key=key, **fields)
        return
    except IntegrityError:
        pass
    with transaction.atomic():
        entry = LedgerEntry.objects.select_for_update().filter(key=key).exclude(outcome=OUTCOME_OK).first()
        if entry is None:
            return
        history = [*(entry.history or []), _history_item(entry)]
        # tokens and cost are what this key has cost over every call, failed ones included
        # (itemised in history), so that token counts and cost describe the same attempts
        fields = {
            **fields,
            "tokens_in": int(fields.get("tokens_in") or 0) + entry.tokens_in,
            "tokens_out": int(fields.get("tokens_out") or 0) + entry.tokens_out,
        }
        if fields.get("cost_usd") is not None and entry.cost_usd is not None:
            fields["cost_usd"] = fields["cost_usd"] + entry.cost_usd
        LedgerEntry.objects.filter(pk=entry.pk).update(history=history, created_at=timezone.now(), **fields)


def ledger_write_many(items: list[tuple[str, dict[str, Any]]]) -> None:
    """Store many finished requests with the meaning of ``ledger_write`` for each, in
    order, in a few statements: one lookup of the keys already present, one multi-row
    insert of the new ones. A key that already has an entry (a failure asked again, or
    the same request twice in the list) goes through ``ledger_write``, which keeps an
    ``ok`` entry and moves a replaced failure into the history; so does the whole group
    when another worker inserted one of its keys in the meantime."""
    if not items:
        return
    present = set(LedgerEntry.objects.filter(key__in=[key for key, _ in items]).values_list("key", flat=True))
    fresh: dict[str, dict[str, Any]] = {}
    later: list[tuple[str, dict[str, Any]]] = []
    for key, fields in items:
        if key in present or key in fresh:
            later.append((key, fields))
        else:
            fresh[key] = fields
    try:
        bulk_insert(LedgerEntry, [LedgerEntry(key=key, **fields) for key, fields in fresh.items()])
    except IntegrityError:  # a concurrent writer got there first: one at a time, with its rules
        later = [*fresh.items(), *later]
    for key, fields in later:
        ledger_write(key, fields)


def _describe(exc: Exception, *, timeout: float = 0.0) -> str:
    if isinstance(exc, MalformedResponse):
        return f"malformed response: {exc}"
    if isinstance(exc, openai.APIStatusError):
        return f"{exc.status_code}: {target_words(exc.message)}"  # bounded, no markup (llm/outbound.py)
    if isinstance(exc, openai.APITimeoutError) and timeout:
        return f"no answer within {timeout:.3g} s (timed out; the endpoint accepted the request)"
    return f"{exc.__class__.__name__}: {exc}"


def _error_words(exc: openai.APIStatusError) -> str:
    """What a rejection says: the error's message and the body it came in (servers put the
    reason in different fields: OpenAI's error.message, FastAPI's detail, plain text)."""
    parts = [str(exc.message or "")]
    body = exc.body
    if body is not None:
        parts.append(body if isinstance(body, str) else json.dumps(body, ensure_ascii=False, default=str)[:2000])
    elif exc.response is not None:
        try:
            parts.append(exc.response.text[:2000])
        except Exception:
            pass
    return " ".join(p for p in parts if p)


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


def _parse_problem(exc: Exception) -> str:
    if isinstance(exc, jsonschema.ValidationError):
        where = "/".join(str(p) for p in exc.absolute_path) or "(top level)"
        return f"the JSON does not match the schema at {where}: {exc.message}"
    return str(exc)
