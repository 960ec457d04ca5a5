"""The asynchronous path's transport (llm/async_http.py) against a scripted server: bodies come
back as sent, and every failure is the ``openai`` package's error for it, with the server's
headers (``retry-after``) kept for the retry policy."""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest

from llm.async_http import AsyncTransport, env_proxy, transport_for_loop
from tests.scripted_llm import Raw, Reply, ScriptedLLM, Status


def _run(coroutine):
    """Run a coroutine on a new event loop in a thread of its own (a test before this one may
    have left an event loop running in this thread)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def _transport(base_url: str) -> AsyncTransport:
    return AsyncTransport(
        base_url=base_url,
        headers={"Authorization": "Bearer sk-test-transport"},
        tls=ssl.create_default_context(),
        errors_from=openai.OpenAI(base_url=base_url, api_key="sk-test-transport", max_retries=0),
    )


def _post(base_url: str, body: dict, *, timeout: float = 5.0, path: str = "/chat/completions") -> bytes:
    async def go() -> bytes:
        transport = _transport(base_url)
        try:
            return await transport.post(path, json.dumps(body).encode(), timeout)
        finally:
            await transport.aclose()

    return _run(go())


BODY = {"model": "m", "messages": [{"role": "user", "content": "How do I boil an egg? é"}]}


def test_a_completion_comes_back_with_the_request_sent_as_given():
    with ScriptedLLM() as server:
        server.queue(Reply(content="done", prompt_tokens=7, completion_tokens=2))
        raw = _post(server.base_url, BODY)
        assert json.loads(raw)["choices"][0]["message"]["content"] == "done"
        assert server.requests == [BODY]
        assert server.authorizations == ["Bearer sk-test-transport"]


def test_a_429_is_the_rate_limit_error_with_its_retry_after():
    with ScriptedLLM() as server:
        server.queue(Status(429, "slow down", headers={"retry-after": "7"}))
        with pytest.raises(openai.RateLimitError) as caught:
            _post(server.base_url, BODY)
        assert caught.value.status_code == 429
        assert caught.value.response.headers["retry-after"] == "7"
        assert "slow down" in str(caught.value)


def test_a_500_is_the_server_error():
    with ScriptedLLM() as server:
        server.queue(Status(500, "boom"))
        with pytest.raises(openai.InternalServerError):
            _post(server.base_url, BODY)


def test_a_redirect_is_never_followed():
    with ScriptedLLM() as server:
        server.queue(Raw(b"", code=302, headers={"Location": server.base_url + "/chat/completions"}))
        assert _post(server.base_url, BODY) == b""
        assert len(server.requests) == 1  # the Location was not asked


def test_no_server_is_a_connection_error():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        port = holder.getsockname()[1]
    with pytest.raises(openai.APIConnectionError) as caught:
        _post(f"http://127.0.0.1:{port}/v1", BODY)
    assert not isinstance(caught.value, openai.APITimeoutError)


def test_a_slow_server_is_a_timeout():
    with ScriptedLLM(latency=2.0) as server:
        with pytest.raises(openai.APITimeoutError):
            _post(server.base_url, BODY, timeout=0.3)


def test_one_transport_per_event_loop():
    with ScriptedLLM() as server:
        kwargs = dict(
            base_url=server.base_url,
            headers={},
            tls=ssl.create_default_context(),
            errors_from=openai.OpenAI(base_url=server.base_url, api_key="x"),
        )

        async def twice() -> tuple[AsyncTransport, AsyncTransport]:
            first = transport_for_loop(None, **kwargs)
            second = transport_for_loop(first, **kwargs)
            await first.aclose()
            return first, second

        first, second = _run(twice())
        assert first is second

        async def on_another_loop() -> AsyncTransport:
            third = transport_for_loop(first, **kwargs)
            await third.aclose()
            return third

        assert _run(on_another_loop()) is not first


def test_a_post_takes_no_trip_through_the_thread_pool():
    """The environment's proxy is read once, when the transport is made: a request costs the
    event loop no hand-off to its thread pool (aiohttp's ``trust_env`` made two a request)."""
    with ScriptedLLM() as server:
        server.queue(Reply(content="a"), Reply(content="b"))

        async def go() -> int:
            loop = asyncio.get_running_loop()
            transport = _transport(server.base_url)
            handed: list[object] = []
            run_in_executor = loop.run_in_executor

            def counted(executor, function, *args):
                handed.append(function)
                return run_in_executor(executor, function, *args)

            loop.run_in_executor = counted  # type: ignore[method-assign, assignment]
            try:
                for _ in range(2):
                    await transport.post("/chat/completions", json.dumps(BODY).encode(), 5.0)
            finally:
                await transport.aclose()
            return len(handed)

        assert _run(go()) == 0
        assert len(server.requests) == 2


def test_the_proxy_comes_from_the_environment_unless_no_proxy_covers_the_host(monkeypatch):
    for name in (
        "http_proxy",
        "https_proxy",
        "all_proxy",
        "no_proxy",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "NO_PROXY",
    ):
        monkeypatch.delenv(name, raising=False)
    assert env_proxy("https://api.example.org/v1") is None
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    monkeypatch.setenv("HTTP_PROXY", "http://plain-proxy.internal:8080")
    assert env_proxy("https://api.example.org/v1") == "http://proxy.internal:3128"
    assert env_proxy("http://judge.lab:8000/v1") == "http://plain-proxy.internal:8080"
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,.lab")
    assert env_proxy("http://127.0.0.1:8000/v1") is None
    assert env_proxy("http://judge.lab:8000/v1") is None
    assert env_proxy("https://api.example.org/v1") == "http://proxy.internal:3128"
