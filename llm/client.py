"""The one client for every OpenAI-compatible endpoint.

``LLMClient(endpoint).complete(request, run=...)`` sends one request (``llm/request.py``)
through the official ``openai`` client and returns an ``LLMResult`` whose ``outcome`` is
exactly one of ``ok``, ``parse_failed``, ``truncated``, ``refused``, ``api_error``; only
``ok`` carries a value. On the way it:

* answers from the request ledger (``llm/ledger.py``) when the request's key has a finished
  entry (no network call, no cost);
* asks for structured output with ``json_schema`` (strict), falling back to JSON mode and
  then plain text with lenient extraction when a server rejects it, and records the path;
  the budget and timeout are fitted to what is known of the endpoint (``llm/fitting.py``);
* retries 429 and 5xx with exponential backoff and jitter, honouring ``retry-after`` and
  ``retry-after-ms``; a 429 pauses the endpoint for every worker (``llm/retries.py``);
* re-asks an unparseable answer with the parse error appended, and retries a truncated
  answer once with a larger token budget (the attempt loop, ``llm/attempts.py``; answers
  are read by ``llm/completions.py``);
* writes the ledger entry (request, raw response, outcome, tokens, latency, cost) as soon
  as the request is finished."""

from __future__ import annotations

import asyncio
import json
import ssl
import time
from collections.abc import Callable, Coroutine
from functools import lru_cache
from typing import Any, Literal, overload

import httpx2 as _http  # the HTTP library the pinned openai client is built on (requirements.txt)
import openai
from django.conf import settings

from core.secret_masking import MASK
from llm import capabilities as caps
from llm.async_http import AsyncTransport, transport_for_loop
from llm.attempts import AttemptLoop
from llm.call_watch import CallWatch
from llm.completions import completion_envelope
from llm.constants import EXECUTOR_ONLINE
from llm.endpoints import Endpoint
from llm.fitting import CallState, EndpointFit
from llm.ledger import ledger_lookup, ledger_write
from llm.limits import EndpointLimits, endpoint_limits_default, limits_get
from llm.outbound import destination_check
from llm.request import LLMRequest, LLMResult
from llm.retries import retry_sleep, retry_sleep_async


@lru_cache(maxsize=1)
def tls_context() -> ssl.SSLContext:
    """The TLS settings every HTTP pool of this process verifies with (the HTTP library's
    defaults: its CA bundle, or ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``). Built once: loading the
    CA bundle costs milliseconds of CPU, and a job opens a pool per 8 requests in flight."""
    return _http.create_ssl_context()


class LLMClient:
    """Calls one endpoint. Thread-safe: executors share one client between threads."""

    def __init__(self, endpoint: Endpoint, *, limits: EndpointLimits | None = None, executor: str = EXECUTOR_ONLINE):
        self.endpoint = endpoint
        self.limits = limits or endpoint.limits or endpoint_limits_default()
        self.executor = executor
        self.endpoint_id = caps.endpoint_key(endpoint.base_url, endpoint.model)
        self.endpoint_label = f"{endpoint.base_url} ({endpoint.model})"
        self.fit = EndpointFit(endpoint, self.endpoint_id)  # fitting requests to it (llm/fitting.py)
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
        # The asynchronous path's transport, made on the first call from an event loop (llm/async_http.py).
        self._async_transport: AsyncTransport | None = None

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

    def _async_transport_get(self) -> AsyncTransport:
        """The running loop's transport (llm/async_http.py): aiohttp, with this client's headers,
        timeout and error classes."""
        self._async_transport = transport_for_loop(
            self._async_transport,
            base_url=str(self.openai.base_url),
            headers={
                **{k: v for k, v in self.openai.default_headers.items() if isinstance(v, str)},
                "X-Stainless-Async": "async:asyncio",
                "Authorization": f"Bearer {self.endpoint.api_key or 'none'}",
            },
            tls=tls_context(),
            errors_from=self.openai,
        )
        return self._async_transport

    async def aclose(self) -> None:
        """Close the running loop's transport (before the loop ends)."""
        transport = self._async_transport
        if transport is None or transport.loop is not asyncio.get_running_loop():
            return
        await transport.aclose()
        self._async_transport = None

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

    # -- the attempt loop (llm/attempts.py) ---------------------------------------------

    def _call(self, request: LLMRequest, key: str, watch: CallWatch) -> tuple[LLMResult, dict | None]:
        """The attempt loop (``llm/attempts.py``) driven by blocking sends and sleeps."""
        steps = AttemptLoop(self, request, key, watch).steps()
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
                retry_sleep(action[1], watch)

    async def _call_async(self, request: LLMRequest, key: str, watch: CallWatch) -> tuple[LLMResult, dict | None]:
        """The same attempt loop driven by an event loop: sends and waits are awaited."""
        steps = AttemptLoop(self, request, key, watch).steps()
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
                await retry_sleep_async(action[1], watch)

    def _send(self, request: LLMRequest, state: CallState, path: str) -> tuple[dict, int]:
        body, estimate = self.fit.wire(request, state, path)
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

    async def _send_async(self, request: LLMRequest, state: CallState, path: str) -> tuple[dict, int]:
        body, estimate = self.fit.wire(request, state, path)
        limits = limits_get()
        content = json.dumps(body, ensure_ascii=False).encode("utf-8")  # before the slot: it holds only the call
        await limits.wait_turn_async(self.endpoint_id, self.limits, estimate)
        async with limits.slot_async(self.endpoint_id, self.limits):
            started = time.perf_counter()
            raw = await self._async_transport_get().post(request.path_url, content, state.timeout)
            latency_ms = int((time.perf_counter() - started) * 1000)
        return completion_envelope(raw), latency_ms

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
